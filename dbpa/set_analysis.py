"""A perturbation over a set of prompts: its pooled test, and the decisions over the family.

The pooled test (``dbpa.stats.prompt_set_test``, stratified within prompts) gives the
perturbation's p-value and each prompt's own p-value from the same permutations; the
family's correction selects the perturbations whose pooled test rejected, and inside each
the prompts that moved are those the drill-down (``dbpa.stats.prompt_drilldown``,
Benjamini and Bogomolov's selective procedure) rejects. With a margin, a perturbation is
equivalent when its mean effect over the prompts is shown below it
(``dbpa.stats.set_equivalence``); a calibrated margin is on the scale of that mean
(``family_set_margin``: ``dbpa.stats.calibrate_set_margin``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dbpa.analysis import (
    INTERVAL_OMEGA,
    AnalysisSpec,
    EquivalenceSpec,
    Margin,
    PerturbationTestRecord,
    calibrated_margin,
    family_margin,
)
from dbpa.stats import (
    OMEGAS,
    EffectInterval,
    PromptDrilldown,
    calibrate_set_margin,
    prompt_drilldown,
    prompt_set_test,
    set_equivalence,
    set_equivalence_p_value,
)

SET_COMBINATION = "sum_z+tippett+spread"
"""How a pooled test combines its prompts (measured in benchmarks/README.md)."""
WITHIN = "holm"
"""The correction of a selected perturbation's prompts (at ``R alpha / m``)."""


@dataclass(frozen=True)
class SetPrompt:
    """One prompt of a pooled test, as that test saw it."""

    position: int
    prompt_id: str
    test_id: str
    """The prompt's own two-arm test (with its effect interval)."""
    p_value: float
    """The prompt's permutation p-value, from the pooled test's relabellings."""
    statistic: float
    effect: float
    """Its statistic minus the statistic's mean over the relabellings."""
    z: float | None
    degenerate: bool
    """Every relabelling gave the same statistic: the prompt adds nothing."""


@dataclass(frozen=True)
class SetTestRecord:
    """A stored pooled test: its ``tests`` row and its prompts."""

    test: PerturbationTestRecord
    prompts: tuple[SetPrompt, ...]


def run_set_test(
    set_test_id: str,
    originals: Sequence[NDArray[np.floating]],
    perturbed: Sequence[NDArray[np.floating]],
    *,
    prompt_ids: Sequence[str],
    test_ids: Sequence[str],
    arms: tuple[str, str],
    embedder: str,
    analysis: AnalysisSpec,
) -> SetTestRecord:
    """The pooled test of one perturbation over its prompts, seeded by its id."""
    seed = int(set_test_id[:15], 16)
    similarity = analysis.similarity if OMEGAS[analysis.omega].level != "embedding" else "cosine"
    result = prompt_set_test(
        list(originals),
        list(perturbed),
        omega=analysis.omega,
        similarity=similarity,
        combination=SET_COMBINATION,
        n_permutations=analysis.n_permutations,
        rng=seed,
        **analysis.omega_options,
    )
    null = np.asarray(result.null_distribution, dtype=np.float64)
    mean, std = float(null.mean()), float(null.std())
    record = PerturbationTestRecord(
        test_id=set_test_id,
        original_arm=arms[0],
        perturbed_arm=arms[1],
        embedder=embedder,
        similarity=analysis.similarity,
        omega=analysis.omega,
        omega_options=dict(analysis.omega_options),
        n_permutations=analysis.n_permutations,
        seed=seed,
        statistic=result.statistic,
        p_value=result.p_value,
        null_mean=mean,
        null_std=std,
        effect=result.statistic - mean,
        z=(result.statistic - mean) / std if std > 0 else float("nan"),
        evaluated=result.evaluated,
        exact=result.exact,
        k_a=sum(result.k_a),
        k_b=sum(result.k_b),
        null_distribution=null,
        driver=result.driver,
        components={
            name: {"aspect": c.aspect, "statistic": c.statistic, "p_value": c.p_value}
            for name, c in result.components.items()
        },
        combination=SET_COMBINATION,
        n_prompts=result.n_prompts,
    )
    prompts = tuple(
        SetPrompt(
            position=i,
            prompt_id=prompt_ids[i],
            test_id=test_ids[i],
            p_value=float(result.prompt_p_values[i]),
            statistic=float(result.prompt_statistics[i]),
            effect=float(result.prompt_effects[i]),
            z=None if np.isnan(result.prompt_z[i]) else float(result.prompt_z[i]),
            degenerate=bool(result.degenerate[i]),
        )
        for i in range(result.n_prompts)
    )
    return SetTestRecord(record, prompts)


def family_drilldown(
    prompt_p: Mapping[str, Sequence[float]],
    set_p: Mapping[str, float | None],
    analysis: AnalysisSpec,
) -> tuple[list[str], PromptDrilldown] | None:
    """The drill-down of one family: its perturbations (those with a pooled p-value, in
    order) and which of their prompts moved; None when none was tested."""
    tested = [pid for pid, p in set_p.items() if p is not None and pid in prompt_p]
    if not tested:
        return None
    found = prompt_drilldown(
        [float(set_p[pid]) for pid in tested],  # type: ignore[arg-type]
        [np.asarray(prompt_p[pid], dtype=np.float64) for pid in tested],
        alpha=analysis.alpha,
        selection=analysis.correction,
        within=WITHIN,
    )
    return tested, found


def set_equivalence_p(intervals: Sequence[EffectInterval | None], margin: float | None) -> float:
    """p-value of "the mean effect over the prompts is at least ``margin``"; 1 when a prompt
    has no interval (too few outputs) or, over two or more prompts, no stored distances (a
    record made before they were kept), without a margin, and with a margin of 0
    (calibrated on outputs that never vary: no mean effect is shown below 0). The joint
    guard's resamples are seeded by the intervals' content (``guard_seed``), so deciding
    again from the record gives the same p-value."""
    if not margin or not intervals or any(iv is None for iv in intervals):
        return 1.0
    kept = [iv for iv in intervals if iv is not None]
    if len(kept) > 1 and any(iv.distances is None for iv in kept):
        return 1.0
    return set_equivalence_p_value(kept, margin, rng=guard_seed(kept))


def set_effect_upper(intervals: Sequence[EffectInterval | None], confidence: float) -> float | None:
    """The ``(1 + confidence) / 2`` upper confidence bound of the mean effect over the prompts
    (the side of ``[low, high]`` that a prompt's interval at ``confidence`` has): the
    smallest margin the set-level equivalence test (``set_equivalence``, joint guard
    included, seeded as ``set_equivalence_p``) rejects at ``(1 - confidence) / 2``. None on
    the terms ``set_equivalence_p`` gives 1: a prompt without an interval, or over two or
    more prompts one without its distances."""
    if not intervals or any(iv is None for iv in intervals):
        return None
    kept = [iv for iv in intervals if iv is not None]
    if len(kept) > 1 and any(iv.distances is None for iv in kept):
        return None
    # The margin is any positive number: only the bound, which does not depend on it, is read.
    tested = set_equivalence(kept, 1.0, alpha=(1 - confidence) / 2, rng=guard_seed(kept))
    return tested.upper


def guard_seed(intervals: Sequence[EffectInterval]) -> int:
    """A seed from what the set-level test reads of each prompt's interval (its distances
    and observed distance): the same prompts' outputs, the same resamples."""
    digest = hashlib.sha256()
    for iv in intervals:
        digest.update(np.float64(iv.boundary.plug_in).tobytes())
        if iv.distances is not None:
            digest.update(np.ascontiguousarray(iv.distances).tobytes())
    return int.from_bytes(digest.digest()[:8], "big")


def family_set_margin(
    spec: EquivalenceSpec, prompts: Sequence[Sequence[tuple[NDArray[Any], NDArray[Any]]]]
) -> Margin:
    """The margin of one family over a set of prompts: ``spec.margin`` if a number, else
    calibrated on ``prompts`` (per prompt, the same pairs of arms: two samples of its
    unperturbed model, or its original and a control): the ``quantile`` of each pair's mean
    distance over the prompts, times ``multiple``; None when there is no pair."""
    if not isinstance(spec.margin, str) or not prompts or not prompts[0]:
        return family_margin(spec, [])
    return calibrated_margin(
        spec, calibrate_set_margin(prompts, omega=INTERVAL_OMEGA, quantile=spec.quantile)
    )
