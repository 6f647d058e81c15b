"""``dbpa run`` stopped by SIGTERM: it exits 143 at once, leaves no process behind, and the
next run resumes from the record; a signal that arrives in importlib's own code waits until that
code returns; a stop turned into another error, or swallowed, on its way out still ends the
run by it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from dbpa.llm import _runner, stop_requests
from storage import Store, UnknownRunError
from tests.cli.conftest import invoke
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.cli_process import ROOT
from tests.support.scripted_server import ScriptedServer
from tests.support.signals import alive, descendants, interruptible

CHAT = "/v1/chat/completions"


DROPPED = """
import pathlib, sys, time
from dbpa.launch import _server

marker = pathlib.Path(sys.argv.pop(1))
refresh = _server._refresh_prefect_settings


class Serializer:  # an exception raised in __del__ is printed and dropped, as pydantic-core did
    def __del__(self):
        marker.touch()
        time.sleep(30)  # the SIGTERM arrives here


def refresh_after_a_dropped_signal():  # as the server is ready, the head start still sampling
    Serializer()
    refresh()


_server._refresh_prefect_settings = refresh_after_a_dropped_signal
from dbpa.cli import app
app()
"""


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "when", ["in-the-head-start", "in-the-flow", "dropped-in-the-head-start"]
)  # the head start asks about 20 of the 50 outputs (its chunks), the flow the rest
def test_sigterm_while_sampling_exits_143_and_stops_prefects_server(
    tmp_path, prefect_home, monkeypatch, when
):
    """The stopped run is a fresh interpreter with Prefect's temporary server, as a user runs
    it; the run that resumes it runs here, on the harness's server, and is not stopped by
    the stop an earlier run of its process left. Dropped: the handler's exit is raised in
    code that prints and drops it (pydantic-core serializing a setting did, in a clean clone,
    and the run then sampled every output): the run still asks for nothing more, and its
    flow does not start."""
    with ScriptedServer(rules=RULES, latency=1.0) as provider:
        config = tmp_path / "audit.yaml"
        config.write_text(yaml.safe_dump(make_config(provider, k=10)))
        db = tmp_path / "a.duckdb"
        stderr = tmp_path / "stderr"
        marker = tmp_path / "dropping"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env |= {"PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(ROOT), KEY_ENV: "sk-x"}
        start = ["-c", DROPPED, str(marker)] if when.startswith("dropped") else ["-m", "dbpa.cli"]
        with stderr.open("w") as stderr_file:  # the child holds its own copy
            process = subprocess.Popen(
                [sys.executable, *start, "run", str(config), "--db", str(db)],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=stderr_file,
            )
        try:
            deadline = time.monotonic() + 120
            while not (
                marker.exists()
                if when.startswith("dropped")
                else provider.counts.by_endpoint[CHAT] >= (25 if when == "in-the-flow" else 1)
            ):
                assert time.monotonic() < deadline, f"not {when} within 120 s"
                time.sleep(0.05)
            children = descendants(process.pid)
            process.send_signal(signal.SIGTERM)
            asked_at_signal = provider.counts.by_endpoint[CHAT]
            code = process.wait(timeout=60)
            assert code == 128 + signal.SIGTERM, stderr.read_text()[-3000:]
        finally:
            process.kill()
        provider.latency = 0.0  # the run that resumes it is not stopped: it need not wait
        time.sleep(0.5)
        assert children, "Prefect's temporary server runs as a child"
        assert not [pid for pid in children if alive(pid)]
        asked_before = provider.counts.by_endpoint[CHAT]
        if when.startswith("dropped"):
            assert "Exception ignored in" in stderr.read_text()
            with Store(db, read_only=True) as store, pytest.raises(UnknownRunError):
                store.run("latest")  # the flow, which starts the record's run, never ran

        monkeypatch.setattr(_runner, "_stopped", [])  # the process's flag, for this test only
        stop_requests()  # as a signal that ended an earlier run of this process left it
        again = invoke("run", str(config), "--db", str(db))
        assert again.exit_code == 0, again.output
        # The requests in flight at the signal were answered and kept before the exit, and
        # none was sent after them: at most the model's max_concurrency (8) in flight; no
        # output of the 5 arms x k=10 was asked twice. (Before the sampler stopped at the
        # signal, each sampling task of the flow finished its arm.)
        assert 0 < asked_before <= asked_at_signal + 8
        assert provider.counts.by_endpoint[CHAT] == 5 * 10


MACHINERY = """
def machinery():  # compiled as importlib's own code
    import os, signal, time
    os.kill(os.getpid(), signal.{name})
    time.sleep(0.5)  # the handler runs here, in importlib's code, every 50 ms
    print("returned", flush=True)
"""

MODULE = """
import os, signal, time
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.5)
print("imported", flush=True)
"""

SERIALIZER = """
import os, signal, time
from pydantic import BaseModel, model_serializer

class Settings(BaseModel):  # as Prefect's settings serialize themselves
    @model_serializer(mode="wrap")
    def _ser_model(self, handler):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # the handler runs here, inside pydantic-core's call
        return handler(self)
"""

SWALLOWED = """
import os, signal, time

def swallow():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
    except BaseException:
        print("swallowed", flush=True)
"""

SCRIPT = """
import time
from dbpa.cli._signals import stopped_by_signals
with stopped_by_signals():
    try:
        {body}
        {then}
    finally:
        print("finally", flush=True)
"""


def _stopped(
    tmp_path: Path, body: str, preexec_fn=interruptible, then: str = "time.sleep(30)"
) -> subprocess.CompletedProcess[str]:
    """A Python process that runs ``body``, then ``then``, within ``stopped_by_signals``; the
    modules of ``tmp_path`` importable."""
    script = textwrap.dedent(SCRIPT).format(body=body, then=then)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        preexec_fn=preexec_fn,
    )


@pytest.mark.parametrize(
    ("name", "code"), [("SIGTERM", 128 + signal.SIGTERM), ("SIGINT", -signal.SIGINT)]
)
def test_a_signal_in_importlibs_code_acts_once_that_code_returns(tmp_path, name, code):
    source = tmp_path / "machinery.py"
    source.write_text(MACHINERY.format(name=name))
    done = _stopped(
        tmp_path,
        f"ns = {{}}; exec(compile(open({str(source)!r}).read(), "
        "'<frozen importlib._bootstrap>', 'exec'), ns); ns['machinery']()",
    )
    # Python reports an uncaught KeyboardInterrupt by dying of SIGINT.
    assert done.returncode == code, done.stderr
    assert done.stdout.split() == ["returned", "finally"]


def test_a_signal_in_a_modules_own_code_acts_at_once(tmp_path):
    # Raised there, the exception unwinds through importlib's blocks, which release its locks.
    (tmp_path / "slow_module.py").write_text(MODULE)
    done = _stopped(tmp_path, "import slow_module")
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stdout.split() == ["finally"]


def test_a_signal_outside_imports_stops_the_process_at_once(tmp_path):
    started = time.monotonic()
    done = _stopped(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stdout.split() == ["finally"]
    assert time.monotonic() - started < 15  # not the 30 s sleep


def test_an_ignored_sigint_stays_ignored(tmp_path):
    done = _stopped(
        tmp_path,
        "import os, signal; os.kill(os.getpid(), signal.SIGINT); time.sleep(0.2); "
        "print('alive', flush=True); raise SystemExit(0)",
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["alive", "finally"]


def test_a_stop_that_c_code_turned_into_another_error_still_exits_143(tmp_path):
    # CI's exit 2: pydantic-core wrapped the SystemExit into a ValueError.
    (tmp_path / "serialized.py").write_text(SERIALIZER)
    done = _stopped(tmp_path, "import serialized; serialized.Settings().model_dump_json()")
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stdout.split() == ["finally"]


def test_a_stop_that_was_swallowed_ends_the_block_with_143(tmp_path):
    (tmp_path / "swallowing.py").write_text(SWALLOWED)
    done = _stopped(tmp_path, "import swallowing; swallowing.swallow()", then="pass")
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stdout.split() == ["swallowed", "finally"]
