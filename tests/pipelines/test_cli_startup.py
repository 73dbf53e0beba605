"""`cdrhouse --help` and usage errors answer without importing Dagster, polars, DuckDB or pyarrow,
and `cdrhouse sql` answers with DuckDB alone.

Each case runs in a fresh interpreter (this test process has them all loaded already) and looks
at `sys.modules` after `main(argv)` returns or exits. No timings are asserted: the imports are
what the fixed cost is made of, and they are deterministic where wall time is not.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.support.clock import FAR_FUTURE
from tests.support.fresh import heavy, python, run_main

# (argv, env given to main, exit code, a line expected in stdout (0) or stderr (2))
CASES = {
    "help": (["--help"], {}, 0, "usage: cdrhouse"),
    "ingest-help": (["ingest", "--help"], {}, 0, "--start START"),
    "sql-help": (["sql", "--help"], {}, 0, "--format {table,csv,json,parquet}"),
    "lake-help": (["lake", "--help"], {}, 0, "{info,reset,views}"),
    "demo-help": (["demo", "--help"], {}, 0, "--days DAYS"),
    "no-command": ([], {}, 2, "the following arguments are required: command"),
    "unknown-command": (["nope"], {}, 2, "invalid choice: 'nope'"),
    "missing-end": (
        ["ingest", "--start", "2026-11-01"],
        {},
        2,
        "the following arguments are required: --end",
    ),
    "bad-start": (
        ["ingest", "--start", "nope", "--end", "2026-11-02"],
        {},
        2,
        "cdrhouse: error: --start 'nope' is not a date; use YYYY-MM-DD",
    ),
    "bad-end": (
        ["ingest", "--start", "2026-11-01", "--end", "11/02/2026"],
        {},
        2,
        "cdrhouse: error: --end '11/02/2026' is not a date",
    ),
    "empty-range": (
        ["ingest", "--start", "2026-11-02", "--end", "2026-11-01"],
        {"CC_API_BASE_URL": "sandbox"},
        2,
        "cdrhouse: error: --end 2026-11-01 must be after --start 2026-11-02",
    ),
    "end-beyond-today": (
        ["ingest", "--start", "2026-11-01", "--end", FAR_FUTURE],
        {"CC_API_BASE_URL": "sandbox"},
        2,
        f"cdrhouse: error: --end {FAR_FUTURE} is beyond today",
    ),
    "bad-days": (["demo", "--days", "many"], {}, 2, "argument --days: invalid int value"),
    # Setup mistakes told from the arguments and variables alone answer before Dagster loads.
    "no-source": (
        ["ingest", "--start", "2026-11-01", "--end", "2026-11-02"],
        {},
        2,
        "cdrhouse: error: no data source configured",
    ),
    "start-year-1": (
        ["ingest", "--start", "0001-01-01", "--end", "0001-01-02"],
        {"CC_API_BASE_URL": "sandbox"},
        2,
        "cdrhouse: error: --start 0001-01-01 is before 2000-01-01",
    ),
    "base-url-typo": (
        ["ingest", "--start", "2026-11-01", "--end", "2026-11-02"],
        {"CC_API_BASE_URL": "sandbx"},
        2,
        "did you mean `sandbox`?",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_help_and_usage_errors_import_nothing_heavy(tmp_path: Path, case: str) -> None:
    argv, env, code, expected = CASES[case]
    result = run_main(tmp_path, argv, {**env, "CDRHOUSE_DATA_DIR": str(tmp_path / "data")})
    assert result["code"] == code, result
    stream = result["out"] if code == 0 else result["err"]
    assert expected in str(stream), result
    if code == 2:
        assert result["out"] == ""
    assert heavy(result["modules"]) == []  # type: ignore[arg-type]
    assert not (tmp_path / "data").exists()  # nothing written either


def test_the_module_entry_point_help_imports_nothing_heavy(tmp_path: Path) -> None:
    """`python -m pipelines.cli --help`, the way the deploy tests and benches run it."""
    proc = python(tmp_path, "-X", "importtime", "-m", "pipelines.cli", "--help")
    assert proc.stdout.startswith("usage: cdrhouse")
    for name in ("ingest", "demo", "sandbox", "lake", "sql"):
        assert name in proc.stdout
    imported = [
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert "argparse" in imported  # the log was parsed
    assert heavy(imported) == []


def test_a_real_command_still_loads_what_it_needs(tmp_path: Path) -> None:
    """The control: a command that gets past the early checks (here refused for a setting the
    code location validates, exit 2) does import Dagster, so the checks above would see a
    regression."""
    env = {
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_LOOKBACK_DAYS": "three",
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
    }
    result = run_main(tmp_path, ["ingest", "--start", "2026-11-01", "--end", "2026-11-02"], env)
    assert result["code"] == 2
    assert "CDRHOUSE_LOOKBACK_DAYS" in str(result["err"])
    assert "dagster" in result["modules"]  # type: ignore[operator]


# `cdrhouse sql` needs DuckDB and nothing else heavy: not the lake's polars and pyarrow, not the
# object stores' fsspec, not Dagster or the settings' pydantic (issue 24: a query's start-up).
NOT_FOR_SQL = ("polars", "pyarrow", "dagster", "pydantic", "fsspec")
BUILDERS = ("warehouse.duck", "warehouse.lake", "warehouse.viewsql", "models.tables")


@pytest.fixture(scope="module")
def one_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding one sandbox day and the warehouse's views over it."""
    from connectors.sandbox.generator import Dataset
    from tests.warehouse.conftest import write_day
    from warehouse.duck import build_warehouse
    from warehouse.lake import Lake

    day = date(2026, 11, 2)
    data_dir = tmp_path_factory.mktemp("sql-startup") / "data"
    dataset = Dataset(seed=4, start_date=day, days=1, cdrs_per_day=300)
    write_day(Lake((data_dir / "lake").as_uri()), dataset, day)
    build_warehouse(data_dir)
    return data_dir


@pytest.mark.parametrize("lake_uri", [False, True], ids=["default-lake", "lake-uri-set"])
def test_sql_answers_a_view_with_duckdb_alone(
    one_day: Path, tmp_path: Path, lake_uri: bool
) -> None:
    import duckdb

    query = "SELECT type, count(*) AS cdrs FROM cdrs GROUP BY type ORDER BY type"
    env = {"CDRHOUSE_DATA_DIR": str(one_day)}
    if lake_uri:  # the URI's shape is checked before the query: that check stays light too
        env["CDRHOUSE_LAKE_URI"] = (one_day / "lake").resolve().as_uri()
    result = run_main(tmp_path, ["sql", query], env)
    assert result["code"] == 0, result
    with duckdb.connect(str(one_day / "warehouse.duckdb"), read_only=True) as con:
        want = con.sql(query).fetchall()
    assert len(want) == 4  # every CDR type landed
    lines = str(result["out"]).splitlines()
    assert [[c.strip() for c in line.split("|")] for line in lines[2:-1]] == [
        [t, str(n)] for t, n in want
    ], lines
    assert lines[-1] == "(4 rows)"
    modules: list[str] = result["modules"]  # type: ignore[assignment]
    assert "duckdb" in modules  # the control: the query did run in that process
    loaded = [m for m in modules if m.split(".")[0] in NOT_FOR_SQL or m in BUILDERS]
    assert loaded == [], loaded[:12]
