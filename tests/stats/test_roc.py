"""Control/target rates, ROC and AUC, and choosing a model at an allowed FPR."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from dbpa.stats import best_model, rates_at, roc_curve, tpr_at_fpr


def test_rates_by_hand():
    p = [0.01, 0.2, 0.03, 0.001, 0.5, 0.04]
    labels = ["target", "target", "control", "target", "control", "target"]
    rates = rates_at(p, labels, 0.05)
    assert rates.fpr == pytest.approx(1 / 2)
    assert rates.tpr == pytest.approx(3 / 4)


def test_labels_as_booleans():
    assert rates_at([0.01, 0.5], [True, False], 0.05).tpr == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_auc_is_the_mann_whitney_probability(seed):
    rng = np.random.default_rng(seed)
    p_control = np.round(rng.uniform(size=15), 2)  # ties on purpose
    p_target = np.round(rng.beta(0.5, 3, size=12), 2)
    p = np.r_[p_control, p_target]
    labels = ["control"] * 15 + ["target"] * 12
    u = mannwhitneyu(p_control, p_target).statistic  # #(control > target) + ties / 2
    assert roc_curve(p, labels).auc == pytest.approx(u / (15 * 12))


def test_curve_runs_from_origin_to_one():
    roc = roc_curve([0.2, 0.01, 0.5, 0.04], ["control", "target", "control", "target"])
    assert (roc.fpr[0], roc.tpr[0]) == (0.0, 0.0)
    assert (roc.fpr[-1], roc.tpr[-1]) == (1.0, 1.0)
    assert np.all(np.diff(roc.fpr) >= 0)
    assert np.all(np.diff(roc.tpr) >= 0)
    assert roc.auc == 1.0


def test_tpr_at_allowed_fpr():
    p = [0.001, 0.002, 0.003, 0.02, 0.5, 0.03, 0.6, 0.7, 0.8, 0.9]
    labels = ["target", "control", "target", "target", "target"] + ["control"] * 5
    point = tpr_at_fpr(p, labels, 0.0)
    assert point.tpr == pytest.approx(1 / 4)
    assert point.fpr == 0.0
    point = tpr_at_fpr(p, labels, 0.2)  # one control of six may be rejected
    assert point.tpr == pytest.approx(3 / 4)
    assert point.fpr == pytest.approx(1 / 6)
    assert point.threshold == pytest.approx(0.02)


def test_best_model_depends_on_allowed_fpr():
    labels = ["target"] * 4 + ["control"] * 10
    # A rejects one target before any control, then must pay two controls for the rest.
    a = [0.001, 0.5, 0.5, 0.5] + [0.01, 0.02] + [0.9] * 8
    # B never beats every control but gets all targets with one false positive.
    b = [0.02, 0.02, 0.02, 0.02] + [0.01] + [0.9] * 9
    strict = best_model({"A": (a, labels), "B": (b, labels)}, max_fpr=0.0)
    loose = best_model({"A": (a, labels), "B": (b, labels)}, max_fpr=0.1)
    assert strict.model == "A"
    assert strict.points["A"].tpr == pytest.approx(0.25)
    assert loose.model == "B"
    assert loose.points["B"].tpr == 1.0
    assert set(loose.auc) == {"A", "B"}
