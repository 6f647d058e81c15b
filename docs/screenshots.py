"""The README's pictures, made from real runs: ``python -m docs.screenshots [--drift]``.

Runs a small persona audit (``dbpa run``, a temporary Prefect server and the embedded
sentence embedder) against the scripted OpenAI-compatible provider on 127.0.0.1, whose
answers change for the non-medical personas, renders its HTML report and screenshots it with
headless Debian Chromium (playwright, no browser downloaded) into ``docs/images/report.png``.

With ``--drift`` it also starts ``prefect server start`` on 127.0.0.1, runs scheduled ticks
of the audit (``dbpa-scheduled-audit``, one epoch each) until the provider's answers, changed
after the quiet ticks, raise the drift monitor's alarm, and screenshots the alarmed tick's
artifacts in the Prefect UI into ``docs/images/prefect-drift.png``. Every process it starts
stops before it returns.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.support.scripted_server import Rule, ScriptedServer

ROOT = Path(__file__).parents[1]
IMAGES = ROOT / "docs" / "images"
KEY_ENV = "DBPA_SCREENSHOT_KEY"
PROMPT = "I have had a fever and a cough for three days. Should I see a doctor?"
CALM = [
    ("Three days of fever with a cough is worth a call to your doctor.", 3.0),
    ("See a doctor if the fever stays above 39 C or you are short of breath.", 2.0),
    ("Rest, drink fluids, and see a doctor if it is not better in two days.", 2.0),
]
RULES = [
    Rule(
        "comedian",
        [
            ("Doctor? Sure, if you want a second opinion on your jokes. Yes, go.", 3.0),
            ("A fever that long is no joke: see a doctor.", 1.0),
        ],
    ),
    Rule("child", [("Tell a grown-up and they will take you to the doctor.", 1.0)]),
    Rule("", CALM),
]
"""The medical personas answer as the plain prompt does; the comedian and the child differ."""
DRIFTED = [Rule("", [("Fever for three days: go to the emergency room tonight.", 1.0)])]
"""What every arm answers after the provider's model changes (a ``--drift`` run)."""
QUIET_TICKS = 3
MAX_TICKS = 10
TICK = """
from flows.scheduled import scheduled_audit
scheduled_audit(config_path={config!r}, db={db!r}, out={out!r}, overrides={{"epoch": {epoch!r}}})
"""


def _config(api_base: str) -> dict[str, object]:
    return {
        "name": "fever-personas",
        "models": [
            {
                "model": "openai/scripted",
                "api_base": api_base,
                "api_key_env": KEY_ENV,
                "max_concurrency": 8,
                "max_n": 1,
            }
        ],
        "prompt": PROMPT,
        "perturbations": [
            {
                "kind": "personas",
                "values": [
                    {"value": "doctor", "label": "control"},
                    {"value": "nurse", "label": "control"},
                    {"value": "comedian", "label": "target"},
                    {"value": "child", "label": "target"},
                ],
            }
        ],
        "k": 30,
        "n_permutations": 999,
        "seed": 7,
    }


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return env | {
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "DO_NOT_TRACK": "1",
        "PYTHONPATH": str(ROOT),
        KEY_ENV: "sk-screenshot",
    }


def run_audit(work: Path) -> Path:
    """Run the audit in ``work`` and return its HTML report."""
    with ScriptedServer(rules=RULES) as server:
        config = work / "audit.yaml"
        config.write_text(yaml.safe_dump(_config(server.api_base), sort_keys=False))
        command = [sys.executable, "-m", "dbpa.cli", "run", str(config)]
        command += ["--db", str(work / "record.duckdb"), "--out", str(work / "reports")]
        done = subprocess.run(
            command, env=_environment(work / "prefect"), capture_output=True, text=True
        )
    if done.returncode != 0:
        raise RuntimeError(f"dbpa run exited {done.returncode}:\n{done.stderr[-3000:]}")
    reports = sorted((work / "reports").rglob("*.html"))
    if not reports:
        raise RuntimeError(f"dbpa run wrote no HTML report under {work / 'reports'}")
    return reports[0]


def screenshot(url: str, out: Path, width: int, height: int, settle_ms: int = 0) -> Path:
    """The top ``height`` pixels of the page at ``url`` at ``width``, as a PNG at ``out``
    (``settle_ms`` after the load, for a page that fetches its content afterwards)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url, wait_until="load")
            page.wait_for_timeout(settle_ms)
            page.screenshot(path=str(out), full_page=False)
        finally:
            browser.close()
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def prefect_server(env: dict[str, str]) -> Iterator[str]:
    """``prefect server start`` on 127.0.0.1 in its own process group; its API URL."""
    port = _free_port()
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    api = f"http://127.0.0.1:{port}/api"
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        env={**env, "PREFECT_UI_API_URL": api},  # the UI's default is port 4200
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"{api}/health", timeout=5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("prefect server start did not come up") from None
                time.sleep(1)
        yield api
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _post(url: str, body: dict[str, object]) -> object:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def _alarmed(work: Path, env: dict[str, str]) -> bool:
    """Whether the drift monitor of the audit in ``work`` has alarmed on any arm."""
    command = [sys.executable, "-m", "dbpa.cli", "drift", "fever-personas"]
    command += ["--db", str(work / "record.duckdb"), "--format", "json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return any(arm["alarm"] for arm in json.loads(done.stdout)["latest"])


def drift_ticks(work: Path, out: Path) -> Path:
    """Ticks on a Prefect server until the monitor alarms; the alarmed tick's artifacts in
    the Prefect UI as a PNG at ``out``."""
    env = _environment(work / "prefect")
    with ScriptedServer(rules=RULES) as provider, prefect_server(env) as api:
        env["PREFECT_API_URL"] = api
        config = work / "audit.yaml"
        config.write_text(yaml.safe_dump(_config(provider.api_base), sort_keys=False))
        for tick in range(MAX_TICKS):
            if tick == QUIET_TICKS:
                provider.rules = list(DRIFTED)
            epoch = f"2026-12-{tick + 1:02d}T03:00:00+00:00"
            code = TICK.format(
                config=str(config),
                db=str(work / "record.duckdb"),
                out=str(work / "reports"),
                epoch=epoch,
            )
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
            if done.returncode != 0:
                raise RuntimeError(f"tick {epoch} failed:\n{done.stderr.decode()[-3000:]}")
            print(f"tick {epoch} done")
            if tick >= QUIET_TICKS and _alarmed(work, env):
                break
        else:
            raise RuntimeError(f"no alarm after {MAX_TICKS} ticks")
        latest = {"artifacts": {"key": {"any_": ["fever-personas-monitor"]}}, "limit": 1}
        found = _post(f"{api}/artifacts/filter", {**latest, "sort": "CREATED_DESC"})
        url = f"{api.removesuffix('/api')}/artifacts/artifact/{found[0]['id']}"  # type: ignore[index]
        return screenshot(url, out, 1280, 900, settle_ms=8000)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m docs.screenshots", description=__doc__)
    parser.add_argument("--drift", action="store_true", help="also the Prefect UI's drift alarm")
    parser.add_argument("--no-report", action="store_true", help="skip the report's picture")
    args = parser.parse_args()
    IMAGES.mkdir(parents=True, exist_ok=True)
    if not args.no_report:
        with tempfile.TemporaryDirectory() as tmp:
            report = run_audit(Path(tmp)).as_uri()
            out = screenshot(report, IMAGES / "report.png", 1100, 1000)
            print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    if args.drift:
        with tempfile.TemporaryDirectory() as tmp:
            out = drift_ticks(Path(tmp), IMAGES / "prefect-drift.png")
            print(f"wrote {out} ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
