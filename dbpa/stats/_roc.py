"""Control vs target perturbations: FPR(alpha), TPR(alpha), ROC, AUC, model choice.

A *control* perturbation should not change the output distribution, a *target*
perturbation should. At level alpha, FPR is the share of controls with p <= alpha and
TPR the share of targets (the paper writes p < alpha; "<=" is the rejection rule
under which permutation p-values are valid, and they differ only at exact ties).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_p_values, as_probability

Vector = NDArray[np.float64]

_LABELS = {"control": False, "target": True}


def _labels_iv(labels: Sequence[Any] | ArrayLike, size: int) -> NDArray[np.bool_]:
    """Target indicator from 'control'/'target' strings or booleans (True = target)."""
    values = list(np.asarray(labels, dtype=object).ravel())
    if len(values) != size:
        raise ValueError(f"labels: expected {size} labels (one per p-value), got {len(values)}")
    out = np.empty(size, dtype=bool)
    for i, v in enumerate(values):
        if isinstance(v, str) and v.lower() in _LABELS:
            out[i] = _LABELS[v.lower()]
        elif isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
            out[i] = bool(v)
        else:
            raise ValueError(f"labels: {v!r} at position {i} is neither 'control' nor 'target'")
    if out.all() or not out.any():
        raise ValueError("labels: need at least one control and one target perturbation")
    return out


@dataclass(frozen=True)
class Rates:
    """False and true positive rates at one level alpha."""

    alpha: float
    fpr: float
    tpr: float


@dataclass(frozen=True)
class RocResult:
    """The ROC curve of a labelled family, traced over alpha."""

    fpr: Vector
    """Share of controls rejected at each threshold (non-decreasing, 0 to 1)."""
    tpr: Vector
    """Share of targets rejected at each threshold."""
    thresholds: Vector
    """Rejecting p <= threshold gives the point; the first threshold (-inf) rejects nothing."""
    auc: float
    """Area under the curve: P(p_target < p_control) + P(tie)/2."""
    n_control: int
    n_target: int


def rates_at(p_values: ArrayLike, labels: Sequence[Any] | ArrayLike, alpha: float) -> Rates:
    """FPR and TPR when every perturbation with p <= alpha counts as changed."""
    p = as_p_values(p_values)
    target = _labels_iv(labels, p.size)
    alpha = as_probability(alpha, "alpha")
    rejected = p <= alpha
    return Rates(alpha, float(rejected[~target].mean()), float(rejected[target].mean()))


def roc_curve(p_values: ArrayLike, labels: Sequence[Any] | ArrayLike) -> RocResult:
    """ROC of the decision "p <= t" over every threshold t, and its area."""
    p = as_p_values(p_values)
    target = _labels_iv(labels, p.size)
    thresholds = np.concatenate([[-np.inf], np.unique(p)])
    n_t, n_c = int(target.sum()), int((~target).sum())
    sorted_t, sorted_c = np.sort(p[target]), np.sort(p[~target])
    tpr = np.searchsorted(sorted_t, thresholds, side="right") / n_t
    fpr = np.searchsorted(sorted_c, thresholds, side="right") / n_c
    auc = float(np.trapezoid(tpr, fpr))
    return RocResult(fpr=fpr, tpr=tpr, thresholds=thresholds, auc=auc, n_control=n_c, n_target=n_t)


@dataclass(frozen=True)
class OperatingPoint:
    """The best TPR reachable while the FPR stays within an allowance."""

    max_fpr: float
    tpr: float
    fpr: float
    threshold: float
    """Reject p <= threshold; -inf when only rejecting nothing keeps the FPR in bounds."""


def tpr_at_fpr(
    p_values: ArrayLike, labels: Sequence[Any] | ArrayLike, max_fpr: float
) -> OperatingPoint:
    """Highest TPR over thresholds whose FPR is at most ``max_fpr``."""
    if not isinstance(max_fpr, (int, float)) or not 0.0 <= float(max_fpr) <= 1.0:
        raise ValueError(f"max_fpr: must be in [0, 1], got {max_fpr!r}")
    roc = roc_curve(p_values, labels)
    allowed = np.flatnonzero(roc.fpr <= max_fpr + 1e-12)
    best = allowed[np.argmax(roc.tpr[allowed])]
    return OperatingPoint(
        max_fpr=float(max_fpr),
        tpr=float(roc.tpr[best]),
        fpr=float(roc.fpr[best]),
        threshold=float(roc.thresholds[best]),
    )


@dataclass(frozen=True)
class ModelChoice:
    """The model with the highest TPR at an allowed FPR (ties: higher AUC, then name)."""

    model: str
    max_fpr: float
    points: Mapping[str, OperatingPoint]
    """Every model's operating point."""
    auc: Mapping[str, float]
    """Every model's AUC."""


def best_model(
    results: Mapping[str, tuple[ArrayLike, Sequence[Any] | ArrayLike]], max_fpr: float
) -> ModelChoice:
    """Pick among models, each given as ``name -> (p_values, labels)``."""
    if not results:
        raise ValueError("results: need at least one model")
    points = {name: tpr_at_fpr(p, lab, max_fpr) for name, (p, lab) in results.items()}
    aucs = {name: roc_curve(p, lab).auc for name, (p, lab) in results.items()}
    winner = min(points, key=lambda name: (-points[name].tpr, -aucs[name], name))
    return ModelChoice(model=winner, max_fpr=float(max_fpr), points=points, auc=aucs)
