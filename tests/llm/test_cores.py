"""The embedded model's threads take only the cores that no other work keeps busy."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dbpa.llm._cores import cores_left, free_cores, own_seconds

SPIN = "import time\nwhile True: pass\n"
SPIN_THEN_SLEEP = (
    "import time\n"
    "while time.process_time() < 0.3: pass\n"
    "print('spun', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.mark.parametrize(
    ("cores", "busy", "left"),
    [(2, 0.0, 2), (2, 0.49, 2), (2, 0.5, 1), (2, 1.0, 1), (2, 3.9, 1), (8, 2.6, 5), (4, -0.2, 4)],
)
def test_a_core_busy_half_the_time_or_more_is_taken(cores: int, busy: float, left: int) -> None:
    assert cores_left(cores, busy) == left


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_core_another_process_keeps_busy_is_not_given_to_the_model() -> None:
    # Started by a shell that exits at once, the spinner is nobody's child of this process.
    started = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "{SPIN}" >/dev/null 2>&1 & echo $!'],
        capture_output=True,
        text=True,
        check=True,
    )
    spinner = int(started.stdout)
    try:
        time.sleep(0.2)
        assert free_cores(window=0.5) <= len(os.sched_getaffinity(0)) - 1
    finally:
        os.kill(spinner, 9)


def test_the_cpu_of_this_process_children_counts_as_its_own() -> None:
    """A child (the run's Prefect server) is this run's work, not work elsewhere."""
    child = subprocess.Popen([sys.executable, "-c", SPIN_THEN_SLEEP], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"spun\n"
        assert own_seconds() - time.process_time() >= 0.25  # /proc counts in clock ticks
    finally:
        child.kill()
        child.wait()
