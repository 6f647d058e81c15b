"""BLAS threads on small matrices: the product's one-thread limit against OpenBLAS's default.

``dbpa.stats`` runs BLAS on one thread for tests of at most ``SMALL_ROWS`` pooled rows
(``dbpa/stats/_threads.py``). This suite times ``effect_interval`` (B=2000) and
``permutation_test`` (auto, B=2000) at several k, d=384, with the limit (the product) and
without it (the baseline: the limit switched off in the same run), on idle cores and on two
cores kept busy by two other processes (a pure-Python loop each, as another job would).
Each figure is the median of the repeats; the ratio is baseline / product (above 1: the
limit is faster).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from threadpoolctl import ThreadpoolController

import dbpa.stats._threads as threads
from benchmarks._results import ResultFile
from dbpa.stats import effect_interval, permutation_test

D = 384
B = 2000


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        pass


@contextmanager
def _busy(processes: int) -> Iterator[None]:
    """``processes`` other processes each keeping a core busy."""
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(processes)]
    for p in spinners:
        p.start()
    try:
        yield
    finally:
        stop.set()
        for p in spinners:
            p.join()


@contextmanager
def _unlimited() -> Iterator[None]:
    """The baseline: BLAS on one thread per core at every size (OpenBLAS's default)."""
    small = threads.SMALL_ROWS
    threads.SMALL_ROWS = -1
    try:
        with ThreadpoolController().limit(limits=os.cpu_count(), user_api="blas"):
            yield
    finally:
        threads.SMALL_ROWS = small


def _median_seconds(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(quick: bool = False) -> None:
    result_file = ResultFile("threads", quick)
    ks = (20, 40) if quick else (20, 40, 100, 200)
    repeats = 3 if quick else 7
    rng = np.random.default_rng(0)
    rows = []
    for load in (0, 2):
        with _busy(load):
            for k in ks:
                a, b = rng.standard_normal((k, D)), rng.standard_normal((k, D))
                calls = {
                    "effect_interval": lambda a=a, b=b: effect_interval(a, b, n_bootstrap=B, rng=0),
                    "permutation_test auto": lambda a=a, b=b: permutation_test(
                        a, b, omega="auto", n_permutations=B, rng=0
                    ),
                }
                for name, call in calls.items():
                    product = _median_seconds(call, repeats)
                    with _unlimited():
                        baseline = _median_seconds(call, repeats)
                    load_name = "no extra load" if load == 0 else f"+{load} busy processes"
                    rows.append([load_name, name, k, baseline, product, baseline / product])
    result_file.table(
        f"BLAS threads, d={D}, B={B}: median seconds of {repeats} calls (SMALL_ROWS="
        f"{threads.SMALL_ROWS} pooled rows)",
        ["cores", "call", "k", "default threads", "one thread (product)", "ratio"],
        rows,
    )
    result_file.write()


if __name__ == "__main__":
    main()
