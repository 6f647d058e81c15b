"""Answers that repeat exactly, as a model at temperature 0 gives them: embeddings with the
generic coordinates of a sentence embedder (384 dimensions, so the conformal processes
project them), not the small integer vectors of the other monitor tests, whose arithmetic is
exact. Every conformal p-value stays uniform and no process's evidence grows where every
answer is the same, and where a tenth of them are 1e-7 off (the same text embedded in
another batch): equal outputs are one entry of the bag (``dbpa.stats._bag``), so their
statistics tie exactly whatever rounding their rows would have had. Until 2026-12-08 the
novelty process's p-values of one repeated answer fell below 0.01 six times as often as they
should, and the default monitor alarmed in a quarter of such arms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kstest

from dbpa.stats import DriftMonitor
from dbpa.stats._conformal import ConformalMartingale, ConformalStep
from dbpa.stats._tick_conformal import TickConformalMartingale

DIMENSION = 384
RUNS = 12
TICKS = 150
K = 5
JITTERED = 0.1
"""Share of the outputs 1e-7 off their answer in the jittered shapes."""
RARE = 0.05
"""Share of the second answer in the shape with a rare one."""
SHAPES = ("one answer", "jittered", "a rare second answer")
PROCESSES = {
    "per output": lambda rng: ConformalMartingale(rng),
    "shares": lambda rng: TickConformalMartingale(rng, 1, "shares"),
    "shares, blocks of 2": lambda rng: TickConformalMartingale(rng, 2, "shares"),
    "novelty": lambda rng: TickConformalMartingale(rng, 1, "novelty"),
}


def repeated(rng: np.random.Generator, shape: str):
    """A draw of ``n`` outputs of one answer: all equal, or a share ``JITTERED`` 1e-7 off;
    or of two answers, the second in a share ``RARE``, a share ``JITTERED`` of them 1e-7 off
    (float32 embeddings, as the record keeps them)."""
    answer = rng.normal(size=DIMENSION)
    answer /= np.linalg.norm(answer)
    second = rng.normal(size=DIMENSION) if shape == SHAPES[2] else None
    if second is not None:
        second /= np.linalg.norm(second)

    def draw(n: int) -> np.ndarray:
        x = np.repeat(answer[None, :], n, axis=0)
        if second is not None:
            x[rng.random(n) < RARE] = second
        if shape != SHAPES[0]:
            off = rng.random(n) < JITTERED
            x[off] += 1e-7 * rng.normal(size=(int(off.sum()), DIMENSION))
        return x.astype(np.float32).astype(np.float64)

    return draw


def p_values(process, reference, ticks) -> tuple[list[float], float]:
    """The process's p-values over ``ticks`` and its largest log martingale."""
    p, top = [], -math.inf
    for tick in ticks:
        step = process.update(reference, tick)
        p.extend(step.p_values if isinstance(step, ConformalStep) else (step.p_value,))
        top = max(top, step.log_martingale)
    return [v for v in p if not math.isnan(v)], top


@pytest.mark.parametrize("process", PROCESSES)
@pytest.mark.parametrize("shape", SHAPES)
def test_conformal_p_values_stay_uniform_where_answers_repeat_exactly(shape, process):
    """12 runs of 150 ticks (k = 5): a KS test of U(0, 1) at 0.001 over the p-values, and no
    run's martingale ever reaches 10^4 (Ville: any of 12 does with probability at most
    0.0012). A rare second answer is new when it first comes, and its ties are between
    entries as well as within them."""
    seed = 60 + 10 * SHAPES.index(shape) + list(PROCESSES).index(process)
    rng = np.random.default_rng(seed)
    p, tops = [], []
    for _ in range(RUNS):
        draw = repeated(rng, shape)
        reference = draw(10)
        run_p, top = p_values(PROCESSES[process](rng), reference, [draw(K) for _ in range(TICKS)])
        p.extend(run_p)
        tops.append(top)
    assert kstest(p, "uniform").pvalue > 0.001
    assert max(tops) < math.log(1e4)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES[:2])
def test_no_process_of_the_default_monitor_gains_over_500_ticks_of_one_answer(shape):
    """10 arms whose every answer is the same (or a tenth of them 1e-7 off), 500 ticks each:
    none of the default monitor's five test martingales ever reaches 10^5 in any arm
    (Ville: any of the 50 does with probability at most 0.0005). Before 2026-12-08 the
    novelty process's did, and the monitor alarmed at alpha = 0.05 in 5 of 20 arms of one
    answer within 100 ticks."""
    top = -math.inf
    for seed in range(10):
        rng = np.random.default_rng([seed, shape == "jittered"])
        draw = repeated(rng, shape)
        monitor = DriftMonitor(0.05, rng=rng)
        reference = draw(5)
        for _ in range(500):
            top = max(top, *monitor.update(reference, draw(K)).log_martingales)
    assert top < math.log(1e5)
