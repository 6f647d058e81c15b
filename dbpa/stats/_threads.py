"""One BLAS thread for the small matrices of a test.

A permutation test or an effect interval multiplies matrices of a few hundred rows at most,
thousands of times. OpenBLAS splits each product over every core; on two cores that another
process keeps busy, its threads then wait on each other, and the work took 5-10x longer than
on one thread (``effect_interval`` at k=40: 0.08-0.20 s against 0.016-0.030 s; measured by
``python -m benchmarks threads``). Above ``SMALL_ROWS`` pooled rows the products are large
enough to gain from the threads again, so they keep them.

The limit is taken by the first caller and given back by the last, so nested and concurrent
calls share it. OpenBLAS applies a count set from the main thread to every thread, but
ignores one set from another thread once the main thread has set one; so the audit process
sets one BLAS thread once for all (``OPENBLAS_NUM_THREADS=1`` in ``dbpa.environment``, before
numpy loads), and this limit is for the library called from a program's main thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SMALL_ROWS = 500
"""Pooled rows (k_a + k_b) up to which BLAS runs on one thread."""

_lock = threading.Lock()
_holders = 0
_limiter: Any = None


@functools.cache
def _blas() -> Any:
    """The BLAS libraries loaded in this process (numpy's and scipy's OpenBLAS)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


@contextmanager
def blas_for(rows: int) -> Iterator[None]:
    """BLAS on one thread while the block runs, when ``rows`` is at most ``SMALL_ROWS``."""
    global _holders, _limiter
    if rows > SMALL_ROWS:
        yield
        return
    with _lock:
        if _holders == 0:
            _limiter = _blas().limit(limits=1)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                _limiter.restore_original_limits()
                _limiter = None
