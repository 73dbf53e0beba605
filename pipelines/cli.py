"""The `cdrhouse` command: `sandbox`, `ingest`, `sql` and `demo`."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cdrhouse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="ingest the last 7 days from the sandbox and query them")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        print("cdrhouse demo: will ingest the last 7 days from the bundled sandbox (not built yet)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
