"""What tells a setup mistake apart: the lake URI's shape, and errors no retry can fix.

The process-level tests (exit 2 within 10 s, one line) are in tests/reliability/test_bad_inputs.py
and tests/deploy/test_setup_*.py; these hold the classification itself, both ways: what must be
refused or called fatal, and what must not be (a valid URI, an error that may be transient).
"""

from __future__ import annotations

import errno

import pytest

from pipelines.preflight import source_problem
from warehouse.stores import lake_uri_problem, setup_problem


@pytest.mark.parametrize(
    "uri",
    [
        "data/lake",
        "/abs/lake",
        "file:///abs/lake",
        "file://localhost/abs/lake",
        "s3://bucket",
        "s3://bucket/prefix/lake",
        "s3a://bucket/lake",
        "gs://bucket/lake",
        "abfs://container/lake",
        # Characters DuckDB's globs take as themselves (tests/reliability/test_bad_inputs.py)
        "/srv/it's a {x} ü,]%s/lake",
        "file:///srv/it%27s%20%7Bx%7D/lake",
    ],
)
def test_lake_uris_that_can_work_are_accepted(uri: str) -> None:
    assert lake_uri_problem(uri) is None


@pytest.mark.parametrize(
    ("uri", "needle"),
    [
        ("s3:/acme/lake", "s3://<bucket>/<prefix>"),
        ("s3://", "no bucket"),
        ("s3:acme/lake", "no bucket"),
        ("ftp://x/y", "ftp:// is not supported"),
        ("http://example.com/lake", "http:// is not supported"),
        ("file://data/lake", "file:///abs/path"),
        ("file:relative/lake", "absolute path"),
        ("s3://AKIA:secret@bucket/lake", "must not carry credentials"),
        ("s3://bucket/lake?versionId=1", "query"),
        (" s3://bucket/lake", "padded"),
        # DuckDB's globs: `/srv/data*` also read `/srv/data2`'s files, `x[1]` read none.
        ("/srv/data*/lake", "holds *"),
        ("data[1]/lake", "holds ["),
        ("file:///srv/lake%5B1%5D", "holds ["),
        ("file:///srv/a\\b/lake", "holds \\"),
        ("s3://bucket/lake-*", "holds *"),
        ("", "empty"),
    ],
)
def test_lake_uris_that_cannot_work_are_refused_in_one_line(uri: str, needle: str) -> None:
    problem = lake_uri_problem(uri)
    assert problem is not None
    assert needle in problem
    assert "\n" not in problem
    assert "secret" not in problem


def test_a_full_disk_is_fatal_and_other_os_errors_are_not() -> None:
    full = OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] ...")
    assert setup_problem(RuntimeError("wrapped"), "x") is None
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = full  # what `raise ... from full` leaves
    problem = setup_problem(wrapped, "/data/lake")
    assert problem is not None
    assert problem.startswith("No space left on device on the disk holding /data/lake")
    for code in (errno.EFBIG, errno.EDQUOT):
        assert setup_problem(OSError(code, "x"), "y") is not None
    # A transient error stays retriable, and another program's message is not read as ours:
    # an API whose own disk is full must not stop the command as if ours were.
    assert setup_problem(OSError(errno.ECONNRESET, "reset"), "x") is None
    assert setup_problem(ValueError("server: No space left on device"), "x") is None


@pytest.mark.parametrize(
    ("base_url", "key", "shown", "hint"),
    [
        ("sandbx", None, "'sandbx'", "did you mean `sandbox`?"),
        ("SANDBOX ", None, None, None),  # the word itself, any case: no problem at all
        ("acme.cc.example.com", None, "'acme.cc.example.com'", "https://acme.cc.example.com"),
        ("sk-live-0123456789abcdef", None, None, "not shown"),
        ("https://sk-live-1@acme.example.com", "k", None, "credentials"),
        ("https://acme.example.com/sk-live-2", "sk-live-2", None, "path"),
    ],
)
def test_base_url_problems_come_before_the_key_and_never_echo_a_secret(
    base_url: str, key: str | None, shown: str | None, hint: str | None
) -> None:
    problem = source_problem(base_url, key)
    if hint is None:
        assert problem is None
        return
    assert problem is not None
    assert "CC_API_KEY is not" not in problem  # the URL first, whatever the key
    assert hint in problem
    if shown is not None:
        assert f"CC_API_BASE_URL={shown}" in problem
    assert "sk-live" not in problem


@pytest.mark.parametrize(
    "command", [["lake", "info"], ["sql", "select 1"], ["report", "--days", "1"]]
)
@pytest.mark.parametrize("uri", ["s3:/acme/lake", "ftp://x/y"])
def test_warehouse_commands_refuse_a_malformed_lake_uri_in_one_line(
    command: list[str], uri: str, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    env = {"CDRHOUSE_DATA_DIR": str(tmp_path), "CDRHOUSE_LAKE_URI": uri}
    assert main(command, env=env) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"cdrhouse: error: CDRHOUSE_LAKE_URI={uri!r}: ")
    assert list(tmp_path.iterdir()) == []  # nothing written
