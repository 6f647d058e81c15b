"""Runs take turns at writing a record: several started at the same moment each wait theirs
(``ready_to_write``), whatever the timing; without waiting, a second fails at once."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storage import DatabaseInUseError, lock_path, ready_to_write

pytestmark = pytest.mark.file_only("the turns of processes waiting for the file's one writer")

RUNS = 4

RUN = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from storage import Store, ready_to_write

    db = Path(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()  # every run starts at the same moment
    told = []

    def on_wait(pid):
        told.append(pid)
        print("waiting", flush=True)

    with ready_to_write(db, wait=True, on_wait=on_wait, poll_s=0.05):
        time.sleep(0.2)  # a run reads and plans, then opens the record to write
        with Store(db) as store:
            start = time.monotonic()
            time.sleep(0.3)
            end = time.monotonic()
    print(json.dumps({"told": told, "start": start, "end": end}), flush=True)
    """
)


def test_runs_started_together_each_wait_their_turn(tmp_path: Path):
    """The test holds the turn until every run has been told to wait, so each run's first
    try finds it taken however the processes are scheduled; then they go one at a time."""
    db = tmp_path / "audit.duckdb"
    held = ready_to_write(db, wait=False, on_wait=lambda pid: None)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", RUN, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parents[2],
        )
        for _ in range(RUNS)
    ]
    try:
        for run in runs:
            assert run.stdout is not None
            assert run.stdout.readline().strip() == "ready"
        for run in runs:
            assert run.stdin is not None
            run.stdin.write("\n")
            run.stdin.flush()
        for run in runs:
            assert run.stdout is not None
            assert run.stdout.readline().strip() == "waiting"
        held.release()
        ended = [run.communicate(timeout=120) for run in runs]
    finally:
        held.release()
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
    assert [run.returncode for run in runs] == [0] * RUNS, [err for _, err in ended]
    found = sorted((json.loads(out) for out, _ in ended), key=lambda r: r["start"])
    for first, second in itertools.pairwise(found):
        assert first["end"] <= second["start"]  # one writer at a time
    assert all(r["told"] == [os.getpid()] for r in found)  # each was told who held the turn
    assert lock_path(db).is_file()


def test_without_waiting_a_second_run_fails_at_once(tmp_path: Path):
    db = tmp_path / "audit.duckdb"
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from storage import ready_to_write

        with ready_to_write(Path(sys.argv[1]), wait=False, on_wait=print):
            print("turn", flush=True)
            sys.stdin.readline()
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "turn"
        start = time.monotonic()
        with pytest.raises(DatabaseInUseError) as caught:
            ready_to_write(db, wait=False, on_wait=print)
        assert time.monotonic() - start < 1
        assert caught.value.pid == holder.pid
        assert f"database {db.resolve()} is in use by another run (process {holder.pid})" in str(
            caught.value
        )
    finally:
        holder.communicate("\n", timeout=30)
    with ready_to_write(db, wait=False, on_wait=print):  # its turn ended with the process's
        pass
