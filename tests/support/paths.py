"""Where the repository is, for tests that read its files or run its commands."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# The local Dagster instance of `make dev`/`make demo` (sqlite under DAGSTER_HOME); not at the
# repository root, where `dg dev` (run from there) would warn that it is not used.
LOCAL_INSTANCE_YAML = REPO_ROOT / "dagster.yaml"
