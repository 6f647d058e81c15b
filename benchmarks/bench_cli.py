"""The reading commands on a huge family: ``dbpa validate`` of a 10,000-perturbation template
family and ``dbpa results`` of a completed 10,000-perturbation run, each a whole process.

Against two floors measured in the same run, interleaved: the bare interpreter and
``python -c "import yaml"``. Wall time of each process, median of ``REPEATS`` (after one
warm-up of each). The record is written through ``Store`` (a run, its family, a test per
perturbation and the corrections), as an audit leaves it. Targets: validate <= 3 s, and
results as quick (it prints a summary; ``--all`` lists every row).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks._results import ResultFile

REPEATS = 5
KEY_ENV = "DBPA_BENCH_KEY"


def _family_config(m: int) -> dict[str, object]:
    """A valid config of ``m`` template values (k and B large enough for a family of m)."""
    from dbpa.stats import min_permutations

    return {
        "name": f"cli-{m}",
        "models": [
            {
                "model": "openai/scripted",
                "api_base": "http://127.0.0.1:9/v1",
                "api_key_env": KEY_ENV,
            }
        ],
        "embedder": {
            "backend": "litellm",
            "model": "openai/scripted",
            "api_base": "http://127.0.0.1:9/v1",
            "api_key_env": KEY_ENV,
        },
        "prompt": "My flu has lasted two days. What now?",
        "perturbations": [
            {
                "kind": "template",
                "template": "Answer in {style}.",
                "values": [f"style number {i}" for i in range(m)],
            }
        ],
        "k": 11,
        "n_permutations": min_permutations(m, 0.05, "holm"),
    }


def _record(path: Path, m: int) -> Path:
    """A completed run of ``m`` perturbations, each tested, the family corrected."""
    import numpy as np

    from dbpa.analysis import Decision, PerturbationTestRecord
    from storage import Store

    rng = np.random.default_rng(0)
    p = rng.random(m) ** 4
    with Store(path, serve_readers=False) as store:
        store.add_tests(
            [
                PerturbationTestRecord(
                    f"t{i}", "o", f"a{i}", "emb", "cosine", "jsd", {}, 999, 1, 0.3,
                    float(p[i]), 0.1, 0.05, 0.2, 4.0, 999, False, 6, 6, np.zeros(999),
                )
                for i in range(m)
            ]
        )  # fmt: skip
        store.start_run(
            "bench", audit="cli", config={"k": 6}, config_hash="h", epoch="0",
            flow_run_id=None, versions={},
        )  # fmt: skip
        store.add_family(
            "bench",
            [
                {
                    "family": "m", "perturbation_id": f"style-number-{i}", "position": i,
                    "kind": "template", "label": "control" if i % 2 else "target",
                    "description": f"value {i}", "original_arm": "o", "perturbed_arm": f"a{i}",
                    "test_id": f"t{i}",
                }
                for i in range(m)
            ],
        )  # fmt: skip
        adjusted = np.minimum(p * m, 1.0)
        decisions = [
            Decision(
                f"style-number-{i}", float(p[i]), float(adjusted[i]), adjusted[i] <= 0.05, True
            )
            for i in range(m)
        ]
        store.add_corrections("bench", "m", "holm", 0.05, decisions)
        store.finish_run("bench", "completed")
    return path


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return seconds


def main(quick: bool = False) -> None:
    result_file = ResultFile("cli", quick)
    m = 1_000 if quick else 10_000
    os.environ.setdefault(KEY_ENV, "sk-bench")
    load = os.getloadavg()[0]
    python = [sys.executable]
    dbpa = [*python, "-m", "dbpa.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "family.yaml"
        config.write_text(yaml.safe_dump(_family_config(m), sort_keys=False))
        record = _record(Path(tmp) / "record.duckdb", m)
        commands = {
            "python (bare interpreter)": [*python, "-c", "pass"],
            'python -c "import yaml"': [*python, "-c", "import yaml"],
            f"dbpa validate (m={m:,})": [*dbpa, "validate", str(config)],
            f"dbpa results (m={m:,})": [*dbpa, "results", "bench", "--db", str(record)],
            f"dbpa results --all (m={m:,})": [
                *dbpa, "results", "bench", "--db", str(record), "--all",
            ],
            f"dbpa results --format json (m={m:,})": [
                *dbpa, "results", "bench", "--db", str(record), "--format", "json",
            ],
        }  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in commands}
        for command in commands.values():
            _wall(command)  # warm-up: the page cache, .pyc files
        for _ in range(REPEATS):
            for name, command in commands.items():
                times[name].append(_wall(command))
    floor = statistics.median(times["python (bare interpreter)"])
    yaml_floor = statistics.median(times['python -c "import yaml"'])
    rows = []
    for name, found in times.items():
        median = statistics.median(found)
        target = ""
        if name.startswith("dbpa validate"):
            target = "<= 3 s: " + ("ok" if median <= 3 else "MISSED")
        rows.append(
            [name, median, min(found), max(found), median / floor, median / yaml_floor, target]
        )
    result_file.table(
        f"cli: whole processes, median of {REPEATS} interleaved runs (after a warm-up); "
        f"load average before the run {load:.2f}",
        ["command", "median s", "min s", "max s", "x bare python", "x import yaml", "target"],
        rows,
    )
    result_file.write()


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
