"""Error rates measured at fixed sizes: the studies the README quotes, on the streams the tests
check sequentially.

``python -m benchmarks.bench_rates [--study NAME ...] [--quick]`` (or ``python -m benchmarks
rates``, every study). The tests check each rate with a sequential test of the simulation
(``tests/support/rates.py``), which stops as soon as the rate is clearly within its level and
so does not measure it; the numbers the README and benchmarks/README.md quote are measured
here, from the same streams (``tests/stats/simulations.py``) with the seeds and sizes of the
fixed-size tests they came from, so each reproduces its number exactly. 95% Clopper-Pearson
intervals; "bound" is alpha + 2.5 SE of the cell's size, the rule those tests asserted.

Studies (each about 10-20 min on the shared 2-core machine):

* ``margin``: P("equivalent" | effect = margin) of single equivalence tests, 400 audits per
  cell (B = 500), k up to 160 and unequal arms; ``collapse_hard`` at k = 10 with 2000 audits
  (B = 1000), the product's test and the least-favourable test alone on the same audits.
* ``equivalence``: at the margin on the shift, mixture and spread shapes, 400 single tests
  and 100 Holm families of 4 per cell (B = 500); the power at no effect (the margin
  calibrated on 12 replicate pairs of 20 outputs), 200 audits per k.
* ``sequential``: sequential equivalence at the margin (looks at 8, 12, 16, 20, every look
  taken, B = 2000 per look), 400 single tests and 100 Holm families of 4 per shape.
* ``stopping``: the group-sequential test's error rates (k_max = 20, the default design):
  1000 null single tests without and with futility stops, 300 null families of 4 and 300 with
  2 of 4 shifted per correction, 200 null Holm families under omega auto.
* ``combined``: omega auto's type-I error at B = 99, 2000 null audits per cell on four null
  shapes at k = 6, 10, 20, 50.
* ``prompt_sets``: the pooled test's type-I error (400, 400, 300, 300 sets of 1 and 5
  prompts, 150 of 50 and of 500), the other combinations (200 sets each), the drill-down's
  error (100 families per cell), set equivalence at the margin (300, 150, 150 audits).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np
from scipy.stats import binomtest

from benchmarks._table import print_table
from dbpa.stats import calibrate_margin, equivalence_p_value, sequential_design
from dbpa.stats._boundary import NO_GUARD, boundary_p_value
from tests.stats.simulations import (
    ALPHA,
    NULL_K,
    NULL_SHAPES,
    auto_null_rejections,
    drilldown_errors,
    equivalence_families,
    intervals_at_margin,
    pooled_null_rejections,
    sequential_equivalences,
    sequential_family_errors,
    sequential_null_rejections,
    set_equivalences,
)
from tests.stats.synthetic_effects import scenario, true_effect


def _rate(hits: float, n: int) -> list[str]:
    """The rate with its 95% interval, and the fixed rule's bound alpha + 2.5 SE."""
    ci = binomtest(round(hits), n).proportion_ci(0.95, method="exact")
    bound = ALPHA + 2.5 * math.sqrt(ALPHA * (1 - ALPHA) / n)
    return [f"{hits / n:.4f} [{ci.low:.3f}, {ci.high:.3f}]", str(n), f"{bound:.3f}"]


def _count(outcomes: Iterable[bool], n: int) -> int:
    return sum(bool(x) for x in itertools.islice(outcomes, n))


MARGIN_CELLS = (
    ("few_texts", 40, None),
    ("few_texts", 160, None),
    ("two_texts", 10, None),
    ("two_texts", 160, None),
    ("mixture", 80, None),
    ("share_detail", 40, None),
    ("share_detail", 160, None),
    ("gauss_shift", 40, None),
    ("few_texts", 20, 80),
    ("few_texts", 80, 20),
    ("collapse", 20, None),
    ("collapse_hard", 40, None),
    ("collapse_hard", 10, 40),
)
"""(scenario, k, perturbed k) of the at-margin study, seeded ``10 k + perturbed k``."""


def margin(quick: bool) -> None:
    sims = 60 if quick else 400
    rows = []
    for name, k, k_b in MARGIN_CELLS:
        margin_ = true_effect(name)
        intervals = intervals_at_margin(name, k, 10 * k + (k_b or 0), k_b=k_b)
        hits = _count((equivalence_p_value(i, margin_) <= ALPHA for i in intervals), sims)
        rows.append([name, f"{k}/{k_b or k}", *_rate(hits, sims)])
        print(*rows[-1], sep=" | ", flush=True)
    print_table(
        f"equivalence at the margin, B = 500: P(equivalent | effect = margin), nominal <= {ALPHA}",
        ["scenario", "k", "rate [95% CI]", "audits", "bound"],
        rows,
    )
    sims = 300 if quick else 2000
    margin_ = true_effect("collapse_hard")
    product = alone = 0
    for interval in itertools.islice(
        intervals_at_margin("collapse_hard", 10, 30, n_bootstrap=1000), sims
    ):
        product += equivalence_p_value(interval, margin_) <= ALPHA
        alone += boundary_p_value(replace(interval.boundary, guard=NO_GUARD), margin_) <= ALPHA
    print_table(
        "collapse_hard, k = 10, B = 1000: the product's test and the least-favourable test "
        "alone, same audits",
        ["test", "rate [95% CI]", "audits", "bound"],
        [
            ["product (tilted bootstrap)", *_rate(product, sims)],
            ["least favourable alone", *_rate(alone, sims)],
        ],
    )


EQUIVALENCE_CELLS = (("shift", 10), ("shift", 40), ("mixture", 20), ("mixture", 40), ("spread", 20))


def equivalence(quick: bool) -> None:
    sims = 60 if quick else 400
    rows = []
    for name, k in EQUIVALENCE_CELLS:
        at = true_effect(name)
        single = _count(equivalence_families(name, k, at, 50 + k), sims)
        family = _count(equivalence_families(name, k, at, 60 + k, m=4), sims // 4)
        rows.append([name, k, *_rate(single, sims), *_rate(family, sims // 4)])
        print(*rows[-1], sep=" | ", flush=True)
    print_table(
        "equivalence at the margin, B = 500: single tests and Holm families of 4",
        ["scenario", "k", "single [95% CI]", "audits", "bound", "family", "families", "bound"],
        rows,
    )
    sims = 40 if quick else 200
    rng = np.random.default_rng(16)
    calibrated = calibrate_margin([scenario("null").draw(rng, 20) for _ in range(12)]).margin
    rows = []
    for k in (10, 20, 40, 80):
        shown = _count(equivalence_families("null", k, calibrated, 17 + k), sims)
        ci = binomtest(shown, sims).proportion_ci(0.95, method="exact")
        rows.append([k, f"{shown / sims:.3f} [{ci.low:.3f}, {ci.high:.3f}]", sims])
    print_table(
        f"no effect, margin {calibrated:.4f} (0.95 quantile of 12 replicate pairs of 20): "
        "P(equivalent)",
        ["k", "power [95% CI]", "audits"],
        rows,
    )


def sequential(quick: bool) -> None:
    sims = 40 if quick else 400
    rows = []
    for name in ("shift", "spread", "mixture", "few_texts"):
        single = _count(sequential_equivalences(name, 1, 31), sims)
        family = _count(sequential_equivalences(name, 4, 32), sims // 4)
        rows.append([name, *_rate(single, sims), *_rate(family, sims // 4)])
        print(*rows[-1], sep=" | ", flush=True)
    print_table(
        "sequential equivalence at the margin (looks 8, 12, 16, 20, every look taken): "
        "single tests and Holm families of 4",
        ["scenario", "single [95% CI]", "audits", "bound", "family", "families", "bound"],
        rows,
    )


def stopping(quick: bool) -> None:
    scale = 10 if quick else 1
    rows = []
    for futility in (None, 0.2):
        design = sequential_design(20, futility=futility)
        n = 1000 // scale
        hits = _count(sequential_null_rejections(21, design), n)
        rows.append([f"single null tests, futility {futility}", *_rate(hits, n)])
        print(*rows[-1], sep=" | ", flush=True)
    n = 300 // scale
    for method in ("holm", "bonferroni", "bh", "by"):
        null = sum(x for x, _ in itertools.islice(sequential_family_errors(22, method), n))
        rows.append([f"{method}: null families of 4 (FWER = FDR)", *_rate(null, n)])
        mixed = list(itertools.islice(sequential_family_errors(23, method, effects=2), n))
        if method in {"holm", "bonferroni"}:
            rows.append([f"{method}: 2 of 4 shifted, FWER", *_rate(sum(x for x, _ in mixed), n)])
        else:
            fdr = sum(fdp for _, fdp in mixed)
            rows.append([f"{method}: 2 of 4 shifted, FDR", *_rate(fdr, n)])
        print(*rows[-2], sep=" | ", flush=True)
    n = 200 // scale
    auto = sum(x for x, _ in itertools.islice(sequential_family_errors(24, omega="auto"), n))
    rows.append(["auto, Holm: null families of 4", *_rate(auto, n)])
    print_table(
        "group-sequential error rates, k_max = 20, the default design (FDR: the mean false "
        "discovery proportion; its interval is the count's, rounded)",
        ["simulation", "rate [95% CI]", "runs", "bound"],
        rows,
    )


def combined(quick: bool) -> None:
    sims = 200 if quick else 2000
    rows, total = [], 0
    for shape in NULL_SHAPES:
        for k in NULL_K:
            hits = _count(auto_null_rejections(shape, k, 2), sims)
            total += hits
            rows.append([shape, k, *_rate(hits, sims)])
    rows.append(["all", "", *_rate(total, sims * len(rows))])
    print_table(
        "omega auto, type-I error at B = 99 (alpha (B + 1) an integer)",
        ["null shape", "k", "rate [95% CI]", "audits", "bound"],
        rows,
    )


PROMPT_SET_CELLS = (
    (1, 400, {}),
    (5, 400, {}),
    (5, 300, {"unequal": True}),
    (5, 300, {"same_text_prompts": 2}),
    (50, 150, {"unequal": True, "same_text_prompts": 10}),
    (500, 150, {"unequal": True, "same_text_prompts": 50}),
)
"""(prompts, audits, shape) of the pooled test's type-I study, seeded ``prompts + 7 x shape
entries`` (500 prompts: 500)."""


def prompt_sets(quick: bool) -> None:
    scale = 5 if quick else 1
    rows = []
    for n_prompts, sims, shape in PROMPT_SET_CELLS:
        seed = 500 if n_prompts == 500 else n_prompts + 7 * len(shape)
        hits = _count(pooled_null_rejections(n_prompts, seed, **shape), sims // scale)
        rows.append([f"{n_prompts} prompts {shape}", *_rate(hits, sims // scale)])
        print(*rows[-1], sep=" | ", flush=True)
    for combination in ("sum_z+tippett", "sum_z", "fisher", "tippett", "sum"):
        audits = pooled_null_rejections(
            5, 31, combination=combination, unequal=True, same_text_prompts=1
        )
        rows.append(
            [f"5 prompts, {combination}", *_rate(_count(audits, 200 // scale), 200 // scale)]
        )
    for within, moved in (
        ("holm", (2, 2, 0, 0, 0)),
        ("bh", (2, 2, 0, 0, 0)),
        ("holm", (1, 0, 0, 0, 0)),
    ):
        n = 100 // scale
        errors = sum(
            itertools.islice(drilldown_errors(within, len(moved) + sum(moved), moved=moved), n)
        )
        rows.append([f"drill-down {within} {moved}", *_rate(errors, n)])
    for shape, n in (("all", 300), ("one", 150), ("half", 150)):
        shown = _count(set_equivalences(shape, 4, 20, 11), n // scale)
        rows.append([f"set equivalence at the margin, {shape}", *_rate(shown, n // scale)])
        print(*rows[-1], sep=" | ", flush=True)
    print_table(
        "prompt sets, alpha 0.05: the pooled test's type-I error (auto, B = 99), the drill-down's "
        "error over selected perturbations (the average of the per-family error; its interval "
        "is the count's, rounded), set equivalence at the margin (4 prompts, k = 20)",
        ["simulation", "rate [95% CI]", "audits", "bound"],
        rows,
    )


STUDIES: dict[str, Callable[[bool], None]] = {
    "margin": margin,
    "equivalence": equivalence,
    "sequential": sequential,
    "stopping": stopping,
    "combined": combined,
    "prompt_sets": prompt_sets,
}


def main(quick: bool = False, studies: Iterable[str] = tuple(STUDIES)) -> None:
    for name in studies:
        start = time.perf_counter()
        STUDIES[name](quick)
        print(f"\n{name}: {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", nargs="+", choices=list(STUDIES), default=list(STUDIES))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    main(quick=args.quick, studies=args.study)
