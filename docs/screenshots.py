"""The README's picture, made from a real run: ``python -m docs.screenshots``.

Runs a small persona audit (``dbpa run``, a temporary Prefect server and the embedded
sentence embedder) against the scripted OpenAI-compatible provider on 127.0.0.1, whose
answers change for the non-medical personas, renders its HTML report and screenshots it with
headless Debian Chromium (playwright, no browser downloaded) into ``docs/images/report.png``.
Every process it starts stops before it returns.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
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


def screenshot(page_file: Path, out: Path, width: int = 1100, height: int = 1000) -> Path:
    """The top ``height`` pixels of ``page_file`` at ``width``, as a PNG at ``out``."""
    from playwright.sync_api import sync_playwright

    out.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(page_file.as_uri(), wait_until="load")
            page.screenshot(path=str(out), full_page=False)
        finally:
            browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m docs.screenshots", description=__doc__)
    parser.add_argument("--out", type=Path, default=IMAGES / "report.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run_audit(Path(tmp))
        print(f"wrote {screenshot(report, args.out)} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
