"""A family of 500 template perturbations at k=8, B=9,999 on a scripted server (issue 49):
wall time, CPU time and peak RSS of the audit, in a process of its own after a warm-up audit.

``python -m benchmarks._template_family [--m M]`` prints one line. Run it from two checkouts
in one session (with each one's sources first on the path) to compare them: it is not part of
``python -m benchmarks`` (a few minutes a run). The provider and its answers are
``bench_scale``'s (12 equally likely answers, deterministic hash embeddings, 50 ms a
request); unlike there the config is a valid one (k=8 gives 12,869 splits, enough for Holm
over 500 tests at B=9,999), so every test also computes its effect interval, tilted guard
included, at B=9,999. CPU time is the audit process's (its threads included; the provider's
and the Prefect server's processes are not counted).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks.bench_scale import _settings, audit_bench

M = 500
K = 8
B = 9999


def _config(api: Any, m: int, name: str) -> Any:
    from dbpa.config import parse_config

    values = [f"style number {i}" for i in range(m)]
    template = [{"kind": "template", "template": "Answer in {style}.", "values": values}]
    return parse_config(
        _settings(api, m, K, name) | {"perturbations": template, "n_permutations": B}
    )


def _audit(conn: Connection, env: dict[str, str], warm: Any, config: Any, tmp: str) -> None:
    """Run ``warm``, then ``config``, and send back (wall s, CPU s, peak RSS MB)."""
    os.environ.update(env)
    sys.stdout = sys.stderr = open(Path(tmp) / "audit.log", "a", buffering=1)  # noqa: SIM115
    from flows.audit import run_audit

    run_audit(warm, db=str(Path(tmp) / "warm.duckdb"), out=str(Path(tmp) / "warm"))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    run_audit(config, db=str(Path(tmp) / "family.duckdb"), out=str(Path(tmp) / "reports"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    conn.send((wall, cpu, after.ru_maxrss / 1024))


def main(m: int = M) -> None:
    load = os.getloadavg()
    with audit_bench("family") as (server, env, warm, tmp):
        ours, theirs = mp.get_context("spawn").Pipe()
        child = mp.get_context("spawn").Process(
            target=_audit, args=(theirs, env, warm, _config(server, m, f"family-{m}"), str(tmp))
        )
        child.start()
        wall, cpu, peak = ours.recv()
        child.join(timeout=60)
    print(
        f"template family m={m}, k={K}, B={B}: wall {wall:.1f} s, CPU {cpu:.1f} s, "
        f"peak RSS {peak:.0f} MB (load average before: {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}; after: {' '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks._template_family")
    parser.add_argument("--m", type=int, default=M, help="perturbations (default 500)")
    main(parser.parse_args().m)
