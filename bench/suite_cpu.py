"""Where the test suite's CPU goes, by kind of process: a run of pytest under a `/proc` sampler.

    .venv/bin/python -m bench.suite_cpu                         # the whole suite, as `make test`
    .venv/bin/python -m bench.suite_cpu -- tests/pipelines -k ingest   # pytest arguments

Every 0.3 s the sampler reads each process's CPU time (`/proc/PID/stat`, user + system) and
command line, and keeps the last figure per process (a process's last < 0.3 s is missed; a
command line is read again at each sample, so a child seen between fork and exec is named by
what it ran). The table groups them by kind: the pytest workers (the in-process tests), the
`cdrhouse` commands, Dagster's processes, the services. Kernel threads are left out. The
suite's time budget is a CPU budget on 2 cores: this says which processes spend it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

SAMPLE_S = 0.3
HZ = os.sysconf("SC_CLK_TCK")
# The pytest line of `make test` (the Makefile's `test` target), without coverage options.
MAKE_TEST = [
    "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder", "-q", "-p", "no:cacheprovider"
]  # fmt: skip
# (kind, a regex searched in the command line), first match wins.
KINDS: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(pattern))
    for name, pattern in [
        ("pytest workers (in-process tests)", r"import sys;exec\(eval\(sys\.stdin"),
        ("pytest main", r"-m pytest"),
        ("cdrhouse sandbox (served)", r"connectors\.sandbox\.serve|cdrhouse sandbox"),
        ("cdrhouse ingest", r"(pipelines\.cli|cdrhouse) ingest"),
        ("cdrhouse other commands", r"pipelines\.cli|bin/cdrhouse"),
        ("Dagster run workers (spawned)", r"multiprocessing\.spawn|dagster.*execute_run"),
        ("Dagster daemons", r"dagster(\._daemon|-daemon)"),
        ("Dagster webservers", r"dagster[-_]webserver"),
        ("Dagster code servers", r"dagster.*(grpc|code-server)"),
        ("dagster dev / dg dev", r"(dagster|bin/dg) dev "),
        ("schemathesis", r"bin/st "),
        ("Chromium", r"chrom|headless_shell"),
        ("moto (S3)", r"moto"),
        ("PostgreSQL", r"postgres"),
        ("pip / installs", r"-m pip "),
        ("other Python", r"python"),
    ]
]


def kind(cmdline: str) -> str:
    return next((name for name, pattern in KINDS if pattern.search(cmdline)), "other")


class Sampler:
    """The last CPU seconds and command line of every process seen (by pid and start time)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int], tuple[str, float]] = {}
        self.before: dict[tuple[int, int], float] = {}  # CPU of processes older than the run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(first=False)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample(first=False)

    def _sample(self, *, first: bool) -> None:
        me = os.getpid()
        for proc in Path("/proc").iterdir():
            entry = proc.name
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                stat = (proc / "stat").read_text()
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[1] in ("0", "2"):  # ppid 2: a kernel thread
                continue
            cpu = (int(fields[11]) + int(fields[12])) / HZ
            key = (int(entry), int(fields[19]))
            text = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            if first:
                self.before[key] = cpu
            if text:  # a zombie's is empty: keep what it ran
                self.seen[key] = (text, cpu)
            elif key in self.seen:
                self.seen[key] = (self.seen[key][0], cpu)

    def used(self) -> list[tuple[float, str]]:
        """(CPU seconds during the run, command line) of each process, the most first."""
        rows = [(cpu - self.before.get(k, 0.0), text) for k, (text, cpu) in self.seen.items()]
        return sorted((row for row in rows if row[0] > 0), reverse=True)

    def by_kind(self) -> dict[str, tuple[float, int]]:
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for key, (text, cpu) in self.seen.items():
            used = cpu - self.before.get(key, 0.0)
            if used <= 0:
                continue
            total = totals[kind(text)]
            total[0] += used
            total[1] += 1
        return {k: (v[0], int(v[1])) for k, v in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--show", type=int, default=0, help="also list the N costliest processes")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args()
    argv = [sys.executable, "-m", "pytest", *MAKE_TEST, *args.pytest_args]
    started = time.monotonic()
    with Sampler() as sampler:
        code = subprocess.call(argv)
    wall = time.monotonic() - started
    kinds = sampler.by_kind()
    total = sum(cpu for cpu, _ in kinds.values())
    cores = os.cpu_count() or 1
    print(f"\n{' '.join(argv[3:])}: exit {code}, wall {wall:.0f} s on {cores} cores")
    print(f"CPU {total:.0f} s, {100 * total / (wall * cores):.0f} % of what the cores could give")
    print(f"{'processes':<36} {'CPU s':>8} {'share':>6} {'count':>6}")
    for name, (cpu, count) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:<36} {cpu:8.1f} {100 * cpu / total:5.1f}% {count:6d}")
    for cpu, text in sampler.used()[: args.show]:
        print(f"{cpu:8.1f}  {kind(text):<24.24}  {text[:110]}")
    sys.exit(code)


if __name__ == "__main__":
    main()
