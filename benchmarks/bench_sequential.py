"""Sequential audits against the fixed-k design, in the same run: model calls, power, type-I.

Synthetic families on the answer space of the power benchmark (d=384, a new geometry per
family): one original arm and m = 10 perturbed arms, some shifted away from the original
(a "large" shift, which a single test at alpha = 0.05 finds at k = 8, or a moderate one that
the fixed design finds about 9 times in 10), the rest from the original's distribution. The
fixed design samples k = 20 outputs per arm and corrects the 10 permutation p-values (B =
4999) by Holm; each sequential design (``dbpa.analysis.SequentialSpec``: the default looks
at 8, 12, 16, 20 outputs, weights 0.1, 0.1, 0.1, 0.7, futility 0.2; and variants) runs
``dbpa.stats.sequential_family`` on the same arms: the group-sequential boundary on the
permutation paths the audit flow gives each test (``dbpa.stats.path_plan``: the first
block's 12870 splits enumerated at m = 10). All use omega ``energy_cosine``. Calls are
outputs sampled (the original arm is sampled while any of its tests is open). Power: the
share of shifted perturbations found changed; type-I: the share of families with any
unshifted perturbation found changed (95% Clopper-Pearson intervals). The goal (issue 15):
at least 40% fewer calls when half the family has large effects, power within 0.05 of the
fixed design, type-I at most alpha.

Then the audit flow itself (``run_audit``, Prefect's temporary server) against the scripted
provider in its own process: five target personas that answer nothing like the original and
five controls that answer like it, k = 20, B = 3999, ``omega: auto``, once at fixed k and once
with ``sequential: true``, each on its own record; model calls are the chat requests the
provider served. These scripted answers are the easy case (large effects, three distinct
answers per arm), the synthetic families the harder one.

What the boundary replaced: a weighted Bonferroni (union) bound over independent permutation
tests at each look. A null path that crosses at an interim look mostly crosses at the last
one too, and the union bound pays for it twice: at a final weight of 0.85 it saved 38% of the
calls with half the family large but lost moderate power (0.824 against the fixed 0.866), at
0.7 it saved 41% with moderate power 0.749. The group-sequential boundary spends the level
once on the paths' joint law (on the same 200 families at 0.7: 41% fewer, moderate power
0.831 with the first block enumerated). Stopping at Holm's step thresholds through repeated
p-values gave 0.785: tests stop at the lone threshold, and the final correction steps.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from benchmarks._provider import RemoteProvider, remote_provider
from benchmarks._results import ResultFile
from benchmarks._synthetic import Arm, answer_space, sample
from dbpa.analysis import SequentialSpec
from dbpa.config import parse_config
from dbpa.stats import correct, path_plan, permutation_test, sequential_family
from storage import Store
from tests.support.scripted_server import Rule

ALPHA = 0.05
M = 10
K_MAX = 20
B = 4999
OMEGA = "energy_cosine"
ROOT_SEED = 20261124
ORIGINAL = Arm(weights=(0.6, 0.4), detail=0.3, noise=0.15)
SHIFTS = {"large": 0.6, "moderate": 0.38}
"""Drift of a shifted arm along a direction no original answer uses."""
FAMILIES = (
    ("half large", "large", 5),
    ("half moderate", "moderate", 5),
    ("all null", "large", 0),
)


def _rate(hits: int, n: int) -> str:
    ci = binomtest(hits, n).proportion_ci(0.95, method="exact")
    return f"{hits / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def _family(rng: np.random.Generator, shift: str, effects: int) -> tuple[np.ndarray, list]:
    space = answer_space(rng)
    shifted = replace(ORIGINAL, drift=SHIFTS[shift])
    original = sample(rng, space, ORIGINAL, K_MAX)
    arms = [sample(rng, space, shifted if i < effects else ORIGINAL, K_MAX) for i in range(M)]
    return original, arms


def main(quick: bool = False) -> None:
    families = 40 if quick else 200
    specs = {
        "sequential (default)": SequentialSpec(),
        "final weight 0.85": SequentialSpec(final_weight=0.85),
        "futility 0.5": SequentialSpec(futility=0.5),
        "no futility": SequentialSpec(futility=None),
    }
    designs = {key: spec.design(K_MAX) for key, spec in specs.items()}
    start = time.perf_counter()
    result_file = ResultFile("sequential", quick)
    default = designs["sequential (default)"]
    paths = path_plan(default, M, ALPHA, "holm").n_paths
    result_file.note(
        f"sequential: {families} families of m={M} per row, k_max={K_MAX}, looks {default.looks}, "
        f"weights {tuple(round(w, 3) for w in default.weights)}, futility {default.futility} "
        f"(default), omega {OMEGA}, B={B} (fixed) and {paths} paths (the default's), Holm "
        f"at alpha={ALPHA}"
    )
    rows = []
    for name, shift, effects in FAMILIES:
        rng = np.random.default_rng(ROOT_SEED)
        totals = {key: [0, 0.0, 0] for key in ("fixed", *designs)}  # calls, power, false
        for _ in range(families):
            original, arms = _family(rng, shift, effects)
            p = [
                permutation_test(original, b, omega=OMEGA, n_permutations=B, rng=rng).p_value
                for b in arms
            ]
            outcomes = [("fixed", correct(p, method="holm", alpha=ALPHA).reject, (M + 1) * K_MAX)]
            for key, design in designs.items():
                seq = sequential_family(
                    original, arms, design, alpha=ALPHA, method="holm", omega=OMEGA, rng=rng
                )
                outcomes.append((key, seq.reject, seq.calls))
            for key, reject, calls in outcomes:
                totals[key][0] += calls
                totals[key][1] += reject[:effects].mean() if effects else 0.0
                totals[key][2] += bool(reject[effects:].any())
        fixed_calls = totals["fixed"][0] / families
        for key, (calls, power, false) in totals.items():
            mean_calls = calls / families
            rows.append(
                [
                    name,
                    key,
                    f"{mean_calls:.1f}",
                    f"{1 - mean_calls / fixed_calls:.0%}",
                    f"{power / families:.3f}" if effects else "-",
                    _rate(false, families),
                ]
            )
    result_file.table(
        "model calls per family, power and type-I (fixed k=20 against sequential, same arms)",
        ["family", "design", "calls", "fewer", "power", "type-I (any false change)"],
        rows,
    )
    _through_the_flow(quick, result_file)
    print(f"\n{time.perf_counter() - start:.0f} s")
    result_file.write()


FLOW_KEY_ENV = "DBPA_BENCH_KEY"
TARGETS = ("comedian", "pirate", "poet", "toddler", "robot")
CONTROLS = ("doctor", "nurse", "pharmacist", "physician", "clinician")
FLOW_RULES = (
    *(Rule(t, [(f"As a {t}: {i}! The flu is funny.", 1) for i in range(3)]) for t in TARGETS),
    Rule(
        "",
        [
            ("Rest, drink fluids and see a doctor if it gets worse.", 2),
            ("See a doctor if your fever lasts more than three days.", 1),
            ("Most flu gets better with rest at home.", 1),
        ],
    ),
)
"""Five target personas answer nothing like the original; five controls answer like it."""


def _flow_config(server: RemoteProvider, seed: int, sequential: bool) -> dict[str, Any]:
    scripted = {"api_base": server.api_base, "api_key_env": FLOW_KEY_ENV}
    return {
        "name": f"bench-sequential-{seed}",
        "models": [{"model": "openai/scripted", **scripted, "max_concurrency": 16, "max_n": 1}],
        "embedder": {"backend": "litellm", "model": "openai/scripted", **scripted},
        "prompt": "My flu has lasted two days. Should I see a doctor?",
        "perturbations": [
            {
                "kind": "personas",
                "values": [{"value": v, "label": "target"} for v in TARGETS]
                + [{"value": v, "label": "control"} for v in CONTROLS],
            }
        ],
        "k": K_MAX,
        "n_permutations": 3999,
        "seed": seed,
        **({"sequential": True} if sequential else {}),
    }


def _through_the_flow(quick: bool, result_file: ResultFile) -> None:
    """The audit flow against the scripted provider, fixed k=20 and sequential on separate
    records: model calls actually made, and the decisions."""
    os.environ.setdefault(FLOW_KEY_ENV, "sk-bench")
    from flows.audit import run_audit  # imports Prefect: after the environment is set

    seeds = range(1 if quick else 3)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, remote_provider(FLOW_RULES, 0.02) as server:
        totals = {False: [0, 0, 0, 0.0], True: [0, 0, 0, 0.0]}  # calls, targets, controls, s
        for seed in seeds:
            for sequential in (False, True):
                config = parse_config(_flow_config(server, seed, sequential))
                db = str(Path(tmp) / f"{seed}-{sequential}.duckdb")
                before = server.requests().chat
                started = time.perf_counter()
                outcome = run_audit(config, db, str(Path(tmp) / "reports"))
                total = totals[sequential]
                total[3] += time.perf_counter() - started
                total[0] += server.requests().chat - before
                with Store(db, read_only=True) as store:
                    results = store.results(outcome.run_id)
                changed = results[results.reject == True]  # noqa: E712
                total[1] += int((changed.label == "target").sum())
                total[2] += int((changed.label == "control").sum())
        n = len(seeds)
        fixed_calls = totals[False][0] / n
        for sequential, (calls, targets, controls, seconds) in totals.items():
            rows.append(
                [
                    "sequential (default)" if sequential else f"fixed k={K_MAX}",
                    f"{calls / n:.0f}",
                    f"{1 - calls / n / fixed_calls:.0%}",
                    f"{targets}/{len(TARGETS) * n}",
                    f"{controls}/{len(CONTROLS) * n}",
                    f"{seconds / n:.1f}",
                ]
            )
    result_file.table(
        f"through the audit flow ({n} audit(s) each: 5 target and 5 control personas, "
        "scripted provider)",
        ["design", "model calls", "fewer", "targets changed", "controls changed", "s per audit"],
        rows,
    )
