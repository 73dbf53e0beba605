"""The code location's definitions, one folder per concern, autoloaded by Dagster.

Each folder's `definitions.py` holds its builder (`build_<concern>(location)`, which
`pipelines.definitions.build_defs` calls with explicit settings) and its autoloaded entry
point `defs` (`@dg.definitions`: the same builder with the environment's settings, read at load
time). No other module of this folder defines a Dagster object at module level: Dagster's
loader would collect it a second time.
"""
