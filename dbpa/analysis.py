"""From stored embeddings to decisions: one test per perturbation, one correction per family."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from dbpa.specs import Spec, content_hash
from dbpa.stats import (
    CORRECTIONS,
    INTERVAL_MIN_ROWS,
    OMEGAS,
    SIMILARITIES,
    EffectInterval,
    MarginCalibration,
    SequentialDesign,
    calibrate_margin,
    correct,
    effect_interval,
    equivalence_p_value,
    lone_threshold,
    loosest_threshold,
    permutation_test,
    rejected_together,
    sequential_design,
    tolerance_reach,
)

INTERVAL_OMEGA = "energy_l2"
"""The effect every test's interval is about: the energy distance (Euclidean) between the
two arms' output distributions on the embeddings (``dbpa.stats.effect_interval``)."""
INTERVAL_CONFIDENCE = 0.90
"""Two-sided level of the interval stored with each test: at alpha = 0.05 its upper bound is
the bound of the equivalence test (TOST reads the ``1 - 2 alpha`` interval)."""
MIN_BOOTSTRAP = 1000
"""Fewest bootstrap resamples of an interval (it uses B = n_permutations when larger)."""


@dataclass(frozen=True)
class FamilyBudget:
    """Whether B and k let a family's tests be rejected at all, and what they leave out."""

    error: str | None
    """Why no test of the family can ever be rejected (the config is refused), or None."""
    notes: tuple[str, ...]
    """What B or k allow only in part: a lone change under BH or BY (rejected only with
    others), a change in one aspect alone under a combined omega."""


def family_budget(analysis: AnalysisSpec, m: int, k: int, sequential: bool = False) -> FamilyBudget:
    """Check B and k against a family of ``m`` tests: refuse only what can never reject.

    A permutation p-value is at least 1/(B+1), and at least 1/C(2k, k) over the distinct
    splits. Bonferroni and Holm must pass alpha/m with it; BH and BY reject j tests at that
    floor once j alpha/m (alpha/(m H_m) for BY) reaches it, so a floor above their lone
    threshold still rejects when enough tests reach it (BH over 1,000 tests at B = 999 rejects
    20 or more at p = 0.001): that is accepted with a note. A sequential audit stops each test
    at the lone threshold, which its floor must pass. A combined omega (``auto``) reaches its
    floor only when every component does: a change in one aspect alone ties with the other
    component's extremes, about 2/(B+1), so a lone one of those needs B >= 2/t - 1."""
    method, alpha = analysis.correction, analysis.alpha
    lone = lone_threshold(m, alpha, method)
    loosest = lone if sequential else loosest_threshold(m, alpha, method)
    family = f"a family of {m} with {method} at alpha={alpha}"
    splits = math.comb(2 * k, k)
    if 1.0 / splits > loosest * (1 + 1e-12):
        enough = next(j for j in range(k, 10_000) if 1.0 / math.comb(2 * j, j) <= loosest)
        return FamilyBudget(
            f"k: with {k} outputs per arm there are only {splits} distinct splits, so no "
            f"p-value can pass {method} over {m} tests at alpha={alpha}; use k >= {enough}",
            (),
        )
    b = analysis.n_permutations
    if 1.0 / (b + 1) > loosest * (1 + 1e-12):
        return FamilyBudget(
            f"n_permutations: {b} permutations cannot reject anything in {family} (the "
            f"smallest p-value is 1/(B+1)); use at least {_permutations_for(loosest)}",
            (),
        )
    notes = []
    together = rejected_together(1.0 / (b + 1), m, alpha, method)
    if not sequential and together is not None and together > 1:
        notes.append(
            f"n_permutations: at B={b} the smallest p-value 1/(B+1) = {1 / (b + 1):.3g} passes "
            f"{method} over {m} tests only when at least {together} tests reach it; a lone "
            f"change needs B >= {_permutations_for(lone)}"
        )
    if OMEGAS[analysis.omega].level == "combined":
        one_aspect = _permutations_for(lone / 2.0)
        if b < one_aspect:
            notes.append(
                f"n_permutations: omega {analysis.omega} reaches p = 1/(B+1) only when all its "
                f"components do; a change in one aspect alone gets about 2/(B+1) = "
                f"{2 / (b + 1):.3g}, above the {lone:.3g} a lone change must pass in {family}; "
                f"use B >= {one_aspect}"
            )
    return FamilyBudget(None, tuple(notes))


def _permutations_for(threshold: float) -> int:
    """Smallest B with 1/(B+1) <= threshold."""
    return max(1, math.ceil(1.0 / threshold - 1.0 - 1e-9))


class AnalysisSpec(Spec):
    """How outputs are compared and decided; changing it re-uses every sample and embedding."""

    similarity: str = "cosine"
    """cosine, neg_l1 or neg_l2: the pairwise similarity behind P0 and P1."""
    omega: str = "auto"
    """Discrepancy (see ``dbpa.stats.OMEGAS``). ``auto`` (the default) combines a P0-vs-P1
    statistic and an energy distance on the embeddings in one calibrated test; the paper's
    statistic is ``jsd``."""
    omega_options: dict[str, Any] = Field(default_factory=dict)
    """Options of the discrepancy, e.g. ``{bins: 30}`` for jsd."""
    n_permutations: int = Field(default=2000, ge=1)
    """B, permutations per test."""
    alpha: float = Field(default=0.05, gt=0, lt=1)
    """The level: the family's error rate under its correction."""
    correction: str = "holm"
    """Multiplicity correction per family: bonferroni, holm, bh or by."""

    @model_validator(mode="after")
    def _known_names(self) -> AnalysisSpec:
        known: list[tuple[str, str, Collection[str]]] = [
            ("similarity", self.similarity, SIMILARITIES),
            ("omega", self.omega, OMEGAS),
            ("correction", self.correction, CORRECTIONS),
        ]
        for name, value, registry in known:
            if value not in registry:
                raise ValueError(f"{name}: unknown {value!r}; choose one of {', '.join(registry)}")
        spec = OMEGAS[self.omega]
        spec.resolve_options(self.omega_options)
        if spec.level == "embedding" and self.similarity != "cosine":
            raise ValueError(
                f"similarity: omega {self.omega!r} uses its own distance ({spec.matrix})"
            )
        return self


class EquivalenceSpec(Spec):
    """When a perturbation counts as *equivalent*: its effect is shown to be below a margin.

    ``margin`` is a number on the interval's scale (the energy distance of ``INTERVAL_OMEGA``
    between the arms' output distributions), or is calibrated per family from the audit
    itself: ``replicates`` (the default) samples the original prompt again in
    ``replicates`` more arms under other seeds, and the margin is the ``quantile`` of the
    energy distances between every two of these samples of the unperturbed model (original
    included); ``controls`` takes the same quantile over the distances between the original
    and each perturbation labelled ``control``. A calibrated margin is ``multiple`` times that
    quantile, as reference-scaled bioequivalence scales its limit by the reference's own
    variability.
    """

    margin: float | Literal["replicates", "controls"] = "replicates"
    """A positive number, ``replicates`` or ``controls``."""
    replicates: int = Field(default=3, ge=1, le=20)
    """Replicate arms of each original (``margin: replicates``): 3 give 6 pairs of samples."""
    quantile: float = Field(default=0.95, gt=0, lt=1)
    """Which quantile of the calibration distances is the margin."""
    multiple: float = Field(default=1.0, gt=0, le=100)
    """A calibrated margin is this multiple of the quantile: 1 claims "no farther apart than
    two samples of the model itself", 2 "within twice that"."""

    @field_validator("margin", mode="before")
    @classmethod
    def _margin(cls, value: Any) -> Any:
        if value in ("replicates", "controls"):
            return value
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if number is None or not (math.isfinite(number) and number > 0):
            raise ValueError(f"must be a positive number, replicates or controls; got {value!r}")
        return float(number)

    @model_validator(mode="after")
    def _multiple_of_a_calibration(self) -> EquivalenceSpec:
        if not isinstance(self.margin, str) and self.multiple != 1.0:
            raise ValueError(
                f"multiple: scales a calibrated margin (replicates or controls); with a number "
                f"as the margin give the number itself ({self.multiple:g} x {self.margin:g})"
            )
        return self

    @property
    def replicate_arms(self) -> int:
        """Replicate arms each family samples (0 unless the margin is calibrated on them)."""
        return self.replicates if self.margin == "replicates" else 0


class SequentialSpec(Spec):
    """A sequential audit: arms are sampled in rounds up to ``k`` outputs (the config's k is
    the maximum), every open test is looked at after each round, and a test stops once its
    answer is clear (``dbpa.stats.sequential_design``: alpha spent over the looks on the
    joint permutation distribution of each test's looks, ``dbpa.stats.group_sequential_stop``,
    so the family's error rate holds under the stopping)."""

    first: int = Field(default=8, ge=2)
    """Outputs per arm at the first look (at most k: a smaller k is a single look)."""
    looks: int = Field(default=4, ge=1, le=50)
    """Looks, evenly spaced from ``first`` to k (the last at k)."""
    final_weight: float = Field(default=0.7, gt=0, le=1)
    """Share of alpha kept for the last look; the interim looks share the rest equally."""
    futility: float | None = Field(default=0.2, gt=0, lt=1)
    """Stop a test at an interim look whose p-value exceeds this (``false``: never). Not
    with an equivalence margin: a test that cannot become changed may still become
    equivalent, and that takes its outputs."""

    @field_validator("futility", mode="before")
    @classmethod
    def _no_futility(cls, value: Any) -> Any:
        return None if value is False else value

    def design(self, k: int, *, equivalence: bool = False) -> SequentialDesign:
        """The looks and weights of an audit with at most ``k`` outputs per arm (no futility
        stops when it has an ``equivalence`` margin)."""
        return sequential_design(
            k,
            first=min(self.first, k),
            n_looks=self.looks,
            final_weight=self.final_weight,
            futility=None if equivalence else self.futility,
        )


class MonitorSpec(Spec):
    """The drift monitor of the audit's ticks (``dbpa drift``, the ``dbpa-monitor`` flow and
    every scheduled tick; ``dbpa.stats.DriftMonitor``)."""

    conformal: Literal["outputs", "ticks", "both"] = "both"
    """The conformal processes beside the betting one: ``outputs`` one p-value per output
    (new kinds of answer), ``ticks`` one per tick (and per pair of ticks) against every
    earlier output (sees the shares of familiar answers move), ``both`` the per-output one, a
    tick process on new kinds of answer (quicker than ``outputs`` after a short history) and
    the ``ticks`` ones, sharing the alarm line by weights (docs/explanation/drift.md). Every
    replay uses the latest tick's setting for all ticks."""
    pool: Literal["prompts", "arms"] = "prompts"
    """How the arms share the alarm line: ``prompts`` pools the evidence of every prompt's arm
    of one perturbation (or the original) and model over a set of prompts (the product of
    their monitors' processes, ``dbpa.stats.pool_evidence``), e-Bonferroni over the pools
    only; ``arms`` monitors each arm alone, e-Bonferroni over every arm. The same for a
    single prompt. Every replay uses the latest tick's setting for all ticks."""
    tolerance: float = Field(default=0.0, ge=0.0, lt=1.0, allow_inf_nan=False)
    """Alarm only for changes larger than this share of answers (total variation; 0: any
    change). Only the betting process runs then, and a change present from the first tick
    is found only with enough baseline outputs (``dbpa.stats.tolerance_reach``; ``dbpa
    validate`` says when the audit's k is too small). ``dbpa drift --tolerance`` overrides
    it for one replay."""

    @model_serializer(mode="wrap")
    def _dump_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without ``pool`` and ``tolerance`` at their defaults: configs dump, and hash, as
        they did before they existed."""
        data: dict[str, Any] = handler(self)
        if data.get("pool") == "prompts":
            del data["pool"]
        if data.get("tolerance") == 0.0:
            del data["tolerance"]
        return data


def monitor_notes(
    spec: MonitorSpec, alpha: float, series: int, k: int, prompts: int
) -> tuple[str, ...]:
    """What ``monitor.tolerance`` allows at this k: a change present from the first tick is
    bet against the baseline's outputs alone, and the monitor alarms on it only with at
    least ``tolerance_reach`` of them per series (each of ``series`` at ``alpha / series``;
    a series pools ``prompts`` arms of k outputs each under ``pool: prompts``)."""
    if spec.tolerance == 0.0:
        return ()
    level = alpha / series
    needed = tolerance_reach(spec.tolerance, level)
    pooled = prompts if spec.pool == "prompts" else 1
    if k * pooled >= needed:
        return ()
    have = f"k={k}" if pooled == 1 else f"k={k} x {pooled} prompts = {k * pooled}"
    least = math.ceil(math.log(level) / math.log(1.0 - spec.tolerance) - 1e-9)
    return (
        f"monitor.tolerance: at {spec.tolerance:g} a change present from the first tick can "
        f"alarm only against at least {needed} baseline outputs per series (each of {series} "
        f"series at alpha/{series}; no test can with fewer than {least} for a change of twice "
        f"the tolerance), and a series has {have}: such a change is found only once quiet "
        f"ticks have been put aside as baseline. k >= {math.ceil(needed / pooled)} is the "
        "least that can; the monitor needs more while it learns (docs/explanation/drift.md)",
    )


def derive_test_id(
    original_arm: str,
    perturbed_arm: str,
    embedder: str,
    analysis: AnalysisSpec,
    seed: int,
    k: int,
) -> str:
    """Content id of a test: the arms, k, the embedder and every setting that changes it."""
    return content_hash(
        "test",
        original_arm,
        perturbed_arm,
        k,
        embedder,
        analysis.similarity,
        analysis.omega,
        analysis.omega_options,
        analysis.n_permutations,
        seed,
    )


@dataclass(frozen=True)
class PerturbationTestRecord:
    """One stored permutation test of a perturbed arm against its original arm."""

    test_id: str
    original_arm: str
    perturbed_arm: str
    embedder: str
    similarity: str
    omega: str
    omega_options: Mapping[str, Any]
    n_permutations: int
    """B as asked; ``evaluated`` is the number of splits actually evaluated (fewer when exact)."""
    seed: int
    statistic: float
    p_value: float
    null_mean: float
    null_std: float
    effect: float
    z: float
    evaluated: int
    exact: bool
    k_a: int
    k_b: int
    null_distribution: NDArray[np.float64] = field(repr=False)
    driver: str | None = None
    """A combined omega (``auto``): the component with the smallest p-value, the first hint
    of what changed; None for a single omega."""
    components: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """A combined omega: per component, its aspect, statistic, own p-value and effect."""
    interval: EffectInterval | None = field(default=None, repr=False)
    """The effect's ``INTERVAL_CONFIDENCE`` interval (``INTERVAL_OMEGA``); None when an arm
    has fewer outputs than the bootstrap needs."""
    combination: str | None = None
    """The pooled test of a set of prompts: how its prompts were combined; None otherwise."""
    n_prompts: int | None = None
    """The pooled test of a set of prompts: how many (its arms are then the first prompt's,
    ``k_a`` and ``k_b`` the outputs over every prompt)."""


def run_test(
    test_id: str,
    original: NDArray[np.floating[Any]],
    perturbed: NDArray[np.floating[Any]],
    *,
    original_arm: str,
    perturbed_arm: str,
    embedder: str,
    analysis: AnalysisSpec,
) -> PerturbationTestRecord:
    """The permutation test of one perturbation, seeded by its test id (so it is reproducible)."""
    seed = int(test_id[:15], 16)
    interval = interval_of_test(test_id, original, perturbed, analysis)
    result = permutation_test(
        original,
        perturbed,
        similarity=analysis.similarity if OMEGAS[analysis.omega].level != "embedding" else "cosine",
        omega=analysis.omega,
        n_permutations=analysis.n_permutations,
        rng=seed,
        **analysis.omega_options,
    )
    return PerturbationTestRecord(
        test_id=test_id,
        original_arm=original_arm,
        perturbed_arm=perturbed_arm,
        embedder=embedder,
        similarity=analysis.similarity,
        omega=analysis.omega,
        omega_options=dict(result.options),
        n_permutations=analysis.n_permutations,
        seed=seed,
        statistic=result.statistic,
        p_value=result.p_value,
        null_mean=result.null_mean,
        null_std=result.null_std,
        effect=result.effect,
        z=result.z,
        evaluated=result.evaluated,
        exact=result.exact,
        k_a=result.k_a,
        k_b=result.k_b,
        null_distribution=np.asarray(result.null_distribution),
        driver=result.driver,
        components={
            name: {
                "aspect": c.aspect,
                "statistic": c.statistic,
                "p_value": c.p_value,
                "effect": c.effect,
            }
            for name, c in result.components.items()
        },
        interval=interval,
    )


def interval_of_test(
    test_id: str,
    original: NDArray[np.floating[Any]],
    perturbed: NDArray[np.floating[Any]],
    analysis: AnalysisSpec,
) -> EffectInterval | None:
    """The effect interval of a test, seeded by its id; None when an arm has fewer than
    ``INTERVAL_MIN_ROWS`` outputs."""
    if min(len(original), len(perturbed)) < INTERVAL_MIN_ROWS:
        return None
    return effect_interval(
        original,
        perturbed,
        omega=INTERVAL_OMEGA,
        confidence=INTERVAL_CONFIDENCE,
        n_bootstrap=max(analysis.n_permutations, MIN_BOOTSTRAP),
        rng=int(content_hash("interval", test_id)[:15], 16),
    )


@dataclass(frozen=True)
class Decision:
    """The corrected outcome of one perturbation within its family."""

    perturbation_id: str
    p_value: float
    """Raw p-value; 1.0 when the test could not run (a model failed), which keeps FWER/FDR valid."""
    adjusted_p: float
    reject: bool
    """The permutation test rejected "no change" (after the correction)."""
    tested: bool
    decision: str | None = None
    """With an equivalence margin: ``changed``, ``equivalent`` or ``inconclusive``
    (``dbpa.stats.decide_family``'s rule); None without one."""
    equivalence_p: float | None = None
    """Raw p-value of "the effect is at least the margin"; 1.0 for a test without an
    interval (untested, or arms below the bootstrap's minimum) or without a margin."""
    adjusted_equivalence_p: float | None = None
    margin: float | None = None


@dataclass(frozen=True)
class Margin:
    """The equivalence margin of one family, and what it was calibrated on."""

    value: float | None
    """On the interval's scale; None when it could not be calibrated (arms missing); 0 when
    calibrated on outputs that never vary (then nothing can be shown equivalent)."""
    source: str
    """``fixed``, ``replicates`` or ``controls``."""
    quantile: float | None = None
    """The calibration quantile (None for a fixed margin)."""
    multiple: float | None = None
    """The margin as a multiple of that quantile (None for a fixed margin)."""
    distances: tuple[float, ...] = ()
    """The calibration distances (energy distance of each pair of samples)."""
    k: int | None = None
    """Outputs per calibration arm."""

    @property
    def pairs(self) -> int:
        """Pairs of samples the margin was calibrated on."""
        return len(self.distances)


ZERO_MARGIN = "0: the outputs it rests on do not vary, so nothing can be shown equivalent"
"""What a calibrated margin of 0 means, for reports and the command line."""


def family_margin(
    spec: EquivalenceSpec, pairs: Sequence[tuple[NDArray[Any], NDArray[Any]]]
) -> Margin:
    """The margin of one family: ``spec.margin`` if a number, else calibrated on ``pairs``
    (two samples of the unperturbed model each, or the original and a control); None
    when there is no pair to calibrate on."""
    if not isinstance(spec.margin, str):
        return Margin(value=float(spec.margin), source="fixed")
    if not pairs:
        return Margin(
            value=None, source=spec.margin, quantile=spec.quantile, multiple=spec.multiple
        )
    return calibrated_margin(
        spec, calibrate_margin(pairs, omega=INTERVAL_OMEGA, quantile=spec.quantile)
    )


def calibrated_margin(spec: EquivalenceSpec, calibration: MarginCalibration) -> Margin:
    """The family margin of a calibration (of one prompt's pairs, or a set's): its margin
    times ``spec.multiple``, with the distances it was read from."""
    return Margin(
        value=spec.multiple * calibration.margin,
        source=str(spec.margin),  # replicates or controls: a number is not calibrated
        quantile=spec.quantile,
        multiple=spec.multiple,
        distances=tuple(float(d) for d in calibration.distances),
        k=min(calibration.k),
    )


def equivalence_p_values(
    intervals: Mapping[str, EffectInterval | None], margin: float | None
) -> dict[str, float]:
    """perturbation id -> p-value of "effect >= margin"; 1.0 without interval or margin, and
    with a margin of 0 (calibrated on outputs that never vary: no distance is shown below 0)."""
    return {
        pid: 1.0 if interval is None or not margin else equivalence_p_value(interval, margin)
        for pid, interval in intervals.items()
    }


def decide_family(
    p_values: Mapping[str, float | None],
    analysis: AnalysisSpec,
    equivalence_p: Mapping[str, float] | None = None,
    margin: float | None = None,
) -> list[Decision]:
    """Correct a family; perturbations without a p-value count as p = 1 (conservative).

    With ``equivalence_p`` (one per perturbation, from ``equivalence_p_values``) both sets
    of p-values are corrected by the same method at the same alpha and every perturbation
    is ``changed``, ``equivalent`` or ``inconclusive`` (``dbpa.stats.decide_family``).
    """
    ids: Sequence[str] = list(p_values)
    raw = np.array([1.0 if p_values[i] is None else float(p_values[i]) for i in ids])  # type: ignore[arg-type]
    result = correct(raw, method=analysis.correction, alpha=analysis.alpha)
    reject = [bool(result.reject[j]) and p_values[pid] is not None for j, pid in enumerate(ids)]
    if equivalence_p is None:
        return [
            Decision(
                pid,
                float(raw[j]),
                float(result.adjusted[j]),
                reject[j],
                tested=p_values[pid] is not None,
            )
            for j, pid in enumerate(ids)
        ]
    raw_equiv = np.array([float(equivalence_p.get(pid, 1.0)) for pid in ids])
    equiv = correct(raw_equiv, method=analysis.correction, alpha=analysis.alpha)
    decisions = []
    for j, pid in enumerate(ids):
        equivalent = bool(equiv.reject[j])
        name = "equivalent" if equivalent else "changed" if reject[j] else "inconclusive"
        decisions.append(
            Decision(
                perturbation_id=pid,
                p_value=float(raw[j]),
                adjusted_p=float(result.adjusted[j]),
                reject=reject[j],
                tested=p_values[pid] is not None,
                decision=name,
                equivalence_p=float(raw_equiv[j]),
                adjusted_equivalence_p=float(equiv.adjusted[j]),
                margin=margin,
            )
        )
    return decisions


def stars(p: float) -> str:
    """The paper's significance stars: * p<0.05, ** p<0.01, *** p<0.001."""
    if math.isnan(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""
