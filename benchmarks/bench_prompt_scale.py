"""A set of prompts at scale: P prompts x 5 perturbations x k against a scripted provider.

``dbpa run`` in a process of its own (1,000 prompts, k = 10: 6,000 arms, 60,000 outputs;
``--quick``: 100 prompts) against the scripted OpenAI-compatible provider on 127.0.0.1 (its
own process; 10 choices per request after 50 ms; a user prompt with "terse" in it gets
other answers: every prompt under the "Be terse." template), then killed (SIGKILL) once a
third of the arms are asked for, and run again to the end; then ``dbpa results``,
``dbpa validate`` and ``dbpa report`` on the record, each timed, and the HTML report opened
in headless Chromium (time to its ``load`` event and to its script's first run). Peak RSS:
the largest child process's (``getrusage(RUSAGE_CHILDREN)``).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks._provider import remote_provider
from benchmarks._results import ResultFile
from tests.support.scripted_server import Rule

KEY_ENV = "DBPA_BENCH_KEY"
RULES = (
    Rule("terse", [(f"Rest {i} days.", 1) for i in range(4)]),
    Rule("", [(f"Rest, drink fluids and see a doctor after {i} days.", 1) for i in range(12)]),
)
PERTURBATIONS = [
    {
        "kind": "template",
        "label": "target",
        "placement": "suffix",
        "template": "Be {tone}.",
        "values": ["terse"],
    },
    {"kind": "system_prompt", "label": "control", "variants": ["You are a helpful assistant."]},
    {
        "kind": "sampling",
        "variants": [{"params": {"temperature": 0.5}}, {"params": {"top_p": 0.9}}],
    },
    {"kind": "system_prompt", "variants": ["Be brief."]},
]


def _config(api_base: str, prompts: int, k: int) -> dict[str, Any]:
    return {
        "name": "prompt-scale",
        "models": [
            {
                "model": "openai/scripted",
                "api_base": api_base,
                "api_key_env": KEY_ENV,
                "max_concurrency": 32,
                "max_n": k,
            }
        ],
        "embedder": {
            "backend": "litellm",
            "model": "openai/scripted",
            "api_base": api_base,
            "api_key_env": KEY_ENV,
        },
        "prompts": [
            {
                "id": f"q{i}",
                "prompt": f"Question {i}: my flu has lasted {i % 7 + 2} days, what now?",
            }
            for i in range(prompts)
        ],
        "perturbations": PERTURBATIONS,
        "k": k,
        "n_permutations": 999,
        "seed": 1,
    }


def _dbpa(*args: str, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "dbpa.cli", *args], env=env, capture_output=True, text=True
    )
    return time.perf_counter() - start, done


def _stored_outputs(db: Path, env: dict[str, str]) -> int:
    code = (
        "import duckdb,sys; c=duckdb.connect(sys.argv[1], read_only=True);"
        "print(c.execute('select count(*) from samples').fetchone()[0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(db)], env=env, capture_output=True, text=True
    )
    return int(done.stdout.strip() or 0)


def _open_in_chromium(path: Path) -> tuple[float, float] | None:
    """Seconds to the page's load event and to its script's first run, or None."""
    from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        loaded = time.perf_counter() - start
        page.wait_for_function("document.documentElement.classList.contains('interactive')")
        ready = time.perf_counter() - start
        browser.close()
    return loaded, ready


def main(quick: bool = False) -> None:
    prompts, k = (100, 10) if quick else (1000, 10)
    result_file = ResultFile("prompt_scale", quick)
    with remote_provider(RULES, latency=0.05) as provider, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = root / "audit.yaml"
        config.write_text(yaml.safe_dump(_config(provider.api_base, prompts, k)))
        db = root / "audit.duckdb"
        env = {**os.environ, KEY_ENV: "sk-bench"}
        arms = prompts * 6
        start = time.perf_counter()
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dbpa.cli",
                "run",
                str(config),
                "--db",
                str(db),
                "--out",
                str(root / "r"),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        while run.poll() is None and time.perf_counter() - start < 600:
            time.sleep(2)
            if db.exists() and provider.requests().chat >= arms // 3:
                break
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        killed_after = time.perf_counter() - start
        stored = _stored_outputs(db, env)
        first_requests = provider.requests().chat
        wall, done = _dbpa("run", str(config), "--db", str(db), "--out", str(root / "r"), env=env)
        if done.returncode != 0:
            raise RuntimeError(f"dbpa run exited {done.returncode}: {done.stderr[-2000:]}")
        requests = provider.requests()
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        results_s, results = _dbpa("results", "latest", "--db", str(db), env=env)
        validate_s, _ = _dbpa("validate", str(config), env=env)
        report_s, _ = _dbpa(
            "report", "latest", "--db", str(db), "--out", str(root / "x.html"), env=env
        )
        size_mb = (root / "x.html").stat().st_size / 1e6
        opened = _open_in_chromium(root / "x.html")
    rows = [
        ["prompts x perturbations x k", f"{prompts} x 5 x {k} = {arms * k:,} outputs"],
        ["killed after (s) / outputs stored then", f"{killed_after:.1f} / {stored:,}"],
        ["resumed run to the end (s)", f"{wall:.1f}"],
        [
            "chat requests in all (one per arm) / asked again (in flight at the kill)",
            f"{requests.chat:,} / {requests.repeated}",
        ],
        ["requests before the kill", f"{first_requests:,}"],
        ["peak RSS of a child process (MB)", f"{peak_mb:.0f}"],
        ["dbpa results (s)", f"{results_s:.1f}"],
        ["dbpa validate (s)", f"{validate_s:.1f}"],
        ["dbpa report, HTML (s) / size (MB)", f"{report_s:.1f} / {size_mb:.1f}"],
        [
            "report in Chromium: load / script ready (s)",
            "no chromium" if opened is None else f"{opened[0]:.2f} / {opened[1]:.2f}",
        ],
        ["load average (1 min) at the end", f"{os.getloadavg()[0]:.1f}"],
    ]
    result_file.table("prompt set at scale", ["what", "measured"], rows)
    print(results.stdout[-1500:])
    result_file.write()


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
