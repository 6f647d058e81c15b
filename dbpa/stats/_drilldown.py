"""Which prompts moved: testing prompts only inside the perturbations whose pooled test rejected.

An audit over a set of prompts has two levels of hypotheses: per perturbation j, the pooled
null "no prompt changed" (``prompt_set_test``), and within it one null per prompt. Testing
every prompt of every perturbation at alpha ignores the selection: a reader looks at the
prompts of the perturbations that were flagged, and among those an error rate computed
over all perturbations is diluted by the ones nobody looks at. This is Benjamini and
Bogomolov's families of families (Y. Benjamini & M. Bogomolov, "Selective inference on
multiple families of hypotheses", JRSS-B 76(1), 2014, 297-318), whose procedure this is:

1. **Select** the perturbations whose pooled p-value is rejected by the family's correction
   (``selection``, at alpha); R of the m are selected.
2. **Within** each selected perturbation, test its prompts' p-values by ``within`` at the
   level ``R alpha / m``; no prompt of an unselected perturbation is called moved.

What it controls: the expected average, over the selected perturbations, of the error of the
within-perturbation procedure: with ``within="holm"`` (or bonferroni) the expected share of
selected perturbations in which any unchanged prompt is called moved, with ``within="bh"``
(or by) the expected average false discovery proportion among the prompts called moved,
both at most alpha (BB's Theorem 1 for families with independent p-values and a *simple*
selection rule: one whose number of selected families does not change while a selected
family's p-values change and it stays selected; Bonferroni and BH are simple, and so is Holm,
a step-down that keeps its rejections while a rejected p-value stays below its step). The
prompts of one perturbation are independent (separate outputs, separate relabellings); the
perturbations of one audit share the original arms, which BB's independence does not cover:
the rate with shared originals is simulated in tests/stats/test_prompt_sets.py.

Each selected perturbation's prompt p-values are also reported adjusted on the alpha scale
(the within-correction's adjusted p-value times ``m / R``): a prompt moved when it is at most
alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._multiplicity import CORRECTIONS, correct
from ._validation import as_p_values, as_probability, choose

Vector = NDArray[np.float64]


@dataclass(frozen=True)
class PromptDrilldown:
    """Which prompts moved in which perturbation, with the error kept over both levels."""

    selected: NDArray[np.bool_]
    """(m,) perturbations whose pooled test was rejected by ``selection`` at alpha."""
    set_adjusted: Vector
    """(m,) the pooled p-values adjusted by ``selection``."""
    level: float
    """``R alpha / m``: the level of the within-perturbation tests (0 when R = 0)."""
    moved: tuple[NDArray[np.bool_], ...]
    """Per perturbation, per prompt: called moved (always False outside the selected)."""
    prompt_adjusted: tuple[Vector, ...]
    """Per perturbation, per prompt: the within-correction's adjusted p-value times ``m / R``
    (capped at 1), moved where at most alpha; NaN outside the selected perturbations."""
    alpha: float
    selection: str
    """Correction of the pooled p-values that selects the perturbations."""
    within: str
    """Correction of the prompts' p-values inside each selected perturbation."""

    @property
    def n_selected(self) -> int:
        """R, the number of selected perturbations."""
        return int(self.selected.sum())


def _drilldown_iv(
    set_p_values: ArrayLike,
    prompt_p_values: Sequence[ArrayLike],
    alpha: float,
    selection: str,
    within: str,
) -> tuple[Vector, list[Vector], float, str, str]:
    p_set = as_p_values(set_p_values, "set_p_values")
    if isinstance(prompt_p_values, (str, bytes)) or not isinstance(
        prompt_p_values, (Sequence, np.ndarray)
    ):
        raise ValueError(
            "prompt_p_values: expected a sequence with one array of prompt p-values per "
            f"perturbation, got {type(prompt_p_values).__name__}"
        )
    if len(prompt_p_values) != p_set.size:
        raise ValueError(
            f"prompt_p_values: {len(prompt_p_values)} given for {p_set.size} pooled p-values; "
            "one per perturbation"
        )
    prompts = [as_p_values(p, f"prompt_p_values[{j}]") for j, p in enumerate(prompt_p_values)]
    level = as_probability(alpha, "alpha")
    return (
        p_set,
        prompts,
        level,
        choose(selection, "selection", CORRECTIONS),
        choose(within, "within", CORRECTIONS),
    )


def prompt_drilldown(
    set_p_values: ArrayLike,
    prompt_p_values: Sequence[ArrayLike],
    *,
    alpha: float = 0.05,
    selection: str = "holm",
    within: str = "holm",
) -> PromptDrilldown:
    """Which prompts of which perturbations moved (Benjamini & Bogomolov 2014).

    Parameters
    ----------
    set_p_values
        (m,) each perturbation's pooled p-value (``PromptSetResult.p_value``).
    prompt_p_values
        m arrays, each perturbation's per-prompt p-values (``PromptSetResult.prompt_p_values``;
        the number of prompts may differ between perturbations).
    alpha
        The level of both steps.
    selection
        The correction that selects perturbations (``CORRECTIONS``; the family's, default
        ``"holm"``).
    within
        The correction of the prompts inside a selected perturbation, at ``R alpha / m``:
        ``"holm"`` (default; controls the expected share of selected perturbations with any
        prompt wrongly called moved) or ``"bh"`` (the expected average false discovery
        proportion over the selected perturbations), ``"bonferroni"``, ``"by"``.
    """
    p_set, prompts, level, selection, within = _drilldown_iv(
        set_p_values, prompt_p_values, alpha, selection, within
    )
    chosen = correct(p_set, method=selection, alpha=level)
    m, r = p_set.size, int(chosen.reject.sum())
    inner_level = r * level / m
    moved, adjusted = [], []
    for j, p in enumerate(prompts):
        if not chosen.reject[j]:
            moved.append(np.zeros(p.size, dtype=bool))
            adjusted.append(np.full(p.size, np.nan))
            continue
        inner = correct(p, method=within, alpha=inner_level)
        moved.append(inner.reject.copy())
        adjusted.append(np.minimum(inner.adjusted * m / r, 1.0))
    for arr in [*moved, *adjusted]:
        arr.setflags(write=False)
    return PromptDrilldown(
        selected=chosen.reject,
        set_adjusted=chosen.adjusted,
        level=inner_level,
        moved=tuple(moved),
        prompt_adjusted=tuple(adjusted),
        alpha=level,
        selection=selection,
        within=within,
    )
