"""Everything a report shows, as frozen dataclasses (gathered once, rendered many ways)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dbpa.analysis import ZERO_MARGIN, stars
from dbpa.drift import DriftHistory, MonitorHistory
from dbpa.stats import ModelChoice, OperatingPoint, Settling, corrected_level, settling_k

from ._format import p_floor

__all__ = [
    "ALLOWED_FPR",
    "Alignment",
    "ArmView",
    "Family",
    "KindCount",
    "ModelUsage",
    "NullView",
    "Output",
    "ReportData",
    "RocView",
    "RunInfo",
    "Settings",
    "SimilarityView",
    "TestRow",
    "TestView",
    "Usage",
]

ALLOWED_FPR = (0.01, 0.05)
"""False-positive rates at which the TPR and the best model are reported (paper, Fig. 2)."""


@dataclass(frozen=True)
class RunInfo:
    """The run row and where it is recorded."""

    run_id: str
    audit: str
    description: str
    status: str
    message: str | None
    started_at: str | None
    """ISO 8601."""
    finished_at: str | None
    flow_run_id: str | None
    epoch: str
    config_hash: str
    prompt: tuple[tuple[str, str], ...]
    """The original prompt as (role, content) messages."""
    config: Mapping[str, Any]
    """The audit configuration as the run stored it."""
    versions: Mapping[str, str]
    """Package versions of the process that ran the audit."""
    database: str
    database_id: str


@dataclass(frozen=True)
class Settings:
    """The analysis settings of the run (from its stored configuration)."""

    k: int | None
    embedder: str
    """Embedder key, ``backend/model``."""
    similarity: str
    omega: str
    """Name of the discrepancy (e.g. ``jsd``)."""
    omega_options: Mapping[str, Any]
    n_permutations: int | None
    alpha: float | None
    correction: str | None
    seed: int | None


@dataclass(frozen=True)
class EffectBounds:
    """A test's effect: the energy distance between its arms, estimated, with an interval."""

    estimate: float
    """Unbiased estimate (can be slightly negative when there is no effect)."""
    low: float
    high: float
    confidence: float
    """Two-sided level of ``[low, high]``."""


@dataclass(frozen=True)
class EquivalenceView:
    """A decision with an equivalence margin, and what it rests on."""

    decision: str
    """``changed``, ``equivalent`` or ``inconclusive``."""
    p_value: float
    """Raw p-value of "the effect is at least the margin"."""
    adjusted_p: float
    margin: float | None
    """None when the margin could not be calibrated (its arms missing)."""
    source: str
    """``fixed``, ``replicates`` or ``controls``."""
    quantile: float | None
    pairs: int | None
    """Pairs of samples a calibrated margin rests on."""
    multiple: float | None
    """A calibrated margin as a multiple of its quantile (None: fixed, or a record from
    before the option)."""
    alpha: float | None = None
    """The family's level."""
    prompts: int | None = None
    """Over a set of prompts, how many: each calibration distance is the mean over them."""

    @property
    def level(self) -> float | None:
        """The raw level this test's equivalence p-value must reach under the family's
        correction (``alpha * p / adjusted p``: alpha/m for Bonferroni)."""
        if self.alpha is None:
            return None
        return corrected_level(self.alpha, self.p_value, self.adjusted_p)

    @property
    def basis(self) -> str:
        """How the margin was set, in words."""
        if self.source == "fixed":
            return "set in the config"
        if self.margin is None:
            return f"not calibrated: its {self.source} arms are missing"
        what = (
            "two samples of the unperturbed model (the original and its replicates)"
            if self.source == "replicates"
            else "the original and a control perturbation"
        )
        if self.prompts is not None:
            what += f", each the mean over the {self.prompts} prompts"
        share = f"{100 * (self.quantile or 0):g}th percentile"
        basis = f"the {share} of the energy distances between {what}, over {self.pairs} pairs"
        if self.multiple not in (None, 1.0):
            basis = f"{self.multiple:g} x {basis}"
        if self.margin == 0:
            basis += f" ({ZERO_MARGIN})"
        return basis


@dataclass(frozen=True)
class StopView:
    """Where and why a test of a sequential audit stopped."""

    at: int | None
    """Outputs per arm at the stop; None when the test could not run."""
    reason: str
    """``changed``, ``futile`` (could no longer reach its level), ``k_max`` or ``not tested``."""

    @property
    def text(self) -> str:
        """``stopped at k=8: changed``, ``ran to k=20``."""
        if self.at is None:
            return "not tested"
        if self.reason == "k_max":
            return f"ran to k={self.at}"
        return f"stopped at k={self.at}: {self.reason}"


@dataclass(frozen=True)
class SequentialView:
    """What a sequential audit's design sampled against the fixed-k design."""

    outputs: int
    """Outputs sampled over all arms (each up to where its tests stopped)."""
    fixed_outputs: int
    """Outputs every arm at the largest k would take."""
    k_max: int

    @property
    def saved(self) -> float:
        """Share of model calls saved against the fixed-k design."""
        return 1.0 - self.outputs / max(self.fixed_outputs, 1)


@dataclass(frozen=True)
class TestRow:
    """One perturbation of one family: its test and its corrected decision."""

    __test__ = False  # not a pytest class

    family: str
    position: int
    perturbation_id: str
    kind: str
    label: str | None
    """``control``, ``target`` or None."""
    description: str
    tested: bool
    omega: float | None
    """Observed discrepancy (the paper's effect size)."""
    effect: float | None
    """``omega - null_mean``: omega corrected for its bias at this k."""
    z: float | None
    null_mean: float | None
    null_std: float | None
    p_value: float | None
    adjusted_p: float | None
    reject: bool | None
    """None when the family was not corrected (the run stopped first)."""
    evaluated: int | None
    """Permutations evaluated (all splits when ``exact``)."""
    exact: bool | None
    k_a: int | None
    k_b: int | None
    seed: int | None
    """Seed of the permutations."""
    test_id: str
    original_arm: str
    perturbed_arm: str
    reason: str | None
    """Why the perturbation was not tested."""
    driver: str | None = None
    """A combined omega (``auto``): the component with the smallest p-value."""
    components: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """A combined omega: per component, its aspect, statistic, own p-value and effect."""
    interval: EffectBounds | None = None
    """The effect's estimate and interval (the energy distance between the arms)."""
    equivalence: EquivalenceView | None = None
    """The equivalence test against the family's margin; None without a margin."""
    stop: StopView | None = None
    """Where and why it stopped, in a sequential audit."""
    pending: bool = False
    """Not tested yet: the run is still running and no arm of it failed."""
    early: str | None = None
    """A running sequential run: the decision its stop at a look already makes final
    (``changed`` or ``no change``), before the family's correction."""

    @property
    def changed_aspect(self) -> str | None:
        """What the driving component looks at (e.g. "location of the answers"), if any."""
        if self.driver is None or self.driver not in self.components:
            return None
        return str(self.components[self.driver].get("aspect") or self.driver)

    @property
    def stars(self) -> str:
        """``*`` p<0.05, ``**`` p<0.01, ``***`` p<0.001 (raw p, as in the paper's Table 2)."""
        return "" if self.p_value is None else stars(self.p_value)

    @property
    def p_floor(self) -> float | None:
        """The smallest p-value this test could give."""
        if self.evaluated is None or self.exact is None:
            return None
        return p_floor(self.evaluated, self.exact)

    @property
    def decision(self) -> str:
        """``changed``, ``no change``, ``not tested`` or ``pending`` (not decided yet: not
        tested yet in a running run, or not corrected; a sequential test's stop may make it
        final before, see ``early``); with an equivalence margin ``changed``, ``equivalent``
        or ``inconclusive`` for a tested one."""
        if not self.tested:
            return "pending" if self.pending else "not tested"
        if self.reject is None:
            return self.early or "pending"
        if self.equivalence is not None:
            return self.equivalence.decision
        return "changed" if self.reject else "no change"

    @property
    def settling(self) -> Settling | None:
        """An inconclusive decision: the k per arm that would likely settle it (80% power,
        ``dbpa.stats.settling_k``); None otherwise, with a margin of 0, and where the outputs
        bound no distance (an upper bound of infinity: outputs that do not vary)."""
        view, bounds = self.equivalence, self.interval
        if view is None or bounds is None or not view.margin or self.decision != "inconclusive":
            return None
        if not math.isfinite(bounds.high):
            return None
        k = min(self.k_a or 0, self.k_b or 0)
        if k < 2:
            return None
        return settling_k(
            bounds.estimate,
            bounds.low,
            bounds.high,
            view.margin,
            k,
            confidence=bounds.confidence,
            level=view.level,
        )

    @property
    def control_changed(self) -> bool:
        """A control perturbation was rejected: the model changed where it should not."""
        return self.label == "control" and (self.reject is True or self.decision == "changed")


@dataclass(frozen=True)
class KindCount:
    """How many perturbations of one kind and label a family holds, tested and changed."""

    kind: str
    label: str | None
    perturbations: int
    tested: int
    changed: int


@dataclass(frozen=True)
class Family:
    """The perturbations tested against one model's original arm."""

    name: str
    rows: tuple[TestRow, ...]
    top: tuple[TestRow, ...] = ()
    """In a summarised report (a run of hundreds of perturbations): the rows shown in full,
    with figures and outputs, most changed first; empty when every row is shown in full."""

    @property
    def tested(self) -> int:
        """Perturbations with a test."""
        return sum(r.tested for r in self.rows)

    @property
    def changed(self) -> int:
        """Perturbations decided ``changed`` (rejected after correction, and not shown
        equivalent when there is a margin)."""
        return sum(r.decision == "changed" for r in self.rows)

    @property
    def equivalent(self) -> int:
        """Perturbations shown equivalent (0 without a margin)."""
        return sum(r.decision == "equivalent" for r in self.rows)

    @property
    def margin(self) -> EquivalenceView | None:
        """The family's equivalence margin (from its first decided row), if it has one."""
        return next((r.equivalence for r in self.rows if r.equivalence is not None), None)

    @property
    def controls_changed(self) -> tuple[TestRow, ...]:
        """Rejected control perturbations."""
        return tuple(r for r in self.rows if r.control_changed)

    def labelled(self, label: str) -> tuple[TestRow, ...]:
        """Tested rows (with a p-value) carrying this label."""
        return tuple(r for r in self.rows if r.p_value is not None and r.label == label)

    @property
    def by_kind(self) -> tuple[KindCount, ...]:
        """Counts per kind and label, in order of first appearance."""
        counts: dict[tuple[str, str | None], list[int]] = {}
        for r in self.rows:
            n = counts.setdefault((r.kind, r.label), [0, 0, 0])
            n[0] += 1
            n[1] += r.tested
            n[2] += r.decision == "changed"
        return tuple(KindCount(k, lab, *n) for (k, lab), n in counts.items())


@dataclass(frozen=True)
class RocView:
    """ROC of one labelled family over the raw p-values (paper, Fig. 1)."""

    family: str
    fpr: tuple[float, ...]
    tpr: tuple[float, ...]
    auc: float
    points: tuple[OperatingPoint, ...]
    """Best TPR at each allowed FPR in ``ALLOWED_FPR``."""
    n_control: int
    n_target: int
    n_untested: int
    """Labelled perturbations left out because they were not tested."""


@dataclass(frozen=True)
class Alignment:
    """A model swapped in for a family's reference model (paper, Fig. 3)."""

    reference: str
    """The family (its model is the reference)."""
    model: str
    """The compared model."""
    row: TestRow


@dataclass(frozen=True)
class Output:
    """One sampled output shown in the report."""

    index: int
    text: str
    status: str
    seed: int | None


@dataclass(frozen=True)
class Usage:
    """Outputs, tokens and cost."""

    outputs: int
    empty: int
    filtered: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    """Sum of the known prices; None when no output had one."""


@dataclass(frozen=True)
class ArmView:
    """One sampled arm: what was asked, of which model, and a few of its outputs."""

    arm_id: str
    model: str
    params: Mapping[str, Any]
    messages: tuple[tuple[str, str], ...]
    """(role, content) pairs."""
    roles: tuple[str, ...]
    """Where the arm is used, e.g. ``original of gpt-4`` or ``doctor (gpt-4)``."""
    outputs: tuple[Output, ...]
    usage: Usage | None
    failure: str | None


@dataclass(frozen=True)
class ModelUsage:
    """Tokens and cost of every arm sampled from one model."""

    model: str
    arms: int
    usage: Usage


@dataclass(frozen=True)
class SimilarityView:
    """Histograms of P0 and P1 on shared edges, as shares of their pairs."""

    similarity: str
    edges: tuple[float, ...]
    p0: tuple[float, ...]
    p1: tuple[float, ...]
    p0_mean: float
    p1_mean: float


@dataclass(frozen=True)
class NullView:
    """Histogram of the permutation null, and the observed statistic."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    observed: float
    mean: float


@dataclass(frozen=True)
class Exemplar:
    """An output that characterises a change, with its witness score."""

    index: int
    """Its index in its arm (the first of its copies)."""
    text: str
    score: float
    """Mean similarity to the perturbed arm minus mean similarity to the original arm."""
    copies: int
    """Outputs of the arm with exactly this text."""


@dataclass(frozen=True)
class MovedAnswers:
    """The answers that moved: the outputs that most characterise the difference between
    the arms, by the witness rule (``dbpa.stats.witness_scores``), distinct texts only."""

    after: tuple[Exemplar, ...]
    """Perturbed outputs with the largest scores: more typical after the perturbation."""
    before: tuple[Exemplar, ...]
    """Original outputs with the smallest scores: more typical before it."""


@dataclass(frozen=True)
class MapView:
    """Both arms' outputs on the family's output map: the first two principal components of
    the embeddings of every arm of the family's drawn tests (one projection and one frame
    per family, so the maps of a family can be compared)."""

    original: tuple[tuple[float, float], ...]
    perturbed: tuple[tuple[float, float], ...]
    original_centroid: tuple[float, float]
    perturbed_centroid: tuple[float, float]
    frame: tuple[float, float, float, float]
    """(x low, x high, y low, y high), shared by the family."""
    explained: tuple[float, float]
    """Share of the variance of the family's embeddings along each axis."""


@dataclass(frozen=True)
class TestView:
    """What the per-test figure draws, and the answers that moved."""

    __test__ = False  # not a pytest class

    family: str
    perturbation_id: str
    null: NullView
    similarity: SimilarityView | None
    note: str | None
    """Why the similarity histograms (and the answers that moved) are missing."""
    moved: MovedAnswers | None = None
    """None when the outputs have no stored vectors or texts."""
    map: MapView | None = None
    """None when the outputs have no stored vectors."""


@dataclass(frozen=True)
class DroppedParaphrase:
    """A generated paraphrase left out of the family (from the run's stored config)."""

    spec: int
    """Position of its ``paraphrase`` spec in the config's perturbations."""
    number: int
    """Its number among the outputs of its generator (1..n; in an audit of one prompt a
    kept one is ``<prefix>-<number>``)."""
    text: str
    reason: str
    """Empty, same as the original or another paraphrase, below ``min_similarity``, or
    beyond the number every prompt of a set keeps."""
    prompt: str | None = None
    """The id of the prompt it paraphrases in a set of prompts; None: the audit's one prompt."""


@dataclass(frozen=True)
class PromptCell:
    """One prompt under one perturbation of a set of prompts."""

    p_value: float
    """The prompt's p-value from its perturbation's pooled test."""
    adjusted_p: float | None
    """Adjusted by the drill-down (None where the perturbation was not selected)."""
    moved: bool
    z: float | None
    """The prompt's standardised effect in the pooled test (None: its statistic never varies)."""
    estimate: float | None
    """Its own effect interval's estimate and bounds (energy distance), when stored."""
    low: float | None
    high: float | None


@dataclass(frozen=True)
class PromptMover:
    """A prompt that moved most under one perturbation, with the answers that moved."""

    prompt_id: str
    prompt: str
    cell: PromptCell
    moved_answers: MovedAnswers | None


@dataclass(frozen=True)
class PromptColumn:
    """A perturbation of one family, as a column of the heatmap, and its movers."""

    family: str
    perturbation_id: str
    label: str | None
    decision: str
    moved: int
    """Prompts the drill-down called moved."""
    movers: tuple[PromptMover, ...]
    """The prompts of smallest p (the moved first), up to ``MOVERS_SHOWN``."""


@dataclass(frozen=True)
class PromptSetView:
    """A run over a set of prompts: the prompt x perturbation heatmap and the movers."""

    prompts: tuple[tuple[str, str], ...]
    """(id, user prompt) of every prompt, in the set's order."""
    columns: tuple[PromptColumn, ...]
    cells: tuple[tuple[PromptCell | None, ...], ...]
    """Per prompt, per column (None where not stored)."""
    within: str | None
    """The correction of a selected perturbation's prompts."""


@dataclass(frozen=True)
class ReportData:
    """A run, gathered from the audit record."""

    run: RunInfo
    settings: Settings
    families: tuple[Family, ...]
    roc: tuple[RocView, ...]
    """One per family with tested control and target perturbations."""
    best_models: tuple[ModelChoice, ...]
    """One per allowed FPR, when several families are labelled."""
    alignment: tuple[Alignment, ...]
    arms: tuple[ArmView, ...]
    usage: tuple[ModelUsage, ...]
    total_usage: Usage
    test_views: tuple[TestView, ...]
    figures_omitted: int
    """Tested perturbations beyond the figure limit (their numbers are in the tables)."""
    generator: str
    """The dbpa version that wrote the report."""
    drift: DriftHistory | None = None
    """Drift between the audit's ticks; None unless several ticks are recorded."""
    monitor: MonitorHistory | None = None
    """The drift monitor's evidence over the audit's ticks; None unless it stored some."""
    dropped_paraphrases: tuple[DroppedParaphrase, ...] = ()
    """Generated paraphrases the run left out of the family, and why."""
    sequential: SequentialView | None = None
    """A sequential audit's outputs against the fixed-k design's; None for a fixed-k run."""
    prompt_set: PromptSetView | None = None
    """A run over a set of prompts: its heatmap and movers; None for one prompt."""

    @property
    def rows(self) -> tuple[TestRow, ...]:
        """Every perturbation of every family."""
        return tuple(r for f in self.families for r in f.rows)

    @property
    def labelled(self) -> bool:
        """Some perturbation carries a control/target label."""
        return any(r.label for r in self.rows)

    @property
    def summarised(self) -> bool:
        """Only each family's ``top`` rows are shown in full; the others as summary rows."""
        return any(f.top for f in self.families)
