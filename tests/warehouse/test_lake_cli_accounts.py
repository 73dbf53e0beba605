"""`cdrhouse lake info` and `cdrhouse lake reset` on a lake of several accounts (issue 25).

A real local lake: `default` (the root), `emea` and `apac` (sub-lakes), each with a CDR day,
its aggregates and its own source, and a warehouse over them; the commands run through
`pipelines.cli.main` as a shell runs them.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from connectors.sandbox.generator import Dataset
from pipelines.cli import main
from tests.support.lake import lake_files
from tests.warehouse.conftest import write_day
from warehouse.duck import WAREHOUSE_FILE, build_warehouse, write_aggregates
from warehouse.lake import DEFAULT_ACCOUNT, Lake, lake_file, partition_key

DAY = dt.date(2026, 11, 20)
SEEDS = {DEFAULT_ACCOUNT: 21, "emea": 22, "apac": 23}


def _lake(data_dir: Path) -> Lake:
    lake = Lake((data_dir / "lake").as_uri())
    for account, seed in SEEDS.items():
        sub = lake.account(account)
        sub.claim(f"sandbox:{seed}")
        write_day(sub, Dataset(seed=seed, start_date=DAY, days=1, cdrs_per_day=30), DAY)
        write_aggregates(sub, partition_key("date", DAY))
    build_warehouse(data_dir)
    return lake


def _env(data_dir: Path) -> dict[str, str]:
    return {"CDRHOUSE_DATA_DIR": str(data_dir)}


def test_lake_info_shows_every_account_its_source_and_partitions(tmp_path: Path, capsys) -> None:
    lake = _lake(tmp_path)
    assert main(["lake", "info"], env=_env(tmp_path)) == 0
    out = capsys.readouterr().out
    cdrs = f"  {'cdrs':<24} {1:>5} partitions  date={DAY} .. date={DAY}"
    # The root's own (default) first, unnamed as before accounts; then each account by id.
    blocks = out.split("\naccount ")
    assert blocks[0].startswith(f"lake:   {lake.uri}\nsource: sandbox:21\n")
    assert cdrs in blocks[0]
    assert [b.split(":")[0] for b in blocks[1:]] == ["apac", "emea"]
    for block, account in zip(blocks[1:], ("apac", "emea"), strict=True):
        assert block.startswith(f"{account}: {lake.uri}/account_id={account}\n")
        assert f"source: sandbox:{SEEDS[account]}\n" in block
        assert cdrs in block

    assert main(["lake", "info", "--account", "emea"], env=_env(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "account emea:" in out
    assert "sandbox:22" in out
    assert "apac" not in out
    assert "sandbox:21" not in out


def test_lake_reset_of_one_account_keeps_every_other_byte(tmp_path: Path, capsys) -> None:
    lake = _lake(tmp_path)
    before = lake_files(tmp_path)
    env = _env(tmp_path)

    # Without --yes: a line saying what would go, nothing deleted.
    assert main(["lake", "reset", "--account", "apac"], env=env) == 2
    err = capsys.readouterr().err
    assert "account apac's files" in err
    assert "--yes" in err
    assert lake_files(tmp_path) == before

    assert main(["lake", "reset", "--account", "apac", "--yes"], env=env) == 0
    assert "account_id=apac" in capsys.readouterr().out
    after = lake_files(tmp_path)
    gone = {name for name in before if name.startswith("account_id=apac/")}
    assert gone
    assert after == {k: v for k, v in before.items() if k not in gone}  # the rest byte-identical
    assert Lake(lake.uri).accounts() == [DEFAULT_ACCOUNT, "emea"]
    assert Lake(lake.uri).account("apac").source() is None  # another source may claim it now
    # The views no longer scan apac: the analyst's next query rebuilds them over what is left.
    assert not (tmp_path / WAREHOUSE_FILE).exists()
    query = "SELECT account_id, count(*) AS n FROM cdrs GROUP BY ALL ORDER BY 1"
    assert main(["sql", "--format", "json", query], env=env) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["account_id"] for r in rows] == [DEFAULT_ACCOUNT, "emea"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lake", "reset", "--account", "amer", "--yes"], "no account 'amer'"),
        (["lake", "info", "--account", "amer"], "no account 'amer'"),
        (["lake", "info", "--account", "EMEA"], "no account 'EMEA'"),
        (["lake", "reset", "--account", "default", "--yes"], "would delete accounts apac, emea"),
    ],
    ids=["reset-unknown", "info-unknown", "info-not-an-id", "reset-root-alone"],
)
def test_lake_account_mistakes_exit_2_and_delete_nothing(
    argv: list[str], message: str, tmp_path: Path, capsys
) -> None:
    _lake(tmp_path)
    before = lake_files(tmp_path)
    views = (tmp_path / WAREHOUSE_FILE).read_bytes()
    assert main(argv, env=_env(tmp_path)) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert lake_files(tmp_path) == before
    assert (tmp_path / WAREHOUSE_FILE).read_bytes() == views


def test_an_account_that_only_claimed_can_be_reset(tmp_path: Path, capsys) -> None:
    """A sub-lake with a source recorded and no partition (its data removed by hand): its
    claim is undone by resetting it, as a whole lake's is."""
    lake = _lake(tmp_path)
    lake.account("amer").claim("https://wrong.cc.example.com")
    assert main(["lake", "reset", "--account", "amer", "--yes"], env=_env(tmp_path)) == 0
    assert "source was https://wrong.cc.example.com" in capsys.readouterr().out
    assert Lake(lake.uri).account("amer").source() is None


@pytest.mark.parametrize("account", ["apac", None], ids=["one-account", "whole-lake"])
def test_a_reset_keeps_the_forget_list(account: str | None, tmp_path: Path, capsys) -> None:
    """An erasure outlives a reset: the next ingest of the same calls reads the forget-list
    and lands the token as null (`privacy forget`), so it must still be there."""
    lake = _lake(tmp_path)
    token = "ab" * 32
    lake.account("apac").forget([token])
    lake.forget(["cd" * 32])
    argv = ["lake", "reset", "--yes"] + (["--account", account] if account else [])
    assert main(argv, env=_env(tmp_path)) == 0
    capsys.readouterr()
    after = Lake(lake.uri)
    assert after.account("apac").forgotten() == {token}
    assert after.forgotten() == ({"cd" * 32})
    assert after.account("apac").source() is None
    # Only the lists are left of what went: no partition, no account holding data.
    assert after.accounts() == ([] if account is None else [DEFAULT_ACCOUNT, "emea"])
    left = {name for name in lake_files(tmp_path) if name.startswith("account_id=apac/")}
    assert left == {"account_id=apac/_privacy/forgotten_tokens.txt"}


def test_one_account_reset_on_an_object_store_lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The same on `s3://` (moto's server): `lake info` lists both accounts, and resetting one
    deletes its objects only, keeping its forget-list and every object of the other."""
    from tests.deploy._services import start_moto

    (tmp_path / "moto").mkdir()
    with start_moto(tmp_path / "moto") as s3:
        for name, value in s3.env().items():
            monkeypatch.setenv(name, value)
        bucket = s3.create_bucket("reset-one")
        lake = Lake(f"s3://{bucket}/lake")
        for account, seed in (("emea", 22), ("apac", 23)):
            sub = lake.account(account)
            sub.claim(f"sandbox:{seed}")
            write_day(sub, Dataset(seed=seed, start_date=DAY, days=1, cdrs_per_day=20), DAY)
        lake.account("apac").forget(["ef" * 32])
        client = s3.client()
        # Another tool's object under the account's prefix: not the lake's, it stays.
        client.put_object(Bucket=bucket, Key="lake/account_id=apac/handover.txt", Body=b"x")

        def objects() -> dict[str, bytes]:
            return {
                k: client.get_object(Bucket=bucket, Key=k)["Body"].read()
                for k in s3.keys(bucket, "lake/")
            }

        before = objects()
        env = {**_env(tmp_path / "data"), "CDRHOUSE_LAKE_URI": lake.uri}
        assert main(["lake", "info"], env=env) == 0
        out = capsys.readouterr().out
        assert f"account apac: {lake.uri}/account_id=apac" in out
        assert f"account emea: {lake.uri}/account_id=emea" in out
        assert main(["lake", "reset", "--account", "apac", "--yes"], env=env) == 0
        capsys.readouterr()
        after = objects()
        kept = ["lake/account_id=apac/_privacy/forgotten_tokens.txt"]
        kept.append("lake/account_id=apac/handover.txt")
        assert after == {
            k: v for k, v in before.items() if not k.startswith("lake/account_id=apac/")
        } | {k: before[k] for k in kept}
        assert Lake(lake.uri).accounts() == ["emea"]
        assert Lake(lake.uri).account("apac").forgotten() == {"ef" * 32}


# Files under a lake's root that cdrhouse never writes: a reset leaves each byte of them.
FOREIGN = {
    "notes.txt": b"the team's notes",
    "other_tool/export.csv": b"a,b\n1,2\n",
    "cdrs/README.md": b"a file inside a table's folder, not a partition",
    "cdrs/date=2026-11-20/part-0.parquet.bak": b"a copy made by hand",
    "account_id=emea/handover.txt": b"inside an account's sub-lake",
    "account_id=Bad/cdrs/date=2026-11-20/part-0.parquet": b"no account: a bad id",
    "older/cdrs/date=2026-11-20/part-0.parquet": b"another lake, one level down",
}


@pytest.mark.parametrize("account", ["emea", None], ids=["one-account", "whole-lake"])
def test_a_reset_deletes_only_what_the_lake_wrote(
    account: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lake URI set one folder too high, or a bucket prefix shared with other data: a reset
    deleted every file under it. It deletes the lake's own files and names the others."""
    lake = _lake(tmp_path)
    root = tmp_path / "lake"
    for rel, data in FOREIGN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    theirs = {rel for rel in FOREIGN if account is None or rel.startswith(f"account_id={account}/")}
    argv = ["lake", "reset", "--yes"] + (["--account", account] if account else [])
    before = lake_files(tmp_path)

    assert main(argv, env=_env(tmp_path)) == 0

    out = capsys.readouterr().out.splitlines()
    after = lake_files(tmp_path)
    assert {rel: after[rel] for rel in FOREIGN} == FOREIGN  # every foreign byte is there
    assert f"kept {len(theirs)} file(s) under it that cdrhouse did not write" in out[-1]
    lake_owned = set(before) - set(FOREIGN)
    gone = lake_owned - set(after)
    prefix = f"account_id={account}/" if account else ""
    assert gone == {r for r in lake_owned if r.startswith(prefix) and "_privacy" not in r}
    assert Lake(lake.uri).accounts() == ([] if account is None else [DEFAULT_ACCOUNT, "apac"])


@pytest.mark.parametrize(
    ("rel", "owned"),
    [
        ("_cdrhouse_lake.json", True),
        ("cdrs/date=2026-11-20/part-0.parquet", True),
        ("agg_daily_volume/date=2026-11-20/part-0.parquet", True),
        ("users/snapshot_date=2026-11-20/part-0.parquet", True),
        ("_rejected/cdrs/date=2026-11-20/part-0.parquet", True),
        ("_tmp/cdrs.date=2026-11-20.0a1b.parquet", True),
        ("_tmp/agg-copy/cdrs/date=2026-11-20/part-0.parquet", True),
        ("account_id=emea/cdrs/date=2026-11-20/part-0.parquet", True),
        ("account_id=emea/_cdrhouse_lake.json", True),
        ("_privacy/forgotten_tokens.txt", False),
        ("account_id=emea/_privacy/pii_key.json", False),
        ("account_id=Emea/cdrs/date=2026-11-20/part-0.parquet", False),
        ("account_id=emea/account_id=x/cdrs/date=2026-11-20/part-0.parquet", False),
        ("cdrs/date=2026-11-20/part-1.parquet", False),
        ("cdrs/part-0.parquet", False),
        ("a/b/cdrs/date=2026-11-20/part-0.parquet", False),
        ("Cdrs/date=2026-11-20/part-0.parquet", False),
        ("notes.txt", False),
    ],
)
def test_which_files_are_the_lakes(rel: str, owned: bool) -> None:
    assert lake_file(rel) is owned
    # A sub-lake has no account folders of its own.
    assert lake_file(rel, accounts=False) is (owned and not rel.startswith("account_id="))
