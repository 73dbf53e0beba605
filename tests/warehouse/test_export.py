"""`warehouse.export`: `cdrhouse sql`'s file formats written a batch at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest

from pipelines.cli import main
from warehouse import export

from .conftest import SmallWarehouse

# Values polars formats in its own way (decimals, time zones, escapes, empty and null
# strings), over 10,007 rows: many batches of 64, and a short last one.
VARIED = """
SELECT range AS i,
       (range / 7)::DECIMAL(18, 6) AS cost,
       TIMESTAMPTZ '2026-11-01 00:00:00+00' + range * INTERVAL 1 SECOND AS started_at,
       CASE range % 5 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN 'a,"b"' || chr(10) || 'c'
            WHEN 3 THEN 'Zoë ☎ ' || range ELSE '=1+1' END AS text,
       range % 3 = 0 AS flag,
       range * 1.5 AS ratio,
       DATE '2026-11-01' + (range % 40)::INTEGER AS day
FROM range(10007)
"""


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_written_in_batches_equals_the_whole_results_text(
    con: duckdb.DuckDBPyConnection, fmt: str
) -> None:
    whole = pl.DataFrame(pl.from_arrow(con.sql(VARIED).to_arrow_table()))
    want = whole.write_csv() if fmt == "csv" else whole.write_json() + "\n"
    chunks = list(export.text_chunks(con.sql(VARIED), fmt, batch_rows=64))
    assert len(chunks) > 100
    assert "".join(chunks) == want


@pytest.mark.parametrize(("fmt", "want"), [("csv", "i\n"), ("json", "[]\n")])
def test_no_rows_is_the_header_or_an_empty_array(
    con: duckdb.DuckDBPyConnection, fmt: str, want: str
) -> None:
    rel = con.sql("SELECT 1 AS i WHERE false")
    assert "".join(export.text_chunks(rel, fmt)) == want


def test_nested_values_are_json_text_in_csv_and_stay_nested_in_json(
    con: duckdb.DuckDBPyConnection,
) -> None:
    query = """SELECT ['conference', 'whisper'] AS tags, map(['busy'], [3]) AS reasons,
               {'a': 1} AS s, [1, 2]::INTEGER[2] AS pair, [] AS none"""
    csv = "".join(export.text_chunks(con.sql(query), "csv"))
    assert csv.splitlines()[1] == (
        '"[""conference"",""whisper""]","{""busy"":3}","{""a"":1}","[1,2]",[]'
    )
    [row] = json.loads("".join(export.text_chunks(con.sql(query), "json")))
    assert row == {
        "tags": ["conference", "whisper"],
        "reasons": {"busy": 3},
        "s": {"a": 1},
        "pair": [1, 2],
        "none": [],
    }


@pytest.mark.parametrize(
    "query",
    [
        "SELECT INTERVAL 3 DAY AS x",
        "SELECT 'a'::BLOB AS x",
        "SELECT union_value(k := 1) AS x",
        "SELECT '101'::BIT AS x",
        "SELECT {'b': 'a'::BLOB} AS x",
    ],
)
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_values_polars_cannot_take_are_written_as_duckdb_prints_them(
    con: duckdb.DuckDBPyConnection, fmt: str, query: str
) -> None:
    """Each was a polars traceback (or a Rust panic) before. CSV has nested values as JSON."""
    nested = fmt == "csv" and ("{" in query or "union" in query)
    cast = "to_json(x)::VARCHAR" if nested else "x::VARCHAR"
    [(printed,)] = con.sql(f"SELECT {cast} FROM ({query})").fetchall()
    text = "".join(export.text_chunks(con.sql(query), fmt))
    if fmt == "json":
        assert json.loads(text) == [{"x": printed}]
    else:
        assert text.splitlines() == [
            "x",
            f'"{printed.replace(chr(34), 2 * chr(34))}"' if nested else printed,
        ]


def test_parquet_is_written_in_full_row_groups_with_every_value(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """DuckDB hands over a batch per file it reads: written as they came, a lake's 2,000-row
    days made a Parquet file of 2,000-row groups, 27x the size of one written whole."""
    days = tmp_path / "days"
    days.mkdir()
    for day in range(40):  # a lake-like read: many small files
        con.sql(f"SELECT * FROM ({VARIED}) WHERE day = DATE '2026-11-01' + {day}").write_parquet(
            str(days / f"{day:02}.parquet")
        )
    rel = con.sql(f"SELECT * FROM read_parquet('{days}/*.parquet') ORDER BY i")
    out = tmp_path / "out.parquet"
    export.write_parquet(rel, out)
    meta = pq.ParquetFile(out).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [10007]
    got = pl.read_parquet(out)
    assert got.equals(pl.DataFrame(pl.from_arrow(con.sql(VARIED).to_arrow_table())))
    assert isinstance(got.schema["cost"], pl.Decimal)


def test_parquet_of_a_type_it_has_no_place_for_is_one_error(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    with pytest.raises(export.ExportError, match=r"^cannot write the rows as parquet: "):
        export.write_parquet(con.sql("SELECT INTERVAL 1 DAY AS x"), tmp_path / "x.parquet")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_query_that_fails_half_way_prints_nothing(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """Standard output gets every row or none, as when the result was held whole: the rows
    of a query that fails after 200,000 of them (or that `read_whole` runs again because the
    lake changed under it) are not printed."""
    query = (
        "SELECT CASE WHEN range < 200000 THEN range ELSE error('late') END AS i FROM range(300000)"
    )
    code = main(["sql", "--format", fmt, query], env={"CDRHOUSE_DATA_DIR": str(small.data_dir)})
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.startswith("cdrhouse sql: error:")
    assert "late" in err


def test_a_whole_result_is_printed_once(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT range AS i FROM range(120000)"
    assert (
        main(["sql", "--format", "csv", query], env={"CDRHOUSE_DATA_DIR": str(small.data_dir)}) == 0
    )
    out = capsys.readouterr().out
    assert out == "i\n" + "".join(f"{i}\n" for i in range(120000))


# The child's own peak: VmHWM is its address space's, where ru_maxrss keeps the forking
# pytest worker's peak across exec.
PEAK = """
import re, sys
from pathlib import Path
from pipelines.cli import main
code = main(sys.argv[1:])
status = Path("/proc/self/status").read_text()
print(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_a_big_export_holds_a_batch_not_the_result(
    small: SmallWarehouse, tmp_path: Path, fmt: str
) -> None:
    """3M rows of ~110 bytes: the whole result as a frame, and its text, were > 700 MB."""
    query = "SELECT range AS i, repeat('x', 100) AS s FROM range(3000000)"
    out = tmp_path / f"out.{fmt}"
    argv = ["sql", "--format", fmt, query]
    if fmt == "parquet":
        argv += ["--output", str(out)]
    env = {**os.environ, "CDRHOUSE_DATA_DIR": str(small.data_dir)}
    with out.open("wb") if fmt != "parquet" else Path(os.devnull).open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-c", PEAK, *argv],
            env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    peak_mb = int(done.stderr.split()[-1]) / 1024
    assert peak_mb < 350, f"{peak_mb:.0f} MB"
    if fmt == "csv":
        with out.open() as fh:
            assert fh.readline() == "i,s\n"
            assert sum(1 for _ in fh) == 3_000_000
    elif fmt == "json":
        assert out.stat().st_size > 3_000_000 * 110
    else:
        assert pq.ParquetFile(out).metadata.num_rows == 3_000_000


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_name_met_twice_gets_a_suffix_instead_of_an_error(
    con: duckdb.DuckDBPyConnection, fmt: str
) -> None:
    """`SELECT a.id, b.id ...` (two columns named `id`) was refused: polars holds a name once."""
    query = "SELECT 1 AS id, 2 AS id, ['x'] AS tags, ['y'] AS tags"
    text = "".join(export.text_chunks(con.sql(query), fmt))
    if fmt == "csv":
        assert text == 'id,id_1,tags,tags_1\n1,2,"[""x""]","[""y""]"\n'
    else:
        assert json.loads(text) == [{"id": 1, "id_1": 2, "tags": ["x"], "tags_1": ["y"]}]


def test_a_full_temp_dir_fails_the_printed_export_whole_and_leaves_nothing(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    """Standard output's rows wait in a temp dir (`TMPDIR`, here a real full tmpfs): running
    out of it is one line and exit 1, with no row printed and no part left behind."""
    from tests.support.disk import FILLER, small_filesystem

    query = "SELECT range AS i, md5(range::VARCHAR) AS h FROM range(200000)"
    env = {**os.environ, "CDRHOUSE_DATA_DIR": str(small.data_dir)}
    with small_filesystem(free_bytes=64 * 1024) as fs:
        done = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", "sql", "--format", "csv", query],
            env={**env, "TMPDIR": str(fs)}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stdout == ""
        assert done.stderr.startswith("cdrhouse sql: error:"), done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert sorted(p.name for p in fs.iterdir()) == [FILLER]


def test_no_connection_of_ours_draws_duckdb_s_progress_bar(small: SmallWarehouse) -> None:
    # DuckDB draws it on standard output, a file too ("\r 4% ▕███ ... (~40 seconds
    # remaining)"), once a query has run 2 s: `sql --format csv > out.csv` began with it on a
    # loaded machine (test_a_big_export_holds_a_batch_not_the_result[csv] failed in CI).
    from warehouse.analyst import connect_analyst
    from warehouse.duck import connect

    setting = "SELECT current_setting('enable_progress_bar')"
    analyst = connect_analyst(small.data_dir)
    try:
        assert analyst.execute(setting).fetchone() == (False,)
    finally:
        analyst.close()
    with connect(small.data_dir) as con:
        assert con.execute(setting).fetchone() == (False,)
