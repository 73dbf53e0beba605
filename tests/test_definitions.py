import dagster as dg

from pipelines.definitions import defs


def test_definitions_load() -> None:
    assert isinstance(defs, dg.Definitions)
    repo = defs.get_repository_def()
    assert repo.name
