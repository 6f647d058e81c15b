"""Prefect's events still queued when the temporary server has stopped: one short line, not
a 5 KB line per event; any other line of Prefect's workers cut to 200 characters."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from dbpa.launch._events import DROPPED, LONGEST_LINE, quiet_failures
from tests.support.cli_process import ROOT

SERVICES = "prefect._internal.concurrency"
PREFIX = "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s"
"""The prefix of Prefect's console lines."""


@pytest.fixture
def shown():
    """What Prefect's workers' logger prints, with Prefect's prefix; its filter removed after."""
    logger = logging.getLogger(SERVICES)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(PREFIX, datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    filters = list(logger.filters)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        for added in [f for f in logger.filters if f not in filters]:
            logger.removeFilter(added)


class Event:  # as long as one of Prefect's events, printed whole
    def __repr__(self) -> str:
        return "Event(" + "x" * 5000 + ")"


def test_a_failure_while_the_server_runs_is_cut_to_length(shown):
    quiet_failures(lambda: False)
    logger = logging.getLogger(SERVICES)
    logger.error("Service %r failed to process item %r", "EventsWorker", Event())
    logger.error("short")
    lines = shown.getvalue().splitlines()
    assert len(lines) == 2
    assert max(map(len, lines)) <= LONGEST_LINE
    assert "characters left out" in lines[0]
    assert lines[1].endswith(" - short")


def test_failures_once_the_server_stopped_are_one_line(shown):
    quiet_failures(lambda: True)
    logger = logging.getLogger(SERVICES)
    for _ in range(8):
        logger.error("Service %r failed to process item %r", "EventsWorker", Event())
    assert [line.split(" - ", 1)[1] for line in shown.getvalue().splitlines()] == [DROPPED]


STOPPED_FIRST = """
import time
from dbpa.launch import PrefectServer
from prefect.events import emit_event

server = PrefectServer.launch()
server.confirm()
server.ready()
emit_event(event="dbpa.first", resource={"prefect.resource.id": "dbpa.first"})
time.sleep(2)  # sent: the events client is connected
server._server._process.kill()  # the server ends first, as a signal to the process group does
server._server._process.wait()
for i in range(2):  # a flow's last events, as long as a task's (each retried for ~8 s)
    emit_event(
        event=f"dbpa.{i}", resource={"prefect.resource.id": f"dbpa.{i}"}, payload={"x": "x" * 5000}
    )
"""


@pytest.mark.slow
def test_events_pending_when_the_server_stopped_print_no_long_line(tmp_path, prefect_home):
    """Measured before, with eight such events: eight lines of 5,307 characters (each event
    whole) and eight 320-character warnings. Two events are enough to tell one line from one
    per event."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(STOPPED_FIRST)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (done.stdout + done.stderr).splitlines()
    assert max(map(len, lines), default=0) <= LONGEST_LINE, lines
    assert sum(DROPPED in line for line in lines) == 1
