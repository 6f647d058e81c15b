"""BLAS runs on one thread inside a small test, and gets its threads back after."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController

import dbpa.stats._threads as threads
from dbpa.stats import effect_interval


def _blas_threads() -> set[int]:
    return {
        lib.num_threads for lib in ThreadpoolController().select(user_api="blas").lib_controllers
    }


@pytest.fixture
def two_threads():
    """BLAS at 2 threads around the test, whatever the machine's default."""
    with ThreadpoolController().limit(limits=2, user_api="blas"):
        yield


@pytest.mark.usefixtures("two_threads")
def test_small_blocks_run_on_one_thread_and_nest():
    with threads.blas_for(40):
        assert _blas_threads() == {1}
        with threads.blas_for(80):
            assert _blas_threads() == {1}
        assert _blas_threads() == {1}  # the outer block still holds it
    assert _blas_threads() == {2}


@pytest.mark.usefixtures("two_threads")
def test_large_blocks_keep_their_threads():
    with threads.blas_for(threads.SMALL_ROWS + 1):
        assert _blas_threads() == {2}


@pytest.mark.usefixtures("two_threads")
def test_a_statistic_gives_the_threads_back_when_it_raises():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_bootstrap"):
        effect_interval(rng.standard_normal((8, 3)), rng.standard_normal((8, 3)), n_bootstrap=5)
    effect_interval(rng.standard_normal((8, 3)), rng.standard_normal((8, 3)), n_bootstrap=200)
    assert _blas_threads() == {2}


def test_the_audit_process_runs_blas_on_one_thread_unless_told_otherwise():
    """Set before numpy loads OpenBLAS, for every thread of the process (a count set from a
    worker thread does not hold once the main thread has set one)."""
    code = (
        "import dbpa.cli, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "[1]", done.stderr
    env["OPENBLAS_NUM_THREADS"] = "2"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "[2]", done.stderr
