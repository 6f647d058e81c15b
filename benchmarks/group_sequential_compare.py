"""Weighted-Bonferroni spending (``dbpa.stats.sequential_family``) against the exact
group-sequential permutation test (``dbpa.stats._group_sequential``), on the same arms.

The families of ``benchmarks/bench_sequential.py`` (its ``_family`` and constants: m = 10,
k_max = 20, looks 8, 12, 16, 20, omega energy_cosine, Holm at 0.05): half large, half
moderate, all null. Per family the fixed design (k = 20, B = 4999, Holm) and, for each
final weight, weighted Bonferroni with the flow's look B (``SequentialSpec.look_analysis``,
step thresholds as in the library), the group-sequential test with R = that same B
(lone threshold alpha/m, stage-wise p-values, Holm; "GS"), and the group-sequential test
whose paths run through every split of the first block (``first_block="all"``; R + 1 the
smallest multiple of C(16, 8) = 12870 at least B + 1; "GS-all"); and, on GS's paths, tests
stopped at Holm's step thresholds by their repeated p-values (``repeated_p_value``: the
smallest level whose boundary the observed path has crossed; "GS-step"). Calls: outputs
sampled per family; power: share of shifted arms found changed; type-I: share of families
with any unshifted arm found changed (95% Clopper-Pearson).

    PYTHONPATH=. python benchmarks/group_sequential_compare.py [families] [final weights...]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks._table import print_table
from benchmarks.bench_sequential import (
    ALPHA,
    FAMILIES,
    K_MAX,
    OMEGA,
    ROOT_SEED,
    B,
    M,
    _family,
    _rate,
)
from dbpa.analysis import AnalysisSpec, SequentialSpec
from dbpa.stats import correct, permutation_test, sequential_family
from dbpa.stats._group_sequential import (
    _family_from_paths,
    _family_steps_from_paths,
    first_block_splits,
    group_sequential_paths,
)


def main(families: int = 100, final_weights: tuple[float, ...] = (0.85, 0.7)) -> None:
    fixed = AnalysisSpec(omega=OMEGA, n_permutations=B, alpha=ALPHA, correction="holm")
    designs = {}
    for fw in final_weights:
        spec = SequentialSpec(final_weight=fw)
        designs[fw] = (spec.design(K_MAX), spec.look_analysis(fixed, K_MAX, M).n_permutations)
    print(
        f"group-sequential vs weighted Bonferroni: {families} families of m={M} per row, "
        f"k_max={K_MAX}, looks {designs[final_weights[0]][0].looks}, futility 0.2, omega "
        f"{OMEGA}, fixed B={B}, Holm at alpha={ALPHA}; B = R per final weight: "
        + ", ".join(f"{fw}: {b}" for fw, (_, b) in designs.items())
    )
    distinct = first_block_splits(designs[final_weights[0]][0].looks)
    start = time.perf_counter()
    rows = []
    keys = ["fixed"] + [
        f"{kind} w_J={fw}" for fw in final_weights for kind in ("WB", "GS", "GS-step", "GS-all")
    ]
    for name, shift, effects in FAMILIES:
        rng = np.random.default_rng(ROOT_SEED)
        totals = {key: [0, 0.0, 0] for key in keys}  # calls, power, families with a false change
        for _ in range(families):
            original, arms = _family(rng, shift, effects)
            p = [
                permutation_test(original, b, omega=OMEGA, n_permutations=B, rng=rng).p_value
                for b in arms
            ]
            outcomes = [("fixed", correct(p, method="holm", alpha=ALPHA).reject, (M + 1) * K_MAX)]
            for fw, (design, look_b) in designs.items():
                wb = sequential_family(
                    original, arms, design, alpha=ALPHA, method="holm", omega=OMEGA,
                    n_permutations=look_b, rng=rng,
                )  # fmt: skip
                root = int(rng.integers(2**63))
                paths = [
                    group_sequential_paths(original, b, design.looks, n_paths=look_b + 1,
                                           seed=(root, i))
                    for i, b in enumerate(arms)
                ]  # fmt: skip
                gs = _family_from_paths(paths, design, ALPHA, "holm")
                gs_step = _family_steps_from_paths(paths, design, ALPHA, "holm")
                # the first block enumerated: R + 1 the smallest multiple of C(16, 8) >= B + 1
                size = -(-(look_b + 1) // distinct) * distinct
                paths = [
                    group_sequential_paths(original, b, design.looks, n_paths=size,
                                           seed=(root, i), first_block="all")
                    for i, b in enumerate(arms)
                ]  # fmt: skip
                gs_all = _family_from_paths(paths, design, ALPHA, "holm")
                outcomes.append((f"WB w_J={fw}", wb.reject, wb.calls))
                outcomes.append((f"GS w_J={fw}", gs.reject, gs.calls))
                outcomes.append((f"GS-step w_J={fw}", gs_step.reject, gs_step.calls))
                outcomes.append((f"GS-all w_J={fw}", gs_all.reject, gs_all.calls))
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
        print(f"  {name}: {time.perf_counter() - start:.0f} s", flush=True)
        for row in rows[-len(keys) :]:
            print("   ", "  ".join(row), flush=True)
    print_table(
        "model calls per family, power and type-I (fixed k=20, weighted Bonferroni (WB) and "
        "group-sequential (GS) by final weight w_J, same arms)",
        ["family", "design", "calls", "fewer", "power", "type-I (any false change)"],
        rows,
    )
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    weights = tuple(float(w) for w in sys.argv[2:]) or (0.85, 0.7)
    main(n, weights)
