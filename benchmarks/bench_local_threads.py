"""The embedded model's llama.cpp threads on a busy machine: every core against the default.

``OUTPUTS`` answers of ``local/smollm2-135m`` (at most ``LOCAL_TOKENS`` tokens, ``PARALLEL``
requests at a time, as the sampling tasks send them), each measurement from a fresh server:
started on every core (the baseline, ``DBPA_LOCAL_THREADS`` = the cores) and with the
product's default (``dbpa.llm._cores.free_cores``), idle and with other processes keeping
cores busy (pure-Python loops started outside this process's tree, as another job's are: the
default counts its own children's CPU as its own). Wall seconds, median of the repeats; the
ratio is baseline / default (above 1: the default is faster).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from benchmarks._results import ResultFile
from dbpa.llm import local_server, stop_local_server

MODEL = "local/smollm2-135m"
OUTPUTS = 16
LOCAL_TOKENS = 64
PARALLEL = 8


@contextmanager
def _busy_elsewhere(processes: int) -> Iterator[None]:
    """``processes`` loops keeping a core busy each, started by a shell that exits at once
    (so that they are nobody's child of this process)."""
    loop = f'"{sys.executable}" -c "while True: pass" >/dev/null 2>&1 & echo $!'
    pids = [
        int(subprocess.run(["sh", "-c", loop], capture_output=True, text=True).stdout)
        for _ in range(processes)
    ]
    try:
        time.sleep(1.0 if pids else 0.0)
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)


@contextmanager
def _threads_env(value: str | None) -> Iterator[None]:
    """``DBPA_LOCAL_THREADS`` set to ``value`` (unset for None) inside the block."""
    before = os.environ.pop("DBPA_LOCAL_THREADS", None)
    if value is not None:
        os.environ["DBPA_LOCAL_THREADS"] = value
    try:
        yield
    finally:
        os.environ.pop("DBPA_LOCAL_THREADS", None)
        if before is not None:
            os.environ["DBPA_LOCAL_THREADS"] = before


def _answers(threads: str | None) -> tuple[int, float]:
    """A fresh server's threads and the wall seconds of its ``OUTPUTS`` answers."""
    stop_local_server(MODEL)
    with _threads_env(threads):
        server = local_server(MODEL)

    def answer(seed: int) -> None:
        body = {
            "model": "smollm2-135m",
            "messages": [{"role": "user", "content": "What should I do about a headache?"}],
            "max_tokens": LOCAL_TOKENS,
            "temperature": 1.0,
            "seed": seed,
        }
        request = urllib.request.Request(
            f"{server.api_base}/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            response.read()

    start = time.perf_counter()
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(answer, range(OUTPUTS)))
    seconds = time.perf_counter() - start
    stop_local_server(MODEL)
    return server.threads, seconds


def rows(loads: tuple[int, ...], repeats: int) -> list[list[object]]:
    """Per load: threads and median seconds on every core, then with the default."""
    cores = str(len(os.sched_getaffinity(0)))
    found: list[list[object]] = []
    for load in loads:
        with _busy_elsewhere(load):
            every = [_answers(cores) for _ in range(repeats)]
            default = [_answers(None) for _ in range(repeats)]
        base = statistics.median(s for _, s in every)
        product = statistics.median(s for _, s in default)
        found.append(
            [
                "no extra load" if load == 0 else f"+{load} busy processes",
                cores,
                f"{base:.1f}",
                "/".join(sorted({str(t) for t, _ in default})),
                f"{product:.1f}",
                f"{base / product:.2f}",
            ]
        )
    return found


def main(quick: bool = False) -> None:
    result_file = ResultFile("local_threads", quick)
    repeats = 1 if quick else 3
    result_file.table(
        f"{MODEL}: wall seconds of {OUTPUTS} answers of at most {LOCAL_TOKENS} tokens, "
        f"{PARALLEL} at a time, median of {repeats} fresh servers; llama.cpp on every core "
        "against the default (free_cores)",
        ["load", "every core: threads", "seconds", "default: threads", "seconds", "ratio"],
        rows((0, 1) if quick else (0, 1, 2), repeats),
    )
    result_file.write()


if __name__ == "__main__":
    main()
