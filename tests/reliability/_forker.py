"""The forker process of the reliability suite (see `conftest.Forker`).

Imports the pipeline once, then per stdin line `{"jobs": [...]}` forks one child per job, prints
`{"pids": [...]}`, waits for them all and prints `{"children": [{"pid", "status", "result"}]}`.
A child runs `run_ingest` (the `cdrhouse ingest` code path) on an ephemeral instance; a job may
cap the size of any file the child writes (`fsize`, RLIMIT_FSIZE): a disk that fills up.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import sys
import tempfile
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.cli import run_ingest
from pipelines.resources import ContactCenterResource
from tests.support.served import suite_defs


def run_job(spec: dict[str, Any]) -> dict[str, Any]:
    fsize = spec.get("fsize")
    if fsize is not None:
        # Past the limit a write fails with EFBIG instead of the process being signalled:
        # the same code path as ENOSPC on a full disk.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, hard))
    contact_center = ContactCenterResource(
        base_url=spec["base_url"], api_key=spec["api_key"], **spec["resource"]
    )
    defs = suite_defs(
        contact_center, Path(spec["data_dir"]), date.fromisoformat(spec["start_date"])
    )
    out = io.StringIO()
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(
            defs,
            spec["days"],
            instance=instance,
            data_dir=Path(spec["data_dir"]),
            snapshots=False,
            out=out,
        )
    return {
        "success": report.success,
        "output": out.getvalue(),
        "runs": [asdict(r) for r in report.runs],
    }


def child(spec: dict[str, Any], result_path: str) -> None:
    try:
        result = run_job(spec)
    except BaseException as exc:  # report anything to the test, never hang it
        result = {"success": False, "crash": f"{type(exc).__name__}: {exc}"}
    # Lift the cap again (soft back to hard) so the result itself can be written.
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    Path(result_path).write_text(json.dumps(result))


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    results_dir = Path(tempfile.mkdtemp(prefix="forker-"))
    for line in sys.stdin:
        jobs = json.loads(line)["jobs"]
        pids: list[int] = []
        paths: list[str] = []
        for n, spec in enumerate(jobs):
            path = str(results_dir / f"{os.getpid()}-{len(pids)}-{n}.json")
            pid = os.fork()
            if pid == 0:  # the child: run, write the result, leave without cleanup handlers
                code = 0
                try:
                    child(spec, path)
                except BaseException:
                    code = 1
                os._exit(code)
            pids.append(pid)
            paths.append(path)
        print(json.dumps({"pids": pids}), flush=True)
        children = []
        for pid, path in zip(pids, paths, strict=True):
            _, status = os.waitpid(pid, 0)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            result_file = Path(path)
            result = json.loads(result_file.read_text()) if result_file.exists() else None
            result_file.unlink(missing_ok=True)
            children.append({"pid": pid, "status": code, "result": result})
        print(json.dumps({"children": children}), flush=True)


if __name__ == "__main__":
    main()
