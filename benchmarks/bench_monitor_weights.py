"""How the drift monitor's processes should share its alarm line (weighted e-Bonferroni).

``DriftMonitor(conformal="both")`` runs five processes on every tick: the betting one, the
per-output conformal one, the tick process on novelty (since 2026-12-07; the run on file
predates it and has four) and the tick processes on shares, on blocks of 1 and of 2 ticks.
Each is a test martingale whatever the others do, and none depends on the weights, so one
run gives every weighting: each run records every process's log test martingale per tick
(``MonitorState.log_martingales``) and the product's ``pool_evidence`` applies each row's
weights to the same record (test form at alpha 0.05; detector form, Shiryaev-Roberts, at
1 / 3650), a process with weight 0 left out. The designs are thus compared on the same runs.

Generators and protocol as ``python -m benchmarks monitor`` (``bench_monitor.py``): answer
types as directions in dimension 384, the baseline's shares 0.4 / 0.3 / 0.2 / 0.1, the change
at tick 100 of 140. **Re-weighting**: half of the answers move onto the rarest familiar type
(issue 51's case); its cells give the share of runs that alarmed within 10 ticks of the change
and, in brackets, the median ticks after it. **Moderate / small**: a share 0.4 / 0.25 of the
answers become a new kind; their cells give the median ticks after the change and, in
brackets, the mean difference from the two-process design ``outputs`` over the runs both
found after the change (negative: sooner). **Before** counts alarms before the change (every
run's first 99 ticks, all cells): false alarms, each at most alpha per run by design.

**A short history** (issue 51's held-out case, the monitor benchmark's part 6): the
re-weighting and the moderate change after 20-23 quiet ticks (``SHORT_CHANGES``, in turn)
at k = 5, ``SHORT_RUNS`` runs each, recorded once and weighed by every row, in the forms and
at the alphas of ``SHORT_FORMS``: the share of runs alarmed by the 10th changed tick. It
shows whether another split of the line would reach issue 51's 80% in the test form there
(none does: the processes' evidence, not its split, is short).

The product's default (``BOTH_WEIGHTS``) is marked. Issue 51's goal: re-weighting found
within 10 ticks in at least 80% of runs at k = 5 in both forms, new kinds of answer as fast
as ``outputs``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._results import ResultFile
from benchmarks._synthetic import answer_space, sample
from benchmarks.bench_monitor import (
    BASELINE,
    CHANGE_AT,
    FORMS,
    REWEIGHTED,
    SHORT_CHANGES,
    SHORT_FORMS,
    SIZES,
    D,
    changed,
    worker_pool,
)
from dbpa.stats import DriftMonitor, pool_evidence

ROOT_SEED = 20261206
HORIZON = 140
SHORT_RUNS = 100
"""Runs per change of the short-history table (a quarter with --quick)."""
SHORT_TICKS = 10
"""Changed ticks the short-history table counts an alarm in."""
PROCESSES = ("betting", "per-output", "novelty", "shares block 1", "shares block 2")
DEFAULT = DriftMonitor(blocks=(1, 2)).weights
"""The product's default weights of these five processes (``BOTH_WEIGHTS``)."""
WEIGHTS: dict[str, tuple[float, ...]] = {
    "outputs (two processes)": (0.5, 0.5, 0.0, 0.0, 0.0),
    "both, equal": (0.2, 0.2, 0.2, 0.2, 0.2),
    "both .1/.6/0/.15/.15 (until 2026-12-07)": (0.1, 0.6, 0.0, 0.15, 0.15),
    "both .1/0/.6/.15/.15": (0.1, 0.0, 0.6, 0.15, 0.15),
    "both .1/.3/.3/.15/.15 (default)": DEFAULT,
    "both .1/.2/.4/.15/.15": (0.1, 0.2, 0.4, 0.15, 0.15),
    "both .1/.25/.25/.2/.2": (0.1, 0.25, 0.25, 0.2, 0.2),
    "both 0/.35/.35/.15/.15": (0.0, 0.35, 0.35, 0.15, 0.15),
    "betting alone": (1.0, 0.0, 0.0, 0.0, 0.0),
    "per-output alone": (0.0, 1.0, 0.0, 0.0, 0.0),
    "novelty alone": (0.0, 0.0, 1.0, 0.0, 0.0),
    "shares block 1 alone": (0.0, 0.0, 0.0, 1.0, 0.0),
    "shares block 2 alone": (0.0, 0.0, 0.0, 0.0, 1.0),
}
"""Weights of (betting, per-output, novelty, shares block 1, shares block 2); 0: the process
is off."""


def record(
    seed: np.random.SeedSequence,
    change: str,
    k: int,
    change_at: int = CHANGE_AT,
    horizon: int = HORIZON,
) -> np.ndarray:
    """One run's (horizon, 5) log test martingales of the five processes, the change at
    tick ``change_at``."""
    rng = np.random.default_rng(seed)
    after = REWEIGHTED if change == "re-weight" else changed(SIZES[change])
    space = answer_space(rng, d=D)
    monitor = DriftMonitor(0.05, rng=rng, conformal="both", blocks=(1, 2))
    reference = sample(rng, space, BASELINE, k)
    logs = []
    for tick in range(1, horizon + 1):
        arm = after if tick >= change_at else BASELINE
        logs.append(monitor.update(reference, sample(rng, space, arm, k)).log_martingales)
    return np.asarray(logs)


def _record_task(
    task: tuple[np.random.SeedSequence, str, int]
    | tuple[np.random.SeedSequence, str, int, int, int],
) -> np.ndarray:
    return record(*task)


def delays(
    runs: np.ndarray | list[np.ndarray],
    weights: tuple[float, ...],
    form: str,
    alpha: float | None = None,
    change_at: list[int] | None = None,
) -> list[int | None]:
    """Ticks from the change (each run's of ``change_at``, else ``CHANGE_AT``) to each run's
    alarm at ``alpha`` (None: the form's in ``FORMS``); negative: before it; None: none."""
    on = [i for i, w in enumerate(weights) if w > 0]
    shares = [weights[i] for i in on]
    level = FORMS[form] if alpha is None else alpha
    changes = [CHANGE_AT] * len(runs) if change_at is None else change_at
    found: list[int | None] = []
    for logs, change in zip(runs, changes, strict=True):
        alarm = pool_evidence(logs[:, None, on], level, form=form, weights=shares).alarm_tick
        found.append(None if alarm is None else alarm - change)
    return found


def _after(found: list[int | None]) -> list[int]:
    return [d for d in found if d is not None and d >= 0]


def cell(found: list[int | None], base: list[int | None], change: str) -> str:
    """A table cell (module docstring)."""
    after = _after(found)
    median = f"{np.median(after):g}" if after else "-"
    if change == "re-weight":
        within = sum(d <= 10 for d in after) / len(found)
        return f"{within:.0%} ({median})"
    both = [
        (d, b)
        for d, b in zip(found, base, strict=True)
        if d is not None and d >= 0 and b is not None and b >= 0
    ]
    shift = np.mean([d - b for d, b in both]) if both else float("nan")
    return f"{median} ({shift:+.2f})"


def main(quick: bool = False) -> None:
    """Record every cell's runs in a pool of ``WORKERS`` processes (seeds spawned from
    ``ROOT_SEED`` in a fixed order), then weigh them."""
    runs = {("re-weight", 5): 80, ("re-weight", 10): 40}
    for size in ("moderate", "small"):
        runs |= {(size, 5): 40, (size, 10): 20}
    if quick:
        runs = {key: n // 4 for key, n in runs.items()}
    result_file = ResultFile("monitor_weights", quick)
    seeds = np.random.SeedSequence(ROOT_SEED).spawn(len(runs))
    tasks = [
        (seed, change, k)
        for cell_seed, ((change, k), n) in zip(seeds, runs.items(), strict=True)
        for seed in cell_seed.spawn(n)
    ]
    with worker_pool() as pool:
        recorded = list(pool.map(_record_task, tasks, chunksize=4))
    by_cell: dict[tuple[str, int], list[np.ndarray]] = {}
    for (_, change, k), logs in zip(tasks, recorded, strict=True):
        by_cell.setdefault((change, k), []).append(logs)
    records = {key: np.asarray(value) for key, value in by_cell.items()}
    outputs = WEIGHTS["outputs (two processes)"]
    base = {form: {key: delays(r, outputs, form) for key, r in records.items()} for form in FORMS}
    header = ["weights", "form", *(f"{c} k={k} ({runs[c, k]} runs)" for c, k in runs), "before"]
    rows: list[list[object]] = []
    for name, weights in WEIGHTS.items():
        for form in FORMS:
            found = {key: delays(r, weights, form) for key, r in records.items()}
            before = sum(d is not None and d < 0 for f in found.values() for d in f)
            rows.append(
                [
                    name,
                    form,
                    *(cell(found[key], base[form][key], key[0]) for key in runs),
                    f"{before} of {sum(runs.values())}",
                ]
            )
    result_file.table(
        "weights of (betting, per-output, novelty, shares block 1, shares block 2): "
        "re-weighting, share of runs alarmed within 10 ticks of the change (median ticks); "
        "new kinds of answer, median ticks after the change (mean difference from outputs); "
        "before: runs that alarmed before the change",
        header,
        rows,
    )
    short_table(result_file, quick)
    result_file.write()


def short_table(result_file: ResultFile, quick: bool) -> None:
    """The short-history table (module docstring): ``SHORT_RUNS`` runs per change, the
    change ticks of ``SHORT_CHANGES`` in turn, weighed by every row of ``WEIGHTS``."""
    n = SHORT_RUNS // 4 if quick else SHORT_RUNS
    changes = [SHORT_CHANGES[i % len(SHORT_CHANGES)] for i in range(n)]
    horizon = max(SHORT_CHANGES) + SHORT_TICKS
    seeds = np.random.SeedSequence([ROOT_SEED, 1]).spawn(2)
    kinds = ("re-weight", "moderate")
    tasks = [
        (seed, kind, 5, change, horizon)
        for kind, kind_seed in zip(kinds, seeds, strict=True)
        for seed, change in zip(kind_seed.spawn(n), changes, strict=True)
    ]
    with worker_pool() as pool:
        recorded = list(pool.map(_record_task, tasks, chunksize=4))
    by_kind = {kind: recorded[i * n : (i + 1) * n] for i, kind in enumerate(kinds)}
    cells = [(kind, form, alpha) for kind in kinds for form, alpha in SHORT_FORMS]
    rows: list[list[object]] = []
    for name, weights in WEIGHTS.items():
        found = {
            (kind, form, alpha): delays(by_kind[kind], weights, form, alpha, changes)
            for kind, form, alpha in cells
        }
        before = sum(d is not None and d < 0 for f in found.values() for d in f)
        by_10th = [
            sum(d is not None and 0 <= d < SHORT_TICKS for d in f) / n for f in found.values()
        ]
        rows.append([name, *(f"{share:.2f}" for share in by_10th), before])
    result_file.table(
        f"a short history: the change at tick {SHORT_CHANGES[0]}-{SHORT_CHANGES[-1]} in turn "
        f"(k = 5, {n} runs per change, the same runs weighed by each row): share of runs "
        f"alarmed by the {SHORT_TICKS}th changed tick; before: alarms before the change over "
        "every cell (the detector at 0.05 may alarm once in 20 quiet ticks, and has 20-23)",
        [
            "weights",
            *(f"{kind}, {form} at {alpha:.2g}" for kind, form, alpha in cells),
            "before",
        ],
        rows,
    )
