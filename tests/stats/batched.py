"""Many simulated pooled tests at once, each ``prompt_set_test``'s result to the last bit.

An error-rate check of the pooled test runs hundreds of independent audits of a few dozen
prompts with unequal k per arm. One by one, each audit stacks its own few prompts of each
pooled size (``_prompt_sets._stacks``), and most of its time goes to building and calling
those small stacks. Here the prompts of a batch of audits are evaluated together
(``_prompt_sets._evaluate_prompts``), then each audit is ranked and combined on its own.

Each audit's relabellings are drawn from its own seed as ``prompt_set_test`` draws them, and
a prompt's statistics do not depend on the prompts stacked with it (``_stacked``: the
per-prompt kernels' to the last bit), so every result is ``prompt_set_test``'s for that
audit and seed; ``test_prompt_sets.py`` checks it field by field. Measured (2026-11-28, one
process, B = 99, ``null_prompt_set`` audits, 20 at a time): 50 prompts at k = 4-14 per arm
0.87 CPU-s one by one, 0.52 together; 20 prompts 0.37 and 0.26. The product does not batch:
its audits (and a plan's simulated ones) have equal k, whose stacks are already large (30
audits of 20 prompts at k = 8, B = 2000: 3.13 s one by one, 3.33 together).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dbpa.stats import Omega, PromptSetResult, prompt_set_test
from dbpa.stats._prompt_sets import (
    _evaluate_prompts,
    _product_at_most,
    _prompt_set_test_iv,
    _ranked,
    _result,
    _stratified_masks,
    _with_spread,
)
from dbpa.stats._threads import SMALL_ROWS, blas_for

Arms = list[np.ndarray]


def prompt_set_tests(
    sets: Sequence[tuple[Arms, Arms]],
    seeds: Sequence[int],
    *,
    combination: str = "sum_z+tippett+spread",
    n_permutations: int = 99,
) -> list[PromptSetResult]:
    """``prompt_set_test(originals, perturbed, combination=..., n_permutations=..., rng=seed)``
    of every set and its seed (``auto``, cosine); audits whose relabellings are enumerated,
    or with a prompt too large for one BLAS thread, are tested one by one."""
    results: dict[int, PromptSetResult] = {}
    batch: list[tuple[int, Arms, Arms, list[np.ndarray]]] = []
    for j, ((originals, perturbed), seed) in enumerate(zip(sets, seeds, strict=True)):
        a_arms, b_arms, spec, options, _, b = _prompt_set_test_iv(
            originals, perturbed, "auto", "cosine", combination, n_permutations, {}
        )
        n = [x.shape[0] + y.shape[0] for x, y in zip(a_arms, b_arms, strict=True)]
        k_a = [x.shape[0] for x in a_arms]
        if max(n) > SMALL_ROWS or _product_at_most(list(map(math.comb, n, k_a)), b):
            results[j] = prompt_set_test(
                originals, perturbed, combination=combination, n_permutations=b, rng=seed
            )
            continue
        masks = _stratified_masks(n, k_a, b, np.random.default_rng(seed))
        batch.append((j, a_arms, b_arms, masks))
    if batch:
        results |= _together(batch, spec, options, combination, n_permutations)
    return [results[j] for j in range(len(sets))]


def _together(
    batch: list[tuple[int, Arms, Arms, list[np.ndarray]]],
    spec: Omega,
    options: dict[str, Any],
    combination: str,
    b: int,
) -> dict[int, PromptSetResult]:
    """Evaluate the prompts of every audit of ``batch`` together, then rank and combine each
    audit on its own."""
    spread = _with_spread(combination)
    a_arms = [x for _, arms, _, _ in batch for x in arms]
    b_arms = [y for _, _, arms, _ in batch for y in arms]
    masks = [m for _, _, _, found in batch for m in found]
    largest = max(x.shape[0] + y.shape[0] for x, y in zip(a_arms, b_arms, strict=True))
    with blas_for(largest):
        values, scales = _evaluate_prompts(a_arms, b_arms, masks, spec, options, "cosine", spread)
    results, start = {}, 0
    for j, originals, perturbed, _ in batch:
        prompts = slice(start, start + len(originals))
        start = prompts.stop
        k_a = tuple(x.shape[0] for x in originals)
        k_b = tuple(y.shape[0] for y in perturbed)
        relabelled = _ranked(
            values[:, prompts], scales[prompts], False, k_a, k_b, spec, b, "cosine", spread=spread
        )
        results[j] = _result(relabelled, combination)
    return results
