"""The reading commands on a huge family: ``dbpa validate`` of a 10,000-perturbation template
family and ``dbpa results`` of a completed 10,000-perturbation run, each a whole process; and
``dbpa drift``'s replay of a monitor over a long history of ticks.

Against two floors measured in the same run, interleaved: the bare interpreter and
``python -c "import yaml"``. Wall time of each process, median of ``REPEATS`` (after one
warm-up of each). The record is written through ``Store`` (a run, its family, a test per
perturbation and the corrections), as an audit leaves it. Targets: validate <= 3 s, and
results as quick (it prints a summary; ``--all`` lists every row).

The replay (``dbpa.drift.replay_monitor``, what ``dbpa drift`` and every scheduled tick run)
reads each tick's vectors and its baseline's: until 2026-12-07 with one read per arm and
epoch (the baseline, measured here on the same record), now ``COMPARISONS_PER_READ`` ticks at a
time; the replay's total and its monitors' arithmetic alone (the updates on vectors already
read) show what is left. In-process CPU seconds, median of ``REPEATS``, interleaved.
"""

from __future__ import annotations

import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks._results import ResultFile
from tests.drift.conftest import BASE as DRIFT_BASE
from tests.drift.conftest import DIM as DRIFT_DIM
from tests.drift.conftest import record_tick

REPEATS = 5
DRIFT_TICKS = 180
"""Ticks of the replayed audit (a tenth with --quick): half a year of nightly ticks."""
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
    with tempfile.TemporaryDirectory() as tmp:
        ticks = DRIFT_TICKS // 10 if quick else DRIFT_TICKS
        result_file.table(
            f"dbpa drift: the monitor replayed over {ticks} ticks of 3 arms (k={DRIFT_BASE['k']}, "
            f"d={DRIFT_DIM}), CPU s, median of {REPEATS} interleaved",
            ["step", "median s", "x the replay"],
            _replay_rows(_drift_record(Path(tmp) / "drift.duckdb", ticks)),
        )
    result_file.write()


def _drift_record(path: Path, ticks: int) -> Path:
    """The tests' ``drifty`` audit (three arms) at ``ticks`` nightly epochs."""
    from storage import Store

    start = datetime.datetime(2026, 1, 1, 3, tzinfo=datetime.UTC)
    with Store(path) as store:
        for day in range(ticks):
            record_tick(store, (start + datetime.timedelta(days=day)).isoformat())
    return path


def _replay_rows(record: Path) -> list[list[object]]:
    """CPU seconds of the replay's reads each way, of the replay, and of its arithmetic."""
    from dbpa.drift import Loaded, load_many, plan_drift, read_epochs, replay_monitor
    from dbpa.drift._compare import COMPARISONS_PER_READ
    from dbpa.stats import DriftMonitor
    from storage import Store

    with Store(record, read_only=True) as store:
        epochs = read_epochs(store, "drifty")
        baseline = epochs[0].epoch
        comparisons = [
            plan_drift("drifty", epochs, epoch=e.epoch, baseline=baseline, against=("baseline",))[0]
            for e in epochs[1:]
        ]

        def per_arm() -> None:
            for c in comparisons:
                for job in c.jobs:
                    for arm in (job.reference_arm, job.arm):
                        store.arms_vectors([arm], c.embedder, c.k)

        def batched() -> list[Loaded]:
            return list(load_many(store, comparisons))

        read = batched()

        def arithmetic() -> None:
            monitors: dict[str, DriftMonitor] = {}
            for ready, _ in read:
                for job, reference, current in ready:
                    monitor = monitors.setdefault(job.label, DriftMonitor(rng=0))
                    monitor.update(reference, current)

        steps = {
            "reads, one per arm and epoch (until 2026-12-07)": per_arm,
            f"reads, {COMPARISONS_PER_READ} ticks at a time (the product)": batched,
            "the replay (replay_monitor), in all": lambda: replay_monitor(store, "drifty"),
            "its monitors' arithmetic alone": arithmetic,
        }
        seconds: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(REPEATS):
            for name, step in steps.items():
                start = time.process_time()
                step()
                seconds[name].append(time.process_time() - start)
    replay = statistics.median(seconds["the replay (replay_monitor), in all"])
    return [
        [name, statistics.median(found), statistics.median(found) / replay]
        for name, found in seconds.items()
    ]


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
