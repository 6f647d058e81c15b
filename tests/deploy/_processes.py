"""Start and stop the processes a deployment test needs, and talk to the Prefect API.

Every process starts in a session of its own; stopping it interrupts the whole group
(twice: an idle Prefect worker exits only on the second SIGINT), then kills whatever is
left, and reports which processes were still there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil

from tests.support.signals import interruptible

BIN = Path(sys.executable).parent
PREFECT = str(BIN / "prefect")
DBPA = str(BIN / "dbpa")
REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")
RETRIED = {429, 502, 503}
"""Statuses after which the API is asked again (those Prefect's client retries)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(probe: Callable[[], T | None], timeout: float, what: str, every: float = 0.25) -> T:
    """Call ``probe`` until it returns something other than None (or fail naming ``what``).

    A probe whose request times out or cannot connect counts as "not yet": a server busy for
    longer than one request's timeout under a full test run is slow, not wrong.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = probe()
        except httpx.TransportError as exc:
            found, error = None, exc
        else:
            error = None
        if found is not None:
            return found
        if time.monotonic() > deadline:
            last = f" (last request: {type(error).__name__}: {error})" if error else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{last}")
        time.sleep(every)


@dataclass(frozen=True)
class Stopped:
    """How a process group ended."""

    code: int | None
    """Exit code of the group leader (negative: the signal that ended it)."""
    interrupts: int
    """SIGINTs sent before the leader exited (3: it had to be killed)."""
    leftovers: tuple[int, ...]
    """Processes of the group or its descendants still alive after the interrupts (killed)."""


@dataclass(frozen=True)
class Started:
    """A process started in a new session, with its output in ``log``."""

    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        """Everything it printed so far."""
        return self.log.read_text(errors="replace")

    def stop(self, grace: float = 20.0) -> Stopped:
        """SIGINT the group, SIGINT again, then SIGKILL anything left."""
        family = [psutil.Process(self.process.pid)]
        with contextlib.suppress(psutil.NoSuchProcess):
            family += family[0].children(recursive=True)
        code, interrupts = None, 0
        while code is None and interrupts < 2:
            interrupts += 1
            _signal_group(self.process.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=grace / 2)
        _, alive = psutil.wait_procs(family, timeout=grace / 2)
        for p in alive:
            p.kill()
        _signal_group(self.process.pid, signal.SIGKILL)
        if code is None:
            code, interrupts = self.process.wait(timeout=grace), 3
        return Stopped(code, interrupts, tuple(sorted(p.pid for p in alive)))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def start(
    args: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path | None = None
) -> Started:
    """Start ``args`` in its own session, output to ``log``."""
    with log.open("wb") as handle:
        process = subprocess.Popen(
            list(args),
            env=dict(env),
            cwd=cwd,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=interruptible,
        )
    return Started(process, log)


class Api:
    """The few REST calls the tests make to a Prefect server."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._http = httpx.Client(base_url=url.rstrip("/") + "/", timeout=20)

    def close(self) -> None:
        self._http.close()

    def healthy(self) -> bool | None:
        try:
            return True if self._http.get("health").status_code == 200 else None
        except httpx.TransportError:
            return None

    def _request(
        self, method: str, path: str, *, repeatable: bool | None = None, **kwargs: Any
    ) -> httpx.Response:
        """Send, again after 0.5, 1, 2 and 4 s while the server answers a status that Prefect's
        own client retries (503: a busy SQLite database, nothing done) or, for a request that
        may be sent twice (``repeatable``; by default reads: a GET or a ``*/filter``), while
        it times out or cannot connect (a server busy under a full test run)."""
        if repeatable is None:
            repeatable = method == "GET" or path.endswith("/filter")
        for wait in (0.5, 1, 2, 4, None):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError:
                if not repeatable or wait is None:
                    raise
            else:
                if response.status_code not in RETRIED or wait is None:
                    return response
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _post(self, path: str, body: Mapping[str, Any], repeatable: bool | None = None) -> Any:
        response = self._request("POST", path, json=body, repeatable=repeatable)
        response.raise_for_status()
        return response.json()

    def flow_run(self, flow_run_id: str) -> dict[str, Any]:
        response = self._request("GET", f"flow_runs/{flow_run_id}")
        response.raise_for_status()
        return dict(response.json())

    def flow_runs(self, **flow_runs: Any) -> list[dict[str, Any]]:
        """Flow runs matching a ``flow_runs`` filter, oldest first."""
        body = {"flow_runs": flow_runs, "sort": "START_TIME_ASC"}
        return list(self._post("flow_runs/filter", body))

    def deployment(self, name: str) -> dict[str, Any] | None:
        response = self._request("GET", f"deployments/name/{name}")
        return dict(response.json()) if response.status_code == 200 else None

    def run_deployment(self, name: str, **parameters: Any) -> str:
        """A flow run of deployment ``name`` scheduled now with ``parameters`` (what
        ``prefect deployment run -p ...`` creates, without a CLI process); returns its id."""
        found = self.deployment(name)
        assert found, f"no deployment {name}"
        body = {"parameters": parameters, "idempotency_key": str(uuid.uuid4())}  # one if retried
        created = self._post(f"deployments/{found['id']}/create_flow_run", body, repeatable=True)
        return str(created["id"])

    def artifacts(self, key: str) -> list[dict[str, Any]]:
        """Every version of the artifact ``key``, newest first."""
        body = {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC"}
        return list(self._post("artifacts/filter", body))

    def artifacts_of(self, flow_run_id: str) -> list[dict[str, Any]]:
        """Every artifact of one flow run, oldest first."""
        body = {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "CREATED_DESC"}
        return list(reversed(self._post("artifacts/filter", body)))

    def task_runs(self, flow_run_id: str) -> list[dict[str, Any]]:
        """The task runs of one flow run."""
        return list(self._post("task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}}))

    def automations(self) -> dict[str, dict[str, Any]]:
        """Every automation on the server, by name."""
        return {a["name"]: a for a in self._post("automations/filter", {})}

    def create_automation(self, automation: Mapping[str, Any]) -> str:
        """Create an automation (the body ``prefect automation create`` sends); its id."""
        return str(self._post("automations/", automation)["id"])

    def delete_automation(self, automation_id: str) -> None:
        self._request("DELETE", f"automations/{automation_id}").raise_for_status()

    def events(self, event: str, resource_id: str) -> list[dict[str, Any]]:
        """Events named ``event`` about one resource (the last hour)."""
        body = {
            "filter": {
                "event": {"name": [event]},
                "resource": {"id": [resource_id]},
                "occurred": {"since": _iso(time.time() - 3600)},
            },
            "limit": 50,
        }
        return list(self._post("events/filter", body)["events"])


def _iso(epoch_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_seconds))
