"""The permutation engine against a literal per-permutation Algorithm 1, measured in the same run.

At k=50 outputs per arm and d=384 (sentence-embedding size): the literal version
re-splits the pooled embeddings, recomputes the cosines and bins a 30-bin JSD for every
permutation; ``dbpa.permutation_test`` builds the pooled matrix once (included in its
time) and indexes it. Targets: >= 50x faster at B=1000 with p-values equal within Monte
Carlo error; B=10,000 in at most 0.05 s (the default omega, jsd; energy informative, both
timed against the literal version on the same omega in the same run); ``auto`` (jsd and
energy_cosine on the same splits) at most 3x the time of jsd. Also the CPU time of
``effect_interval`` per k and B and its tilted guard's share
(``dbpa.stats._tilted.tilted_steps`` alone on the same distances), and the collapse probe:
at-margin equivalence audits of the shapes whose perturbed arm collapses onto one answer
(``tests/stats/synthetic_effects.py``), the interval and the decision at the true effect,
against the same audit as it was before the tilted guard (the least-favourable test alone,
on the same resamples), interleaved (target: at most 2x, issue 49), and where the guard's cost
sits: the grid margins its walk evaluates (B resamples each) and its fixed work (the boundary
point of every grid margin), which alone costs more than the whole audit before the guard.
A family of 500 template perturbations at k=8, B=9,999 on a scripted server is timed apart
(a few minutes): ``python -m benchmarks._template_family``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

import dbpa
from benchmarks._plain_walk import plain_tilted_steps
from benchmarks._results import ResultFile
from benchmarks._synthetic import Arm, Matrix, Vector, answer_space, cosine_range, sample
from dbpa.stats import OMEGAS, EffectInterval, effect_interval, equivalence_p_value
from dbpa.stats._boundary import boundary_bound, boundary_lower, boundary_p_value
from dbpa.stats._interval import _bootstrap, _relabelled, energy_u_statistic
from dbpa.stats._omega import merged_ties
from dbpa.stats._similarity import l2_distance, pool_arms
from dbpa.stats._threads import blas_for
from dbpa.stats._tilted import GRID_RATIO, GRID_SIZE, _Arms, tilted_steps
from tests.stats.synthetic_effects import scenario, true_effect
from tests.support.literal_dbpa import algorithm1

K = 50
D = 384
B = 1000
B_LARGE = 10_000
TARGET_SPEEDUP = 50.0
TARGET_SECONDS = 0.05
TARGET_AUTO_RATIO = 3.0
FLAG_SE = 4.0
STATISTIC_TOL = 1e-12
B_SMALL = 10
DATA_SEED = 0
ORIGINAL = Arm(weights=(0.4, 0.3, 0.2, 0.1))
INTERVAL_KS = (10, 20, 40, 160)
INTERVAL_BS = (500, 2000)
INTERVAL_CALLS = 200
"""Timed interval calls per (k, B) at k=10, B=500, fewer in proportion to k * B (at least 3)."""
PROBE_SHAPES = ("collapse", "collapse_hard")
PROBE_KS = (10, 20)
PROBE_B = 500
PROBE_AUDITS = 100
"""At-margin audits per shape and k (a tenth with --quick)."""
TARGET_PROBE_RATIO = 2.0
WALK_CELLS = (
    ("collapse", 8, 9999),
    ("collapse_hard", 8, 9999),
    ("null", 8, 9999),
    ("few_texts", 8, 9999),
    ("mixture", 8, 9999),
    ("collapse_hard", 10, 500),
    ("collapse", 20, 500),
)
"""(shape, k, B) of the guard's walk rows: k = 8, B = 9,999 as a family of template
perturbations runs (issue 49), and the collapse probe's B = 500."""
WALK_AUDITS = 12
"""Audits per cell of the guard's walk rows (a third with --quick)."""
FAMILY = 500
"""Perturbations of the family whose intervals the walk rows project."""
ALPHA = 0.05
NEW_TYPE_SHARES = {"null": 0.0, "new type 20%": 0.2, "new type 40%": 0.4, "new type 50%": 0.5}
"""Perturbed arm: the original mixture with this share moved to a fifth answer type."""


@dataclass(frozen=True)
class Config:
    """Sizes of one run."""

    literal_b: int
    """B of the literal runs (their time is scaled to B=1000; agreement uses this B)."""
    repeats: int
    """Timed literal and engine calls per dataset, interleaved."""
    large_repeats: int
    """Timed B=10,000 calls per omega."""


FULL = Config(literal_b=B, repeats=7, large_repeats=7)
QUICK = Config(literal_b=200, repeats=3, large_repeats=3)


@dataclass(frozen=True)
class Dataset:
    """A named pair of arms: ``a`` original, ``b`` perturbed."""

    name: str
    a: Matrix
    b: Matrix


def datasets() -> list[Dataset]:
    """One original arm (same draw for every dataset) against perturbed arms of growing effect."""
    out = []
    for name, share in NEW_TYPE_SHARES.items():
        rng = np.random.default_rng(DATA_SEED)
        space = answer_space(rng, d=D)
        perturbed = Arm(weights=(*(w * (1 - share) for w in ORIGINAL.weights), share))
        a = sample(rng, space, ORIGINAL, K)
        out.append(Dataset(name, a, sample(rng, space, perturbed, K)))
    return out


def seconds(fn: Callable[[], object]) -> float:
    """Wall time of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def literal(data: Dataset, n_permutations: int, seed: int) -> tuple[float, float, Vector]:
    """(T_obs, p, null) of the literal Algorithm 1 (jsd, 30 bins, pooled edges)."""
    return algorithm1(data.a, data.b, n_permutations, np.random.default_rng(seed))


def engine(
    data: Dataset, n_permutations: int, seed: int, omega: str = "jsd"
) -> dbpa.PermutationTestResult:
    """The public entry point on the embeddings, as an audit calls it."""
    return dbpa.permutation_test(
        data.a, data.b, omega=omega, n_permutations=n_permutations, rng=seed
    )


def warm_up(data: Dataset) -> None:
    """First calls pay BLAS thread start-up and imports; keep them out of the timings."""
    literal(data, 20, seed=1)
    for omega in OMEGAS:
        engine(data, 200, seed=1, omega=omega)


def timing_row(data: Dataset, cfg: Config, seed: int) -> list[object]:
    """Literal and engine seconds at B=1000, interleaved so both see the same machine load."""
    t_literal, t_engine = [], []
    scale = B / cfg.literal_b
    for r in range(cfg.repeats):
        t_literal.append(seconds(partial(literal, data, cfg.literal_b, seed + r)) * scale)
        t_engine.append(seconds(partial(engine, data, B, seed + r)))
    lit, eng = float(np.median(t_literal)), float(np.median(t_engine))
    ratio, best = lit / eng, min(t_literal) / min(t_engine)
    verdict = "pass" if ratio >= TARGET_SPEEDUP else "FAIL"
    return [data.name, lit, eng, f"{ratio:.1f}x", f"{best:.1f}x", verdict]


def marginal_line(data: Dataset, cfg: Config, literal_seconds: float) -> str:
    """Split the engine's time into a fixed per-call cost and a cost per permutation."""
    t_small, t_full = [], []
    for r in range(cfg.repeats):
        t_small.append(seconds(partial(engine, data, B_SMALL, r)))
        t_full.append(seconds(partial(engine, data, B, r)))
    fixed = float(np.median(t_small))
    per_perm = (float(np.median(t_full)) - fixed) / (B - B_SMALL)
    return (
        f"engine fixed cost per call (B={B_SMALL}) {fixed * 1e3:.2f} ms, then "
        f"{per_perm * 1e6:.1f} us per permutation; literal {literal_seconds / B * 1e3:.3f} ms "
        f"per permutation: {literal_seconds / B / per_perm:.0f}x per permutation"
    )


def agreement_row(data: Dataset, n_permutations: int, seed: int) -> tuple[list[object], float]:
    """p, T_obs and null mean of literal vs engine at the same B, independent seeds."""
    t_lit, p_lit, null_lit = literal(data, n_permutations, seed)
    res = engine(data, n_permutations, seed + 1)
    p_bar = 0.5 * (p_lit + res.p_value)
    se_p = math.sqrt(p_bar * (1 - p_bar) * 2 / n_permutations)
    diff = res.p_value - p_lit
    flag = "ok" if abs(diff) <= FLAG_SE * se_p else "FLAG"
    se_mean = math.sqrt((null_lit.var(ddof=1) + res.null_std**2) / n_permutations)
    mean_z = (res.null_mean - float(null_lit.mean())) / se_mean
    t_diff = abs(res.statistic - t_lit)
    row: list[object] = [
        data.name,
        t_lit,
        f"{t_diff:.1e}",
        p_lit,
        res.p_value,
        f"{diff:+.4f}",
        f"{se_p:.4f}",
        flag,
        float(null_lit.mean()),
        res.null_mean,
        f"{mean_z:+.2f}",
    ]
    return row, t_diff


def large_b_rows(data: Dataset, repeats: int) -> list[list[object]]:
    """Median engine seconds at B=10,000 for every omega."""
    rows = []
    for omega in OMEGAS:
        times = [seconds(partial(engine, data, B_LARGE, r, omega)) for r in range(repeats)]
        t = float(np.median(times))
        verdict = ("pass" if t <= TARGET_SECONDS else "FAIL") if omega == "jsd" else "(informative)"
        rows.append([omega, t, f"{t / B_LARGE * 1e6:.1f}", verdict])
    return rows


LITERAL_OMEGAS = ("jsd", "energy")
"""Omegas timed at B=10,000 against the literal Algorithm 1 on the same omega."""


def literal_large_b_rows(data: Dataset, cfg: Config) -> list[list[object]]:
    """Median engine seconds at B=10,000 against the literal Algorithm 1's (timed at
    ``cfg.literal_b`` and scaled to B=10,000), calls interleaved, per omega of
    ``LITERAL_OMEGAS``."""
    rows: list[list[object]] = []
    scale = B_LARGE / cfg.literal_b
    for omega in LITERAL_OMEGAS:
        t_literal, t_engine = [], []
        for r in range(cfg.repeats):
            gen = np.random.default_rng(r)
            run = partial(algorithm1, data.a, data.b, cfg.literal_b, gen, omega=omega)
            t_literal.append(seconds(run) * scale)
            t_engine.append(seconds(partial(engine, data, B_LARGE, r, omega)))
        lit, eng = float(np.median(t_literal)), float(np.median(t_engine))
        verdict = "(informative)"
        if omega == "jsd":
            verdict = "pass" if eng <= TARGET_SECONDS else "FAIL"
        rows.append([omega, eng, lit, f"{lit / eng:.0f}x", verdict])
    return rows


def auto_ratio_line(data: Dataset, repeats: int) -> str:
    """auto vs jsd at B=10,000, calls interleaved so both see the same machine load."""
    t_jsd, t_auto = [], []
    for r in range(repeats):
        t_jsd.append(seconds(partial(engine, data, B_LARGE, r, "jsd")))
        t_auto.append(seconds(partial(engine, data, B_LARGE, r, "auto")))
    jsd, auto = float(np.median(t_jsd)), float(np.median(t_auto))
    verdict = "pass" if auto / jsd <= TARGET_AUTO_RATIO else "FAIL"
    return (
        f"auto / jsd at B={B_LARGE}, k={K}, median of {repeats} interleaved calls: "
        f"{auto:.4f} s / {jsd:.4f} s = {auto / jsd:.2f}x "
        f"(target <= {TARGET_AUTO_RATIO:g}x: {verdict})"
    )


def cpu_seconds(fn: Callable[[], object]) -> float:
    """CPU time of one call (the process's, so other jobs' load counts less)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def interval_rows(calls: int) -> list[list[object]]:
    """Median CPU ms per ``effect_interval`` (energy_l2, the default) and per tilted guard
    alone (from the interval's first grid margin, as the interval evaluates it), per k and B;
    the arms: the original mixture against 20% of a new answer type."""
    rows: list[list[object]] = []
    for k in INTERVAL_KS:
        rng = np.random.default_rng(DATA_SEED)
        space = answer_space(rng, d=D)
        a = sample(rng, space, ORIGINAL, k)
        b = sample(rng, space, Arm(weights=(*(w * 0.8 for w in ORIGINAL.weights), 0.2)), k)
        for n_boot in INTERVAL_BS:
            iv = effect_interval(a, b, n_bootstrap=n_boot, rng=0)
            repeats = max(3, calls * 10 * 500 // (k * n_boot))
            total = [
                cpu_seconds(partial(effect_interval, a, b, n_bootstrap=n_boot, rng=r))
                for r in range(repeats)
            ]
            start = float(iv.boundary.guard.margins[0])
            with blas_for(2 * k):  # as effect_interval runs it
                guard = [
                    cpu_seconds(
                        partial(
                            tilted_steps, iv.distances, k, start, n_boot, np.random.default_rng(r)
                        )
                    )
                    for r in range(repeats)
                ]
            t_total, t_guard = float(np.median(total)), float(np.median(guard))
            rows.append(
                [
                    k,
                    n_boot,
                    repeats,
                    iv.boundary.guard.margins.size,
                    f"{t_total * 1e3:.1f}",
                    f"{t_guard * 1e3:.1f}",
                    f"{t_guard / t_total:.2f}",
                ]
            )
    return rows


def before_the_guard(a: Matrix, b: Matrix, margin: float, seed: int) -> bool:
    """The interval (both bounds) and the decision at ``margin`` as ``effect_interval`` and
    ``equivalence_p_value`` computed them before the tilted guard (672a7a5): the
    least-favourable test alone, from the same resamples of the same seed."""
    gen = np.random.default_rng(seed)
    distances = merged_ties(l2_distance(pool_arms(a, b)))
    energy_u_statistic(distances, len(a))
    _, draws = _bootstrap(distances, len(a), PROBE_B, gen)
    boundary_lower(_relabelled(distances, len(a), PROBE_B, gen), 0.025)
    boundary_bound(draws, 0.025)
    return boundary_p_value(draws, margin) <= ALPHA


def product(a: Matrix, b: Matrix, margin: float, seed: int) -> tuple[bool, EffectInterval]:
    """The decision at ``margin`` as an audit makes it, and the interval it takes it from."""
    interval = effect_interval(a, b, n_bootstrap=PROBE_B, rng=seed)
    return equivalence_p_value(interval, margin) <= ALPHA, interval


def boundary_points(interval: EffectInterval) -> None:
    """The guard's fixed work, before any resample: the arms, their tilt paths and the
    likeliest boundary point of every grid margin (as ``tilted_steps`` finds them)."""
    assert interval.distances is not None
    start = float(interval.boundary.guard.margins[0])
    _Arms(interval.distances, interval.k_a).likeliest_at(
        [start * GRID_RATIO**g for g in range(GRID_SIZE)]
    )


def collapse_probe_rows(audits: int) -> list[list[object]]:
    """Per shape and k: CPU ms per at-margin audit (interval + decision at the true
    effect), before the guard and now, interleaved audit by audit, and the share of audits
    each showed "equivalent" (a false claim: the effect equals the margin); where the
    guard's cost sits: the grid margins its walk evaluates (``B`` resamples each), and the
    CPU ms of its fixed work (``boundary_points``), timed once more on the audit's
    distances."""
    rows: list[list[object]] = []
    for name in PROBE_SHAPES:
        margin = true_effect(name)
        for k in PROBE_KS:
            rng = np.random.default_rng(k)
            arms = [scenario(name).draw(rng, k) for _ in range(audits)]
            before, now, fixed, walked, shown_before, shown_now = [], [], [], [], 0, 0
            with blas_for(2 * k):  # as effect_interval runs it
                for seed, (a, b) in enumerate(arms):
                    start = time.process_time()
                    shown_before += before_the_guard(a, b, margin, seed)
                    middle = time.process_time()
                    shown, interval = product(a, b, margin, seed)
                    now.append(time.process_time() - middle)
                    before.append(middle - start)
                    shown_now += shown
                    walked.append(interval.boundary.guard.margins.size)
                    fixed.append(cpu_seconds(partial(boundary_points, interval)))
            t_before, t_now = float(np.mean(before)), float(np.mean(now))
            ratio = t_now / t_before
            rows.append(
                [
                    name,
                    k,
                    audits,
                    f"{t_before * 1e3:.1f}",
                    f"{t_now * 1e3:.1f}",
                    f"{ratio:.1f}x",
                    "pass" if ratio <= TARGET_PROBE_RATIO else "FAIL",
                    f"{shown_before / audits:.3f}",
                    f"{shown_now / audits:.3f}",
                    f"{np.mean(walked):.1f}",
                    f"{float(np.mean(fixed)) * 1e3:.1f}",
                ]
            )
    return rows


def guard_walk_rows(audits: int) -> list[list[object]]:
    """Per cell of ``WALK_CELLS``: CPU ms of the tilted guard as main took it until
    2026-12-06 (``benchmarks._plain_walk``, every margin on the walk drawn) and now (with
    ``_first_draws``' look for a walk that surely ends at 1), interleaved on the same
    distances; the share of audits whose steps are 1 at every margin (never shown) and
    shown equivalent at the true effect (a false claim), each way; and the CPU s of a family of
    ``FAMILY`` such intervals, each way (the interval's time now, less the guard's
    difference)."""
    rows: list[list[object]] = []
    for name, k, n_boot in WALK_CELLS:
        rng = np.random.default_rng(k + n_boot)
        margin = true_effect(name)
        t_main: list[float] = []
        t_now: list[float] = []
        t_interval: list[float] = []
        ones, shown = [0, 0], [0, 0]
        for seed in range(audits):
            a, b = scenario(name).draw(rng, k)
            start = time.process_time()
            iv = effect_interval(a, b, n_bootstrap=n_boot, rng=seed)
            t_interval.append(time.process_time() - start)
            first = float(iv.boundary.guard.margins[0])
            assert iv.distances is not None
            with blas_for(2 * k):  # as effect_interval runs it
                for i, walk in enumerate((plain_tilted_steps, tilted_steps)):
                    start = time.process_time()
                    steps = walk(iv.distances, k, first, n_boot, np.random.default_rng(seed))
                    (t_main, t_now)[i].append(time.process_time() - start)
                    ones[i] += bool(steps.p_values[-1] >= 1.0)  # the least of the steps
                    if margin > 0.0:  # no margin at 0: a null shape's cells show none
                        decided = replace(iv.boundary, guard=steps)
                        shown[i] += boundary_p_value(decided, margin) <= ALPHA
        main_ms, now_ms = float(np.mean(t_main)) * 1e3, float(np.mean(t_now)) * 1e3
        interval_ms = float(np.mean(t_interval)) * 1e3
        rows.append(
            [
                name,
                k,
                n_boot,
                audits,
                f"{main_ms:.1f}",
                f"{now_ms:.1f}",
                f"{now_ms / main_ms:.2f}",
                f"{ones[0] / audits:.2f} / {ones[1] / audits:.2f}",
                f"{shown[0] / audits:.2f} / {shown[1] / audits:.2f}" if margin > 0.0 else "-",
                f"{FAMILY * (interval_ms - now_ms + main_ms) / 1e3:.0f} / "
                f"{FAMILY * interval_ms / 1e3:.0f}",
            ]
        )
    return rows


def main(quick: bool = False) -> None:
    result_file = ResultFile("stats", quick)
    cfg = QUICK if quick else FULL
    data = datasets()
    lo, hi = cosine_range(np.vstack([data[0].a, data[0].b]))
    print(
        f"\nbench_stats: k={K} per arm, d={D}, cosines (1st-99th pct) in [{lo:.2f}, {hi:.2f}]; "
        f"{os.cpu_count()} cores, load average before the run {os.getloadavg()[0]:.2f}"
    )
    warm_up(data[0])
    scaled = ""
    if cfg.literal_b != B:
        scaled = f" (literal timed at B={cfg.literal_b}, scaled x{B / cfg.literal_b:g})"
    timings = [timing_row(d, cfg, seed=1000 * i) for i, d in enumerate(data)]
    result_file.table(
        f"Literal Algorithm 1 vs engine (jsd, 30 bins, pooled edges), B={B}, "
        f"median of {cfg.repeats} interleaved calls{scaled}",
        ["dataset", "literal s", "engine s", "speedup", "best-of", f">= {TARGET_SPEEDUP:g}x"],
        timings,
    )
    result_file.note(marginal_line(data[0], cfg, float(np.median([row[1] for row in timings]))))
    results = [agreement_row(d, cfg.literal_b, seed=7 + 1000 * i) for i, d in enumerate(data)]
    result_file.table(
        f"Agreement at B={cfg.literal_b}, independent seeds (SE = sqrt(p(1-p) 2/B); "
        f"null-mean diff in SE units)",
        [
            "dataset",
            "T_obs",
            "|dT|",
            "p literal",
            "p engine",
            "diff",
            "SE",
            f"<= {FLAG_SE:g} SE",
            "null mean lit",
            "null mean eng",
            "diff/SE",
        ],
        [row for row, _ in results],
    )
    worst = max(t for _, t in results)
    verdict = "pass" if worst <= STATISTIC_TOL else "FAIL"
    result_file.note(
        f"max |T_obs literal - T_obs engine| = {worst:.1e} (target <= {STATISTIC_TOL:g}: {verdict})"
    )
    result_file.table(
        f"Engine at B={B_LARGE}, k={K} "
        f"(median of {cfg.large_repeats}; target <= {TARGET_SECONDS} s for jsd)",
        ["omega", "seconds", "us/perm", "target"],
        large_b_rows(data[2], cfg.large_repeats),
    )
    scaled = f" (literal timed at B={cfg.literal_b}, scaled x{B_LARGE / cfg.literal_b:g})"
    result_file.table(
        f"The default omega (jsd) and energy at B={B_LARGE}, k={K}: engine against the literal "
        f"Algorithm 1 on the same omega, median of {cfg.repeats} interleaved calls{scaled}",
        ["omega", "engine s", "literal s", "speedup", f"<= {TARGET_SECONDS} s"],
        literal_large_b_rows(data[2], cfg),
    )
    result_file.note(auto_ratio_line(data[2], cfg.large_repeats))
    result_file.table(
        "effect_interval (energy_l2), CPU ms per call, median; guard: tilted_steps alone",
        ["k", "B", "calls", "grid margins", "interval ms", "guard ms", "guard share"],
        interval_rows(INTERVAL_CALLS // 10 if quick else INTERVAL_CALLS),
    )
    result_file.table(
        f"Collapse probe: at-margin equivalence audits (B={PROBE_B}), CPU ms per audit "
        f"(interval + decision), mean; before: the least-favourable test alone (672a7a5)",
        [
            "shape",
            "k",
            "audits",
            "before ms",
            "now ms",
            "ratio",
            f"<= {TARGET_PROBE_RATIO:g}x",
            "shown before",
            "shown now",
            "margins walked",
            "points ms",
        ],
        collapse_probe_rows(PROBE_AUDITS // 10 if quick else PROBE_AUDITS),
    )
    result_file.table(
        "The tilted guard: main's walk (until 2026-12-06) against now, CPU ms per interval's "
        "guard, mean, interleaved on the same distances; decisions each way (main / now)",
        [
            "shape",
            "k",
            "B",
            "audits",
            "main's walk ms",
            "now ms",
            "ratio",
            "all 1",
            "shown at the true effect",
            f"{FAMILY} intervals CPU s",
        ],
        guard_walk_rows(WALK_AUDITS // 3 if quick else WALK_AUDITS),
    )
    result_file.write()
