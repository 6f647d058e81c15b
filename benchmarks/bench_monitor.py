"""The drift monitor against per-tick tests: false alarms over a null year, detection delays.

Synthetic arms on the answer space of the power benchmark (d = 384, a new geometry per
audit): the baseline answers with type shares (0.4, 0.3, 0.2, 0.1); a change moves a share
of the answers to a type the baseline never uses (a total-variation distance equal to that
share): small 0.25, moderate 0.4, large 0.6. The moderate change is the issue's: a fixed
permutation test (``energy_cosine``, alpha = 0.05) of 10 baseline against 50 changed outputs
finds it about 0.6 of the time, the small one 0.25, the large one 0.93 (measured once,
100 runs each). The reference of every arm is its baseline epoch, sampled at the tick's k.

1. Null year: 365 daily ticks, 50 arms, no change. Per-tick tests: each arm's tick against
   its reference by permutation (energy_cosine, B = 999), Holm across the 50 arms at 0.05
   every tick (what ``dbpa drift --per-tick`` does against the baseline), at k = 20: at
   k = 5 a tick and its reference have 252 splits, whose smallest p-value 1/252 never
   reaches Holm's first threshold 0.001 (no false alarm, and no power either). Monitor:
   ``DriftMonitor(form="test")`` per arm at k = 5 (the betting and the conformal process,
   e-Bonferroni of the two), e-Bonferroni across the arms on each arm's largest e-value so
   far (an alarm when one reaches 50 / 0.05).
2. Delays: one arm changes at tick 100; ticks until the alarm (0: at the change's tick) for
   each size and k, for the test form (alpha = 0.05 for one arm) and the detector (alpha =
   1 / 3650: ten years of daily ticks to a false alarm on average); "before" counts alarms
   before the change, "missed" none by tick 200.
3. Tolerance: a change of exactly the tolerance (a share 0.25 of answers moved, tolerance
   0.25) at tick 1 or after 100 quiet ticks, 300 ticks: the share of runs that alarm
   (at most alpha = 0.05 by design), against a change of twice it.
4. Model calls per detection of the moderate change and of the re-weighting (item 5), per
   design (test form): the monitor's k times the mean number of ticks to its alarm (misses
   and alarms before the change count 100); per-tick tests at k outputs per tick, each
   finding the change with power p at Holm's first threshold 0.05 / 50, need k / p calls.
5. Against an oracle (issue 51): besides the three changes to a new type, a *re-weighting*
   that moves half of the answers onto the baseline's own rarest type (shares (0.2, 0.15,
   0.1, 0.55), total variation 0.45: the issue's held-out change). The oracle knows the
   change tick and runs one fixed test (``energy_cosine``, B = 199, alpha = 0.05) of the
   first w changed ticks against the ``ORACLE_HISTORY`` quiet outputs just before the
   change; its delay is the smallest w at which that test rejects in at least half of
   ``oracle_runs`` runs. Per cell: the monitor's median ticks of changed data to its alarm
   (its median delay + 1) over the oracle's w (the issue's goal: at most 2), and model
   calls per detection of each (k times mean ticks, monitor misses counting 100; the
   oracle's k w).
6. A short quiet history (issue 51's held-out case): the re-weighting and the moderate change
   after 20-23 quiet ticks (``SHORT_CHANGES``, in turn) instead of 99, at k = 5, the default
   design, in the test form, the detector at the product's default alpha (the audit's, 0.05)
   and the detector at 1 / 3650: the share of runs alarmed by the 10th changed tick (delay
   at most 9: the ten ticks a fixed test of "the 10 ticks after the change" sees) and by the
   11th (the delay table's "within 10"), the median delay. Beside it, the median p-value of
   the tick process on single ticks at each of the first 10 changed ticks, after 20 and
   after 100 quiet ticks: every conformal process tests a tick against all outputs so far,
   so after a short history the changed outputs soon make up much of what a tick is
   compared with, and each changed tick's evidence fades.
7. Designs (``DESIGNS``): every delay and oracle row for the default monitor (``"both"``:
   the betting and per-output processes, the tick process on novelty and the tick processes
   on shares on blocks of 1 and of 2 ticks, weighted e-Bonferroni 0.1 / 0.3 / 0.3 / 0.15 /
   0.15; until 2026-12-07 without the novelty process, the per-output one at 0.6), the
   two-process design (``conformal="outputs"``: betting and per-output, 1/2 each), and the
   five processes at equal weights, on blocks of 1 and 2 or of 2 and 3 ticks. The null year
   and the tolerance rows are the default design's; the cost table has every design's calls
   per detection of the moderate change and of the re-weighting.
8. The price of validity at every tick, in the oracle's own terms (no simulation): a
   sequential test that knows both the change tick and the changed distribution, a
   likelihood ratio of a Gaussian mean shift alarming when it reaches the alarm line of the
   process that finds the re-weighting (weight ``w`` of a tick process: ``1 / (w alpha)`` in
   the test form, ``2 / (w alpha)`` in the detector form at its own alpha, 1 / 3650), against
   the fixed one-sided z-test of the same shift at 0.05 with power 1/2 (the oracle's level):
   the median ratio of their sample sizes (the first passage of a Brownian motion with
   drift, an inverse Gaussian). No valid monitor whose alarm is at that line does better
   against an oracle as powerful as its own test; a ratio goal below it is out of reach for
   that design.

The tables go to ``benchmarks/results/monitor.json`` (rendered by ``docs/gen_benchmarks.py``).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import invgauss, norm
from threadpoolctl import threadpool_limits

from benchmarks._results import ResultFile
from benchmarks._synthetic import AnswerSpace, Arm, answer_space, sample
from dbpa.stats import DriftMonitor, correct, family_alarms, permutation_test
from dbpa.stats._monitor_pool import alarm_factors
from dbpa.stats._tick_conformal import TickConformalMartingale

ALPHA = 0.05
ARMS = 50
YEAR = 365
CHANGE_AT = 100
HORIZON = 200
HOLM_K = 20
D = 384
OMEGA = "energy_cosine"
B = 999
ROOT_SEED = 20261127
BASELINE = Arm(weights=(0.4, 0.3, 0.2, 0.1, 0.0))
SIZES = {"small": 0.25, "moderate": 0.4, "large": 0.6}
REWEIGHTED = Arm(weights=(0.2, 0.15, 0.1, 0.55, 0.0))
"""Half of the baseline's answers moved onto its own rarest type (issue 51)."""
ORACLE_HISTORY = 100
ORACLE_B = 199
ORACLE_MOST = 10
"""Changed ticks the oracle tries at most (beyond: reported as "> 10")."""
KS = (5, 10, 20)
DETECT_ALPHA = 1 / 3650
FORMS = {"test": ALPHA, "detect": DETECT_ALPHA}
SHORT_CHANGES = (21, 22, 23, 24)
"""Change ticks of the short-history part (issue 51's case: the change after tick 20), one
per run in turn: the first block of the block-of-two tick process after the change is all
changed when the change comes at an odd tick and half changed at an even one, so one change
tick alone would favour or handicap it."""
SHORT_FORMS = (("test", ALPHA), ("detect", ALPHA), ("detect", DETECT_ALPHA))
"""The short-history part's forms and alphas: the test form, the detector at the product's
default alpha (the audit's, 0.05: an average run length of at least 20 ticks) and at the
delay table's 1 / 3650 (ten years of daily ticks)."""
P_HISTORIES = (20, 100)
"""Quiet ticks before the change in the per-tick p-value diagnostic."""
P_TICKS = 10
"""Changed ticks whose p-values the diagnostic reports (a fixed test of "the 10 ticks after
the change" sees as many)."""
WORKERS = 2 * (os.cpu_count() or 1)
"""Processes the parts run in: twice the cores, so that on a machine shared with other jobs
the suite gets a share of it proportionate to its work (on an idle one the extra processes
cost a little switching; the numbers do not depend on them)."""


def worker_pool() -> ProcessPoolExecutor:
    """``WORKERS`` spawned processes, each with BLAS on one thread: the monitor's products
    are small, and a BLAS thread per process beside ``WORKERS`` processes on the cores only
    waits (measured 2026-12-07: each worker's BLAS thread at a quarter of a core, as
    ``dbpa.environment`` explains for the audit process)."""
    return ProcessPoolExecutor(
        WORKERS, mp_context=multiprocessing.get_context("spawn"), initializer=_one_blas_thread
    )


def _one_blas_thread() -> None:
    threadpool_limits(limits=1, user_api="blas")


DESIGNS: dict[str, dict[str, Any]] = {
    "both (default)": {"conformal": "both", "blocks": (1, 2)},
    "outputs": {"conformal": "outputs"},
    "both, equal weights": {"conformal": "both", "blocks": (1, 2), "weights": (0.2,) * 5},
    "both, blocks 2+3": {"conformal": "both", "blocks": (2, 3), "weights": (0.2,) * 5},
}
"""The monitor's designs compared (``DriftMonitor`` options): the default (betting,
per-output, the tick process on novelty and the tick processes on shares on blocks of one and
of two ticks, weighted), the betting and per-output processes alone, and the five processes at
equal weights, on blocks of one and two ticks or of two and three (issue 51)."""


def changed(share: float) -> Arm:
    """The baseline with ``share`` of its answers moved to the unused fifth type."""
    weights = [w * (1.0 - share) for w in BASELINE.weights]
    weights[-1] += share
    return replace(BASELINE, weights=tuple(weights))


def _null_year(rng: np.random.Generator, space: AnswerSpace, k: int) -> bool:
    """One audit of ``ARMS`` arms over a null year: did the monitors' family alarm?"""
    monitors = [DriftMonitor(ALPHA, rng=rng) for _ in range(ARMS)]
    references = [sample(rng, space, BASELINE, k) for _ in range(ARMS)]
    best = np.ones(ARMS)
    for _ in range(YEAR):
        for i, monitor in enumerate(monitors):
            state = monitor.update(references[i], sample(rng, space, BASELINE, k))
            best[i] = max(best[i], state.e_value)
    return bool(family_alarms(best, alpha=ALPHA).alarmed.any())


def _holm_year(rng: np.random.Generator, space: AnswerSpace, k: int) -> int:
    """Ticks of a null year on which per-tick Holm across ``ARMS`` arms found a change."""
    references = [sample(rng, space, BASELINE, k) for _ in range(ARMS)]
    alarms = 0
    for _ in range(YEAR):
        p = [
            permutation_test(
                ref, sample(rng, space, BASELINE, k), omega=OMEGA, n_permutations=B, rng=rng
            ).p_value
            for ref in references
        ]
        alarms += bool(correct(p, method="holm", alpha=ALPHA).reject.any())
    return alarms


def _delay(
    rng: np.random.Generator,
    after: Arm,
    k: int,
    form: str,
    alpha: float,
    design: dict[str, Any],
    change_at: int = CHANGE_AT,
) -> int | None:
    """Ticks from the change at ``change_at`` to the alarm (negative: a false alarm before
    it; None: none within ``HORIZON - CHANGE_AT`` ticks of the change)."""
    space = answer_space(rng, d=D)
    monitor = DriftMonitor(alpha, form=form, rng=rng, **design)
    reference = sample(rng, space, BASELINE, k)
    for tick in range(1, change_at + HORIZON - CHANGE_AT + 1):
        arm = after if tick >= change_at else BASELINE
        if monitor.update(reference, sample(rng, space, arm, k)).alarm:
            return tick - change_at
    return None


def tick_p_values(
    rng: np.random.Generator, after: Arm, history: int, runs: int
) -> NDArray[np.float64]:
    """The median p-value of a tick process on single ticks (the default's third process)
    at each of the first ``P_TICKS`` changed ticks after ``history`` quiet ones, k = 5: how fast the
    evidence of each changed tick fades as changed outputs join what ticks are tested
    against."""
    p = np.empty((runs, P_TICKS))
    for run in range(runs):
        space = answer_space(rng, d=D)
        process = TickConformalMartingale(rng)
        reference = sample(rng, space, BASELINE, 5)
        for tick in range(1, history + P_TICKS + 1):
            arm = after if tick > history else BASELINE
            step = process.update(reference, sample(rng, space, arm, 5))
            if tick > history:
                p[run, tick - history - 1] = step.p_value
    medians: NDArray[np.float64] = np.median(p, axis=0)
    return medians


def oracle_ticks(rng: np.random.Generator, after: Arm, k: int, runs: int) -> int | None:
    """The oracle's delay: the fewest changed ticks whose fixed test against the quiet
    history rejects in at least half of ``runs`` (None: more than ``ORACLE_MOST``)."""
    for w in range(1, ORACLE_MOST + 1):
        hits = 0
        for _ in range(runs):
            space = answer_space(rng, d=D)
            p = permutation_test(
                sample(rng, space, BASELINE, ORACLE_HISTORY),
                sample(rng, space, after, w * k),
                omega=OMEGA,
                n_permutations=ORACLE_B,
                rng=rng,
            ).p_value
            hits += p <= ALPHA
        if 2 * hits >= runs:
            return w
    return None


def tolerance_rates(rng: np.random.Generator, runs: int, k: int = 10) -> list[list[object]]:
    """Alarm rates of ``DriftMonitor(tolerance=0.25)`` at a change of 0.25 and of 0.5."""
    rows: list[list[object]] = []
    for share in (0.25, 0.5):
        for quiet in (0, CHANGE_AT - 1):
            alarms = 0
            for _ in range(runs):
                space = answer_space(rng, d=D)
                monitor = DriftMonitor(ALPHA, 0.25, rng=rng)
                reference = sample(rng, space, BASELINE, k)
                for tick in range(1, 301):
                    arm = changed(share) if tick > quiet else BASELINE
                    if monitor.update(reference, sample(rng, space, arm, k)).alarm:
                        alarms += 1
                        break
            rows.append([0.25, share, k, quiet, runs, alarms / runs])
    return rows


def _per_tick_power(rng: np.random.Generator, share: float | None, k: int, runs: int) -> float:
    """Power of one tick against its reference at Holm's first threshold (``share``: a
    change to the new type; None: the re-weighting)."""
    after = REWEIGHTED if share is None else changed(share)
    hits = 0
    for _ in range(runs):
        space = answer_space(rng, d=D)
        p = permutation_test(
            sample(rng, space, BASELINE, k),
            sample(rng, space, after, k),
            omega=OMEGA,
            n_permutations=B,
            rng=rng,
        ).p_value
        hits += p <= ALPHA / ARMS
    return hits / runs


def ideal_ratio(line: float, alpha: float) -> float:
    """Median samples of a known-alternative likelihood ratio to reach ``line`` over those
    of the fixed one-sided z-test at ``alpha`` with power 1/2 (a Gaussian shift ``delta``,
    scale-free: the log ratio is a Brownian motion with drift ``delta^2 / 2`` and variance
    ``delta^2`` per sample, its first passage of ``a`` an inverse Gaussian of mean
    ``2 a / delta^2`` and shape ``a^2 / delta^2``; the fixed test needs ``z^2 / delta^2``)."""
    a = math.log(line)
    mean, shape = 2.0 * a, a * a
    return float(invgauss(mu=mean / shape, scale=shape).median()) / float(norm.ppf(1 - alpha)) ** 2


def alarm_line(weights: tuple[float, ...], form: str, alpha: float) -> float:
    """The e-value at which the last of ``weights``' processes (a tick process on shares, or
    the per-output one) alone alarms: ``1 / (factor * alpha)``, its factor in the weighted
    e-Bonferroni (``alarm_factors``: its weight, half of it in the detector form)."""
    return 1.0 / (float(alarm_factors(weights, form)[-1]) * alpha)


def _null_task(seed: np.random.SeedSequence) -> bool:
    rng = np.random.default_rng(seed)
    return _null_year(rng, answer_space(rng, d=D), 5)


def _holm_task(seed: np.random.SeedSequence) -> int:
    rng = np.random.default_rng(seed)
    return _holm_year(rng, answer_space(rng, d=D), HOLM_K)


def _oracle_task(task: tuple[np.random.SeedSequence, Arm, int, int]) -> int | None:
    seed, after, k, runs = task
    return oracle_ticks(np.random.default_rng(seed), after, k, runs)


def _delay_task(
    task: tuple[np.random.SeedSequence, Arm, int, str, float, dict[str, Any], int, tuple[int, ...]],
) -> list[int | None]:
    """``runs`` delays, the change at each tick of ``change_ticks`` in turn."""
    seed, after, k, form, alpha, design, runs, change_ticks = task
    rng = np.random.default_rng(seed)
    return [
        _delay(rng, after, k, form, alpha, design, change_ticks[run % len(change_ticks)])
        for run in range(runs)
    ]


def _p_task(task: tuple[np.random.SeedSequence, Arm, int, int]) -> NDArray[np.float64]:
    seed, after, history, runs = task
    return tick_p_values(np.random.default_rng(seed), after, history, runs)


def _outcomes(delays: list[int | None]) -> tuple[NDArray[np.float64], int, int]:
    """The delays of the runs that alarmed after the change, and the counts of runs that
    alarmed before it and of runs that never alarmed."""
    found = np.array([d for d in delays if d is not None and d >= 0], dtype=float)
    before = sum(d is not None and d < 0 for d in delays)
    return found, before, sum(d is None for d in delays)


def _tolerance_task(task: tuple[np.random.SeedSequence, int]) -> list[list[object]]:
    seed, runs = task
    return tolerance_rates(np.random.default_rng(seed), runs)


def _power_task(task: tuple[np.random.SeedSequence, float | None, int, int]) -> float:
    seed, share, k, runs = task
    return _per_tick_power(np.random.default_rng(seed), share, k, runs)


def main(quick: bool = False) -> None:
    """Every part in a pool of ``WORKERS`` processes, each task on a seed of its own
    (spawned from ``ROOT_SEED`` in a fixed order: the numbers do not depend on the number of
    processes)."""
    audits, holm_audits, runs, power_runs = (10, 1, 20, 20) if quick else (40, 2, 40, 60)
    short_runs = 100 if quick else 200
    p_runs = 40 if quick else 100
    oracle_runs = 20 if quick else 40
    start = time.perf_counter()
    result_file = ResultFile("monitor", quick)
    root = np.random.SeedSequence(ROOT_SEED)
    null_seeds, holm_seeds, oracle_seed, delay_seed, tolerance_seed, power_seed = root.spawn(6)
    short_seed, p_seed = root.spawn(2)  # after the others: their seeds are those of earlier runs
    result_file.note(
        f"monitor: {ARMS} arms x {YEAR} ticks per null audit, {audits} audits (monitor, "
        f"k = 5), {holm_audits} (per-tick Holm, k = {HOLM_K}, B = {B}); {runs} runs per "
        f"delay cell, change at tick {CHANGE_AT}; d = {D}"
    )
    changes = {size: changed(share) for size, share in SIZES.items()} | {"re-weight": REWEIGHTED}
    cells = [
        (design, form, size, k)
        for design in DESIGNS
        for form in FORMS
        for size in changes
        for k in KS
    ]
    oracle_cells = [(size, k) for size in changes for k in KS]
    power_cells = [
        (size, share, k)
        for size, share in (("moderate", SIZES["moderate"]), ("re-weight", None))
        for k in (5, 10, 20, 40)
    ]
    with worker_pool() as pool:
        null_jobs = pool.map(_null_task, null_seeds.spawn(audits))
        holm_jobs = pool.map(_holm_task, holm_seeds.spawn(holm_audits))
        oracle_jobs = pool.map(
            _oracle_task,
            [
                (seed, changes[size], k, oracle_runs)
                for seed, (size, k) in zip(
                    oracle_seed.spawn(len(oracle_cells)), oracle_cells, strict=True
                )
            ],
        )
        delay_jobs = pool.map(
            _delay_task,
            [
                (seed, changes[size], k, form, FORMS[form], DESIGNS[design], runs, (CHANGE_AT,))
                for seed, (design, form, size, k) in zip(
                    delay_seed.spawn(len(cells)), cells, strict=True
                )
            ],
        )
        short_cells = [
            (size, form, alpha) for size in ("re-weight", "moderate") for form, alpha in SHORT_FORMS
        ]
        short_jobs = pool.map(
            _delay_task,
            [
                (seed, changes[size], 5, form, alpha, DESIGNS["both (default)"], short_runs,
                 SHORT_CHANGES)
                for seed, (size, form, alpha) in zip(
                    short_seed.spawn(len(short_cells)), short_cells, strict=True
                )
            ],
        )  # fmt: skip
        p_cells = [(size, history) for size in ("re-weight", "moderate") for history in P_HISTORIES]
        p_jobs = pool.map(
            _p_task,
            [
                (seed, changes[size], history, p_runs)
                for seed, (size, history) in zip(p_seed.spawn(len(p_cells)), p_cells, strict=True)
            ],
        )
        tolerance_job = pool.submit(_tolerance_task, (tolerance_seed, runs))
        power_jobs = pool.map(
            _power_task,
            [
                (seed, share, k, power_runs)
                for seed, (_, share, k) in zip(
                    power_seed.spawn(len(power_cells)), power_cells, strict=True
                )
            ],
        )
        clean = sum(not alarmed for alarmed in null_jobs)
        holm = list(holm_jobs)
        oracle = dict(zip(oracle_cells, oracle_jobs, strict=True))
        delays_of = dict(zip(cells, delay_jobs, strict=True))
        short = dict(zip(short_cells, short_jobs, strict=True))
        p_medians = dict(zip(p_cells, p_jobs, strict=True))
        tolerance = tolerance_job.result()
        powers = list(power_jobs)
    result_file.table(
        "null year",
        ["design", "k", "audits", "audits with no false alarm", "false alarm ticks per audit"],
        [
            ["per-tick Holm", HOLM_K, holm_audits, sum(h == 0 for h in holm), np.mean(holm)],
            ["monitor (e-Bonferroni)", 5, audits, clean, "-"],
        ],
    )
    rows, mean_ticks, against = [], {}, []
    for design in DESIGNS:
        for form in FORMS:
            for size in changes:
                for k in KS:
                    delays = delays_of[design, form, size, k]
                    found, before, missed = _outcomes(delays)
                    waits = [d + 1 if d is not None and d >= 0 else 100 for d in delays]
                    if form == "test" and size in ("moderate", "re-weight"):
                        mean_ticks[design, size, k] = float(np.mean(waits))
                    used = float(np.median(found)) + 1 if found.size else None
                    w = oracle[size, k]
                    against.append(
                        [
                            design,
                            form,
                            size,
                            k,
                            "-" if used is None else used,
                            f"> {ORACLE_MOST}" if w is None else w,
                            "-" if used is None or w is None else f"{used / w:.1f}",
                            f"{k * np.mean(waits):.0f}",
                            "-" if w is None else k * w,
                        ]
                    )
                    rows.append(
                        [
                            design,
                            form,
                            size,
                            k,
                            np.median(found) if found.size else "-",
                            np.percentile(found, 90) if found.size else "-",
                            np.count_nonzero(found <= 10) / runs,
                            before,
                            missed,
                        ]
                    )
    result_file.table(
        "detection delay (ticks after the change)",
        ["design", "form", "change", "k", "median", "p90", "within 10", "before", "missed"],
        rows,
    )
    result_file.table(
        f"against the oracle (fixed test of w changed ticks vs {ORACLE_HISTORY} quiet outputs, "
        f"{oracle_runs} runs per w)",
        [
            "design",
            "form",
            "change",
            "k",
            "monitor ticks (median)",
            "oracle ticks",
            "ratio",
            "monitor calls",
            "oracle calls",
        ],
        against,
    )
    short_rows = []
    for (size, form, alpha), delays in short.items():
        found, before, missed = _outcomes(delays)
        short_rows.append(
            [
                size,
                form,
                f"1/{1 / alpha:.0f}",
                short_runs,
                f"{np.count_nonzero(found <= 9) / short_runs:.2f}",
                f"{np.count_nonzero(found <= 10) / short_runs:.2f}",
                np.median(found) if found.size else "-",
                before,
                missed,
            ]
        )
    result_file.table(
        f"a short history: the change at tick {SHORT_CHANGES[0]}-{SHORT_CHANGES[-1]} in turn "
        "(k = 5, the default design): share of runs alarmed by the 10th and by the 11th "
        "changed tick",
        ["change", "form", "alpha", "runs", "by 10th", "by 11th", "median delay", "before",
         "missed"],
        short_rows,
    )  # fmt: skip
    result_file.table(
        f"the tick process on single ticks: median p-value at each changed tick ({p_runs} "
        "runs, k = 5)",
        ["change", "quiet ticks before", *(f"tick {i}" for i in range(1, P_TICKS + 1))],
        [
            [size, history, *(f"{v:.3f}" for v in medians)]
            for (size, history), medians in p_medians.items()
        ],
    )
    result_file.table(
        "tolerance 0.25: share of runs alarmed within 300 ticks",
        ["tolerance", "change", "k", "quiet ticks", "runs", "alarmed"],
        tolerance,
    )
    cost = []
    for (size, _, k), power in zip(power_cells, powers, strict=True):
        monitors = [
            f"{k * mean_ticks[d, size, k]:.0f}" if (d, size, k) in mean_ticks else "-"
            for d in DESIGNS
        ]
        cost.append([size, k, power, f"{k / power:.0f}" if power else "inf", *monitors])
    result_file.table(
        "model calls per detection, test form (one arm; per-tick tests at Holm's 0.05/50)",
        ["change", "k", "per-tick power", "per-tick calls", *(f"{d} calls" for d in DESIGNS)],
        cost,
    )
    bound = []
    for design, options in DESIGNS.items():
        weights = DriftMonitor(**options).weights
        for form, alpha in FORMS.items():
            line = alarm_line(weights, form, alpha)
            bound.append([design, form, f"{line:,.0f}", f"{ideal_ratio(line, ALPHA):.2f}"])
    for form, alpha in FORMS.items():
        line = alarm_line((1.0,), form, alpha)
        bound.append(["one process alone", form, f"{line:,.0f}", f"{ideal_ratio(line, ALPHA):.2f}"])
    result_file.table(
        "the price of validity at every tick: a known-alternative likelihood ratio alarming at "
        f"the line of the process that finds the re-weighting, median samples over a fixed "
        f"test's at {ALPHA} with power 1/2",
        ["design", "form", "alarm line", "ideal ratio"],
        bound,
    )
    result_file.note(f"monitor benchmark: {time.perf_counter() - start:.0f} s")
    result_file.write()
