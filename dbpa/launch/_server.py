"""Prefect's temporary server for ``dbpa run``, started first and waited for last.

With no ``PREFECT_API_URL``, Prefect starts a temporary local server when the first flow
run asks for a client: it imports its whole server package in this process, launches the
server, and only then does the flow begin. ``dbpa run`` instead launches the same server
(Prefect's app, ephemeral mode, on 127.0.0.1, living as long as this process) before it
imports Prefect at all, so the server's start-up (seconds of imports in its own process)
overlaps this process's imports, config loading, planning and model warm-up. Once Prefect's
settings are loaded, the launch is confirmed (no API URL and ephemeral mode allowed) or
undone; once the server answers, ``PREFECT_API_URL`` points this process at it.

Start-up gets ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` when the user set it, else
:data:`DEFAULT_STARTUP_TIMEOUT_S` (Prefect's 20 s is too short on a loaded machine), and one
retry; a server that still does not answer is a :class:`TemporaryServerError` whose message
says what to do.

The server never outlives this process, also when it is killed with SIGKILL (no exit hook
runs then): on Linux the server asks the kernel for SIGTERM when its parent ends
(``PR_SET_PDEATHSIG``, set before it imports anything, then a check that the parent has not
ended already), and its log is an unnamed file. The kernel sends that signal when the
*thread* that started the server ends, so :class:`TemporaryServer` is made in the main thread.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._events import LOGGERS, ShortFailures, quiet_failures, send_pending

DEFAULT_STARTUP_TIMEOUT_S = 90
"""Seconds to wait for the server when the user has not set Prefect's own timeout."""
ATTEMPTS = 2
"""Launches before giving up (a first one and one retry)."""
TIMEOUT_SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
_LOG_PREFIX = re.compile(r"^\d\d:\d\d:\d\d\.\d+ \| \w+ +\| [\w.]+ - ")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*:")
_POLL_S = 0.05
_POLL_TIMEOUT_S = 2.0
_STOP_TIMEOUT_S = 5.0
_WITH_ITS_PARENT = """\
import ctypes, os, runpy, signal, sys
parent = int(sys.argv.pop(1))
if sys.platform == "linux":
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when it ends
if os.getppid() != parent:  # it ended before that
    sys.exit(0)
sys.argv[0] = "uvicorn"
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
"""


class TemporaryServerError(RuntimeError):
    """Prefect's temporary server did not start (the message says what to do instead)."""


class TemporaryServer:
    """One launch of Prefect's server in ephemeral mode on a free port of 127.0.0.1, ending
    with this process (make it in the main thread: see the module doc)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open while it runs)
        environment = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        environment.update(
            # What Prefect sets for its own temporary server: no UI, ephemeral mode.
            PREFECT_UI_ENABLED="0",
            PREFECT__SERVER_EPHEMERAL="1",
            PREFECT__SERVER_FINAL="1",
        )
        self.started = time.monotonic()
        self._process = subprocess.Popen(
            _uvicorn_ending_with(
                os.getpid(),
                "--app-dir",  # as Prefect does: not the working directory
                _prefect_parent(),
                "--factory",
                "prefect.server.api.server:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "error",
                "--lifespan",
                "on",
            ),
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def wait(self, timeout: float) -> str | None:
        """None once the server answers; why not, after ``timeout`` s from its launch."""
        import urllib.request  # here: ``dbpa --help`` imports this module

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while time.monotonic() - self.started < timeout:
            if self._process.poll() is not None:
                return f"it exited with code {self._process.returncode}{self._last_output()}"
            health = f"{self.api_url}/health"
            with contextlib.suppress(OSError), opener.open(health, timeout=_POLL_TIMEOUT_S):
                return None
            time.sleep(_POLL_S)
        return f"it did not answer within {timeout:g} s{self._last_output()}"

    @property
    def running(self) -> bool:
        """Whether its process has not ended (stopped here, or by a signal of its own)."""
        return self._process.poll() is None

    def stop(self) -> None:
        """End the server (and its log file); safe to call twice."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def _last_output(self) -> str:
        """The error the server printed last (else its last line), for the message."""
        log = self._log.fileno()  # read where it is: the server writes at the shared offset
        text = os.pread(log, os.fstat(log).st_size, 0).decode(errors="replace")
        lines = [_LOG_PREFIX.sub("", line).strip() for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if _ERROR_LINE.match(line)]
        last = (errors or lines or [""])[-1]
        return f"; it said: {last}" if last else ""


class PrefectServer:
    """Prefect's temporary server for this process, if it needs one (see the module doc).

    :meth:`launch` starts it before Prefect is imported; :meth:`confirm` (Prefect's settings
    loaded) keeps it only when Prefect would start one itself; :meth:`ready` waits for it,
    retries once, and points this process at it; :meth:`stop` ends it (also at exit).
    """

    def __init__(self) -> None:
        self._server: TemporaryServer | None = None
        self._quiet: ShortFailures | None = None
        """What shortens Prefect's failures to send to the server (see ``_events``)."""
        self._environment: dict[str, str] = {}
        """What :meth:`ready` set in ``os.environ`` (removed again by :meth:`stop`)."""

    @classmethod
    def launch(cls) -> PrefectServer:
        """Launch the server now, unless ``PREFECT_API_URL`` is in the environment (or, with
        Prefect's settings already loaded, unless they say Prefect would not start one)."""
        manager = cls()
        if "prefect.settings" in sys.modules:  # settings loaded already: ask them at once
            wanted = _prefect_would_start_one()
        else:
            wanted = not os.environ.get("PREFECT_API_URL")
        if wanted:
            manager._server = TemporaryServer()
            # Registered before Prefect's own exit hooks, so it runs after them (they send
            # the last logs and events to this server).
            atexit.register(manager.stop)
        return manager

    @property
    def active(self) -> bool:
        """Whether this process runs its flows against a server launched here."""
        return self._server is not None

    def confirm(self) -> None:
        """Keep the server only if Prefect would start a temporary one: no API URL in its
        settings (environment, profile, toml files) and ephemeral mode allowed."""
        if self._server is not None and not _prefect_would_start_one():
            self.stop()

    def ready(self) -> None:
        """Wait until the server answers (one retry), then send this process's Prefect
        calls to it. :class:`TemporaryServerError` when it never does."""
        if self._server is None or self._environment:
            return
        timeout = startup_timeout()
        failure = self._server.wait(timeout)
        for _ in range(ATTEMPTS - 1):
            if failure is None:
                break
            self._server.stop()
            self._server = TemporaryServer()
            failure = self._server.wait(timeout)
        if failure is not None:
            self.stop()
            raise TemporaryServerError(_advice(failure, timeout))
        self._environment = {"PREFECT_API_URL": self._server.api_url}
        if "PREFECT_UI_URL" not in os.environ:  # no UI, so no "View at" links to one
            self._environment["PREFECT_UI_URL"] = ""
        os.environ.update(self._environment)
        _refresh_prefect_settings()
        server = self._server
        self._quiet = quiet_failures(lambda: not server.running)
        logging.getLogger("prefect").info(
            "Started a temporary server on %s (it stops when dbpa exits). See "
            "https://docs.prefect.io/v3/concepts/server#how-to-guides for more information "
            "on running a dedicated Prefect server.",
            self._server.api_url.removesuffix("/api"),
        )

    def stop(self) -> None:
        """Send the events and logs Prefect still holds for the server while it runs, stop it
        and forget its URL (safe to call twice)."""
        if self._environment and self._server is not None and self._server.running:
            send_pending(_STOP_TIMEOUT_S)
        if self._quiet is not None:  # Prefect's exit sends what it holds before this hook
            for name in LOGGERS:
                logging.getLogger(name).removeFilter(self._quiet)
            self._quiet = None
        if self._environment:
            for name in self._environment:
                os.environ.pop(name, None)
            self._environment = {}
            _refresh_prefect_settings()
        if self._server is not None:
            self._server.stop()
            self._server = None


def _prefect_would_start_one() -> bool:
    """No API URL in Prefect's settings, and ephemeral mode allowed."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_ALLOW_EPHEMERAL_MODE

    return not PREFECT_API_URL.value() and bool(PREFECT_SERVER_ALLOW_EPHEMERAL_MODE.value())


def startup_timeout() -> float:
    """The user's ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (environment, profile
    or toml file), else :data:`DEFAULT_STARTUP_TIMEOUT_S`."""
    from prefect.settings import get_current_settings

    ephemeral = get_current_settings().server.ephemeral
    if "startup_timeout_seconds" in ephemeral.model_fields_set:
        return float(ephemeral.startup_timeout_seconds)
    return float(DEFAULT_STARTUP_TIMEOUT_S)


def _advice(failure: str, timeout: float) -> str:
    return (
        f"Prefect's temporary server did not start ({ATTEMPTS} attempts; {failure}). "
        "dbpa runs every audit as a Prefect flow and, with no PREFECT_API_URL set, starts a "
        "temporary local Prefect server for it. On a busy machine give it longer with "
        f"{TIMEOUT_SETTING} (now {timeout:g}), or start a server once "
        "(prefect server start --host 127.0.0.1) and point dbpa at it with "
        "PREFECT_API_URL=http://127.0.0.1:4200/api; then run the same command again."
    )


def _uvicorn_ending_with(parent: int, *arguments: str) -> list[str]:
    """``python -m uvicorn ARGUMENTS`` in a process that ends when ``parent``, its parent,
    does (SIGTERM, on Linux), and does not start if ``parent`` has ended already."""
    return [sys.executable, "-c", _WITH_ITS_PARENT, str(parent), *arguments]


def _prefect_parent() -> str:
    """The directory holding the ``prefect`` package, found without importing it."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise TemporaryServerError("Prefect is not installed")
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _refresh_prefect_settings() -> None:
    """Make Prefect's process-wide settings read the environment again."""
    from prefect.context import refresh_global_settings_context

    refresh_global_settings_context()
