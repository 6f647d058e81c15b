"""The pooled test of a perturbation over a set of prompts: a stratified permutation test.

Each prompt i has its own original and perturbed arms (k_a_i and k_b_i outputs; k may differ
between prompts and arms). Under H0 (the perturbation changes no prompt's output
distribution) the outputs of one prompt are exchangeable between its two arms, but not with
another prompt's: a *relabelling* therefore splits every prompt's pooled outputs anew into
groups of k_a_i and k_b_i, each prompt on its own (a stratified permutation test). One
relabelling gives one statistic per prompt (omega on that prompt's split, the permutation
engine's kernels on the prompt's pooled matrix); the per-prompt statistics are combined
across prompts into the set's statistic by one of ``COMBINATIONS``.

The rows are the observed labels (row 0) and B random relabellings, or every relabelling when
there are at most B. Every combination is a symmetric function of the rows (a prompt's
statistic standardised by its mean and spread over all rows, or ranked among them), so under
H0 the rows' combined statistics are exchangeable and the share of rows at least as extreme
as the observed one is a valid permutation p-value: ``(1 + #) / (1 + B)``, or
``# / #relabellings`` when all are enumerated. Each prompt's own p-value is its statistic's
rank among the same rows: marginally the permutation p-value of that prompt alone.

``omega="auto"`` combines the per-prompt statistics of each of its components across prompts
first (one set statistic per component), then the components by its non-parametric
combination on the same rows (``_combined``): the set's ``driver`` says which aspect led.
A prompt's own ``auto`` p-value combines its two components on the same rows.

The default ``sum_z+tippett+spread`` adds the *spread* of the answers: per prompt the mean
cosine distance between two original answers minus the same between two perturbed ones
(``_SpreadKernel``, evaluated on the same relabellings), standardised over the rows and
summed over the prompts; its absolute value is the set's spread statistic (two-sided:
answers more or less diverse, the same way over the prompts, as a lower or higher
temperature makes them). The omegas compare where the answers sit and how they resemble the
originals, and barely see a change of diversity alone on a few outputs. The spread joins
the first component's across-prompt combination as a third part beside its ``sum_z`` and
Tippett (``auto``: jsd's, whose aspect, the spread and similarity structure of the answers,
it shares; a single omega: the omega's), not the components' combination as a component of
its own: measured, a third component there cost 0.145 of power where 2 of 20 prompts
drifted, joining jsd's 0.01 (benchmarks/README.md). The ``driver`` is then ``jsd`` where the
spread led. The spread does not enter the prompts' own p-values.

Where every component is jsd (on cosine similarities) or energy_cosine, the prompts are
evaluated together (``_stacked``): those of one pooled size as they are, the others padded
within size classes (``_stacks``). The default's 500 prompts at k = 2-4 per arm and B = 99
took 0.27 CPU-s a test one by one and 0.074 s together, 50 prompts at k = 4-14 0.030 s and
0.020 s (2026-11-27); the values are the per-prompt kernels' to the last bit, and so are the
relabellings, drawn prompt after prompt.

A prompt whose statistic does not vary over its relabellings (every answer the same text in
both arms, which gets a constant statistic, or a tie between every split) adds nothing: its
standardised statistic is 0 and its per-prompt p-value 1 on every row.

Which combination, measured (``python -m benchmarks prompt_sets``, 200 synthetic audits per
cell of 20 prompts at k = 10, and real outputs of the embedded model; tables in
benchmarks/README.md): ``sum_z+tippett`` is the non-parametric combination, on the
same rows, of the sum of standardised statistics (``sum_z``: strongest where many prompts
move a little) and Tippett's smallest per-prompt p-value (``tippett``: strongest where a few
prompts move a lot). Each alone is blind to the other's case: ``sum_z`` reached 0.18 where
2 of 20 prompts drifted (Tippett 0.40), Tippett 0.22 where 6 of 20 took a new answer type
(``sum_z`` 0.45). Their combination had the highest mean power over the six synthetic cells
(0.59; ``sum_z`` 0.57, ``fisher`` 0.58, ``tippett`` 0.45, ``sum`` 0.53), the smallest largest
shortfall against the best candidate of each cell (0.10; ``sum_z`` and ``fisher`` 0.22). The
default ``sum_z+tippett+spread`` keeps that (mean 0.598 over the synthetic cells, largest
shortfall 0.11) and detects the temperature change 1.0 to 0.8 on real outputs, which no
combination without the spread does: 0.40 of audits at k = 10 and 0.79 at k = 20 against
0.08 and 0.03 for ``sum_z+tippett``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._combined import (
    ComponentResult,
    at_least_counts,
    at_least_counts_columns,
    combine,
    component_result,
    driver,
)
from ._omega import OMEGAS, Kernel, Masks, Omega, _QuadraticSums
from ._permutation import MEMORY_BUDGET_BYTES, TIE_RTOL, _all_splits, _random_splits, _sizes
from ._similarity import SIMILARITIES, _unit_rows, cosine_distance
from ._stacked import StackedKernels, stackable
from ._threads import blas_for
from ._validation import RngLike, as_embeddings, as_positive_int, as_rng, choose

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]
Counts = NDArray[np.int64]

ENUMERATION_CHUNK = 4096
"""Splits of one prompt built per step when every relabelling is enumerated."""


def _sum_z(values: Matrix, counts: Counts, varies: NDArray[np.bool_]) -> Vector:
    """Sum over prompts of each prompt's statistic standardised by its mean and standard
    deviation over the rows (0 for a prompt whose statistic does not vary)."""
    spread = values.std(axis=0)
    safe = np.where(varies, spread, 1.0)
    z = np.where(varies, (values - values.mean(axis=0)) / safe, 0.0)
    total: Vector = z.sum(axis=1)
    return total


def _fisher(values: Matrix, counts: Counts, varies: NDArray[np.bool_]) -> Vector:
    """Fisher's -sum log p over prompts, p each prompt's permutation p-value of the row."""
    total: Vector = -np.log(counts / counts.shape[0]).sum(axis=1)
    return total


def _tippett(values: Matrix, counts: Counts, varies: NDArray[np.bool_]) -> Vector:
    """Tippett's -log of the smallest per-prompt p-value of the row."""
    smallest: Vector = -np.log(counts.min(axis=1) / counts.shape[0])
    return smallest


def _raw_sum(values: Matrix, counts: Counts, varies: NDArray[np.bool_]) -> Vector:
    """The plain sum of the per-prompt statistics (prompts with a wide null weigh most)."""
    total: Vector = values.sum(axis=1)
    return total


def _sum_z_tippett(
    values: Matrix, counts: Counts, varies: NDArray[np.bool_], *extra: Vector
) -> Vector:
    """The non-parametric combination of ``sum_z`` and ``tippett`` (and of the ``extra`` set
    statistics, the spread's) on the same rows: each row's set statistics ranked among the
    rows (at-least counts), the rows ordered by the smallest count, ties by the next
    (Tippett's minimum with its tie-break, ``_combined``); the row's value is its place in
    that order, larger more extreme."""
    parts = [_sum_z(values, counts, varies), _tippett(values, counts, varies), *extra]
    ranked = np.column_stack(
        [at_least_counts(part, max(1.0, float(np.max(np.abs(part)))), TIE_RTOL) for part in parts]
    )
    _, order = np.unique(np.sort(ranked, axis=1), axis=0, return_inverse=True)
    place: Vector = (order.max() - order.ravel()).astype(np.float64)
    return place


SPREAD = "sum_z+tippett+spread"
"""The combination that adds the spread (``_SpreadKernel``, ``_spread_set``) to the first
component's ``sum_z+tippett``."""


class _SpreadKernel:
    """The mean cosine distance between two answers of the original arm minus the same in the
    perturbed arm (pairs of distinct outputs): positive where the original answers are the
    more diverse. Two-sided in the set: ``_spread_set``."""

    def __init__(self, distances: Matrix, k_a: int) -> None:
        self._sums = _QuadraticSums(distances)
        n = distances.shape[0]
        self._pairs_a, self._pairs_b = k_a * (k_a - 1), (n - k_a) * (n - k_a - 1)
        self.bytes_per_split = 24 * n
        self.scale = self._sums.scale

    def __call__(self, masks: Masks) -> Vector:
        s_aa, _, s_bb = self._sums(masks)
        difference: Vector = s_aa / self._pairs_a - s_bb / self._pairs_b
        return difference


def _spread_set(values: Matrix, varies: NDArray[np.bool_]) -> Vector:
    """The set's spread statistic of every row: ``|sum_z|`` of the prompts' signed spread
    differences (two-sided: larger where the answers became more or less diverse, the same
    way over the prompts)."""
    total: Vector = np.abs(_sum_z(values, np.zeros(values.shape, dtype=np.int64), varies))
    return total


COMBINATIONS: dict[str, Callable[[Matrix, Counts, NDArray[np.bool_]], Vector]] = {
    "sum_z+tippett+spread": _sum_z_tippett,
    "sum_z+tippett": _sum_z_tippett,
    "sum_z": _sum_z,
    "fisher": _fisher,
    "tippett": _tippett,
    "sum": _raw_sum,
}
"""How the per-prompt statistics of one relabelling become the set's statistic, by name: each
takes the (rows, prompts) statistics, their at-least counts among the rows and which prompts
vary, and returns one value per row (larger is more extreme). ``sum_z+tippett+spread``
combines every component as ``sum_z+tippett`` does, the first one's (``auto``: jsd's) with
the set's spread statistic as a third part (``_set_level``)."""


def _with_spread(combination: str) -> bool:
    """Whether ``combination`` reads the prompts' spread differences."""
    return combination == SPREAD


@dataclass(frozen=True, repr=False)
class PromptSetResult:
    """Outcome of the pooled test of one perturbation over a set of prompts."""

    statistic: float
    """The set's statistic on the observed labels (for ``auto``: Tippett's ``-log`` of the
    smaller component p-value)."""
    p_value: float
    """``(1 + #{relabellings at least as extreme}) / (1 + B)``; ``# / #relabellings`` when
    ``exact``."""
    null_distribution: Vector
    """The set's statistic on every evaluated relabelling (read-only)."""
    prompt_statistics: Vector
    """(P,) each prompt's omega on its observed split (``auto``: its combined ``-log p``)."""
    prompt_p_values: Vector
    """(P,) each prompt's own permutation p-value of the omega, from the same relabellings
    (the spread does not enter it)."""
    prompt_effects: Vector
    """(P,) each prompt's statistic minus its mean over the evaluated relabellings."""
    prompt_z: Vector
    """(P,) ``prompt_effects`` over the statistic's standard deviation (NaN where it does not
    vary)."""
    degenerate: NDArray[np.bool_]
    """(P,) prompts whose statistic is the same on every relabelling: they add nothing."""
    k_a: tuple[int, ...]
    """Outputs of each prompt's original arm."""
    k_b: tuple[int, ...]
    """Outputs of each prompt's perturbed arm."""
    n_permutations: int
    """B as asked."""
    evaluated: int
    """Relabellings evaluated: B, or every one (fewer than B) when ``exact``."""
    exact: bool
    """True when every stratified relabelling was enumerated."""
    omega: str
    """The per-prompt statistic."""
    combination: str
    """How the prompts were combined (a key of ``COMBINATIONS``)."""
    similarity: str | None
    """Similarity behind a P0/P1 statistic; None for an embedding-level omega."""
    components: Mapping[str, ComponentResult] = field(default_factory=lambda: MappingProxyType({}))
    """``auto``: each component's own set-level test on the same relabellings, by name (with
    ``sum_z+tippett+spread``, jsd's includes the spread)."""
    driver: str | None = None
    """``auto``: the component with the smallest set-level p-value (None when every one is 1)."""

    @property
    def n_prompts(self) -> int:
        """P, the number of prompts."""
        return len(self.k_a)

    def __repr__(self) -> str:
        return (
            f"PromptSetResult(omega={self.omega!r}, combination={self.combination!r}, "
            f"statistic={self.statistic:.6g}, p_value={self.p_value:.6g}, "
            f"n_prompts={self.n_prompts}, evaluated={self.evaluated}, exact={self.exact})"
        )


@dataclass(frozen=True)
class _Prompt:
    """One prompt's kernels (one per component) and arm sizes."""

    kernels: tuple[Kernel, ...]
    k_a: int
    n: int


def _arms_iv(
    originals: Any, perturbed: Any, unit: str = "prompt"
) -> tuple[list[Matrix], list[Matrix]]:
    """Two equally long, non-empty sequences of (k, d) arms, one d throughout; ``unit`` names
    what each item is in the errors (a prompt, a pilot prompt)."""
    arms: dict[str, list[Matrix]] = {}
    for name, value in (("originals", originals), ("perturbed", perturbed)):
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
            raise ValueError(
                f"{name}: expected a sequence of (k, d) arrays, one per {unit}, "
                f"got {type(value).__name__}"
            )
        if len(value) == 0:
            raise ValueError(f"{name}: needs at least one {unit}")
        arms[name] = [as_embeddings(x, f"{name}[{i}]") for i, x in enumerate(value)]
    if len(arms["perturbed"]) != len(arms["originals"]):
        raise ValueError(
            f"perturbed: {len(arms['perturbed'])} arms for {len(arms['originals'])} originals; "
            f"one per {unit}"
        )
    d = arms["originals"][0].shape[1]
    for name, items in arms.items():
        for i, x in enumerate(items):
            if x.shape[1] != d:
                raise ValueError(
                    f"{name}[{i}]: embedding dimension {x.shape[1]} does not match "
                    f"originals[0]'s {d}"
                )
    return arms["originals"], arms["perturbed"]


def _prompt_set_test_iv(
    originals: Any,
    perturbed: Any,
    omega: Any,
    similarity: Any,
    combination: Any,
    n_permutations: Any,
    options: Mapping[str, Any],
) -> tuple[list[Matrix], list[Matrix], Omega, dict[str, Any], str, int]:
    spec = OMEGAS[choose(omega, "omega", OMEGAS)]
    resolved = spec.resolve_options(options)
    choose(similarity, "similarity", SIMILARITIES)
    if similarity != "cosine" and spec.level == "embedding":
        raise ValueError(
            f"similarity: omega {spec.name!r} is computed on the embeddings with its own "
            f"distance ({spec.matrix}); similarity {similarity!r} does not apply"
        )
    choose(combination, "combination", COMBINATIONS)
    b = as_positive_int(n_permutations, "n_permutations")
    a_arms, b_arms = _arms_iv(originals, perturbed)
    parts = spec.components or (spec.name,)
    cosine = (similarity == "cosine" and spec.level != "embedding") or "energy_cosine" in parts
    if cosine or _with_spread(combination):
        for name, items in (("originals", a_arms), ("perturbed", b_arms)):
            if np.all(np.linalg.norm(np.vstack(items), axis=1) > 0.0):
                continue  # every row nonzero; else name the first arm with a zero row
            for i, x in enumerate(items):
                _unit_rows(x, f"{name}[{i}]")
    return a_arms, b_arms, spec, resolved, combination, b


def prompt_set_test(
    originals: Sequence[ArrayLike],
    perturbed: Sequence[ArrayLike],
    *,
    omega: str = "auto",
    similarity: str = "cosine",
    combination: str = "sum_z+tippett+spread",
    n_permutations: int = 2000,
    rng: RngLike = None,
    **omega_options: Any,
) -> PromptSetResult:
    """Test whether a perturbation changes the output distribution of any prompt of a set.

    Parameters
    ----------
    originals, perturbed
        Equally long sequences, one item per prompt: the (k_a_i, d) embeddings of prompt i's
        original outputs and the (k_b_i, d) embeddings of its perturbed outputs (k >= 2; k may
        differ between prompts and arms, d may not).
    omega
        The per-prompt statistic (a key of ``OMEGAS``); ``"auto"`` (default) combines its
        components across prompts one by one, then the components (module docstring).
    similarity
        The pairwise similarity behind a P0/P1 statistic (``jsd`` and ``auto``'s jsd).
    combination
        How the per-prompt statistics of one relabelling are combined (``COMBINATIONS``):
        ``"sum_z+tippett+spread"`` (default: ``"sum_z+tippett"``, the first component's
        with the change in the answers' diversity as a third part, module docstring; the
        embeddings then need nonzero rows), ``"sum_z+tippett"`` (the
        non-parametric combination of the next two), ``"sum_z"`` (the sum of the statistics
        standardised over the relabellings), ``"tippett"``, ``"fisher"`` (on the per-prompt
        permutation p-values) or ``"sum"``.
    n_permutations
        B, the number of random stratified relabellings; all are enumerated instead when
        there are at most B.
    rng
        Seed or ``numpy.random.Generator``; the same seed gives the same result.
    **omega_options
        Options of a single omega (e.g. ``bins`` for jsd).
    """
    a_arms, b_arms, spec, options, combination, b = _prompt_set_test_iv(
        originals, perturbed, omega, similarity, combination, n_permutations, omega_options
    )
    relabelled = _relabel(
        a_arms, b_arms, spec, options, similarity, b, as_rng(rng), spread=_with_spread(combination)
    )
    return _result(relabelled, combination)


@dataclass(frozen=True)
class _Relabelled:
    """Every prompt's statistics on the observed labels and the relabellings, ranked among
    them: what any combination reads, and each prompt's own test."""

    values: Matrix
    """(rows, prompts, components); row 0 is the observed labelling."""
    counts: Counts
    """(rows, prompts, components): how many rows are at least as extreme (tie rule)."""
    varies: NDArray[np.bool_]
    """(prompts, components): the statistic is not the same on every row."""
    prompt_values: Matrix
    """(rows, prompts): each prompt's own test statistic (``auto``: its combination)."""
    prompt_p: Vector
    """(prompts,): each prompt's own permutation p-value on the rows."""
    spread: Matrix | None
    """(rows, prompts): each prompt's signed spread difference (``_SpreadKernel``); None when
    not evaluated."""
    spread_varies: NDArray[np.bool_] | None
    """(prompts,): the spread difference is not the same on every row."""
    exact: bool
    k_a: tuple[int, ...]
    """Each prompt's original arm."""
    k_b: tuple[int, ...]
    """Each prompt's perturbed arm."""
    spec: Omega
    n_permutations: int
    similarity: str


def _relabel(
    a_arms: list[Matrix],
    b_arms: list[Matrix],
    spec: Omega,
    options: dict[str, Any],
    similarity: str,
    b: int,
    gen: np.random.Generator,
    *,
    spread: bool = False,
) -> _Relabelled:
    """Evaluate every prompt on the observed labels and the relabellings (``spread``: and
    its spread difference, the last column, on the same rows)."""
    largest = max(x.shape[0] + y.shape[0] for x, y in zip(a_arms, b_arms, strict=True))
    with blas_for(largest):
        exact, values, scales = _relabelled(
            a_arms, b_arms, spec, options, similarity, spread, b, gen
        )
    k_a, k_b = tuple(x.shape[0] for x in a_arms), tuple(y.shape[0] for y in b_arms)
    return _ranked(values, scales, exact, k_a, k_b, spec, b, similarity, spread=spread)


def _ranked(
    values: Matrix,
    scales: Matrix,
    exact: bool,
    k_a: tuple[int, ...],
    k_b: tuple[int, ...],
    spec: Omega,
    b: int,
    similarity: str,
    *,
    spread: bool,
) -> _Relabelled:
    """Every prompt's (rows, prompts, columns) statistics ranked among the rows, with each
    prompt's own test (``spread``: the last column is its spread difference)."""
    spread_values, spread_varies = None, None
    if spread:
        spread_values = values[:, :, -1]
        spread_varies = _varies(spread_values, scales[:, -1])
        values = values[:, :, :-1]
    ranked = [_component_counts(values[:, :, c], scales[:, c]) for c in range(values.shape[2])]
    counts = np.stack([r[0] for r in ranked], axis=2)
    varies = np.stack([r[1] for r in ranked], axis=1)
    if values.shape[2] == 1:
        prompt_values, prompt_p = values[:, :, 0], counts[0, :, 0] / values.shape[0]
    else:
        prompt_values, prompt_p = _prompt_combined(values, counts)
    return _Relabelled(
        values,
        counts,
        varies,
        prompt_values,
        prompt_p,
        spread_values,
        spread_varies,
        exact,
        k_a,
        k_b,
        spec,
        b,
        similarity,
    )


def _prompt(
    a: Matrix, b: Matrix, spec: Omega, options: dict[str, Any], similarity: str, spread: bool
) -> _Prompt:
    """The kernels of one prompt: each component's statistic on the prompt's pooled matrix
    (a prompt whose every output is the same text gets a constant statistic: the kernels
    merge the rounding noise of equal values, ``_omega.merged_ties``), then (``spread``) its
    spread difference on the cosine distances."""
    z = np.vstack([a, b])
    k_a = a.shape[0]
    parts = [OMEGAS[name] for name in spec.components] if spec.components else [spec]
    kernels = []
    for part in parts:
        part_options = options if part is spec else dict(part.defaults)
        if part.from_embeddings is None:
            matrix = SIMILARITIES[similarity](z, "a or b")
        else:
            matrix = part.from_embeddings(z)
        kernels.append(part.build(matrix, k_a, part_options))
    if spread:
        kernels.append(_SpreadKernel(cosine_distance(z), k_a))
    return _Prompt(tuple(kernels), k_a, z.shape[0])


def _relabelled(
    a_arms: list[Matrix],
    b_arms: list[Matrix],
    spec: Omega,
    options: dict[str, Any],
    similarity: str,
    spread: bool,
    b: int,
    gen: np.random.Generator,
) -> tuple[bool, Matrix, Matrix]:
    """(exact, values, scales): the statistics of every row, shape (rows, prompts, columns),
    row 0 the observed labelling, and each column's tie scale per prompt (prompts,
    columns). Every relabelling when there are at most ``b``, else the observed one and
    ``b`` random ones (each prompt split independently, in prompt order, from ``b`` rows of
    uniforms as ``_permutation._random_splits`` draws them)."""
    k_a = [x.shape[0] for x in a_arms]
    n = [x.shape[0] + y.shape[0] for x, y in zip(a_arms, b_arms, strict=True)]
    sizes = [math.comb(n_i, k_i) for n_i, k_i in zip(n, k_a, strict=True)]
    if _product_at_most(sizes, b):
        prompts = [
            _prompt(x, y, spec, options, similarity, spread)
            for x, y in zip(a_arms, b_arms, strict=True)
        ]
        per_prompt = [
            _evaluate(p, _concat(_all_splits(p.n, p.k_a, _sizes(sizes[i], ENUMERATION_CHUNK))))
            for i, p in enumerate(prompts)
        ]
        grid = np.array(list(itertools.product(*(range(s) for s in sizes))), dtype=np.intp)
        values = np.stack([v[grid[:, i]] for i, v in enumerate(per_prompt)], axis=1)
        return True, values, _scales(prompts)
    masks = _stratified_masks(n, k_a, b, gen)
    values, scales = _evaluate_prompts(a_arms, b_arms, masks, spec, options, similarity, spread)
    return False, values, scales


def _evaluate_prompts(
    a_arms: list[Matrix],
    b_arms: list[Matrix],
    masks: list[NDArray[np.bool_]],
    spec: Omega,
    options: dict[str, Any],
    similarity: str,
    spread: bool,
) -> tuple[Matrix, Matrix]:
    """(values, scales): every prompt's statistics on its (rows, n_i) ``masks``, shape (rows,
    prompts, columns), and each column's tie scale per prompt (prompts, columns); prompts of
    one pooled size together where every component is stacked (``_stacked``)."""
    parts = spec.components or (spec.name,)
    columns = len(parts) + spread
    values = np.empty((masks[0].shape[0], len(masks), columns))
    scales = np.empty((len(masks), columns))
    stacked = stackable(parts, similarity)
    for members in _stacks([x.shape[0] + y.shape[0] for x, y in zip(a_arms, b_arms, strict=True)]):
        if stacked:
            pooled = [np.vstack([a_arms[i], b_arms[i]]) for i in members]
            jsd_options = options if spec.name == "jsd" else dict(OMEGAS["jsd"].defaults)
            sizes_a = np.array([a_arms[i].shape[0] for i in members], dtype=np.int64)
            kernels = StackedKernels(pooled, sizes_a, parts, jsd_options, spread)
            values[:, members] = _evaluate_stacked(kernels, [masks[i] for i in members])
            scales[members] = kernels.scales
            continue
        for i in members:
            prompt = _prompt(a_arms[i], b_arms[i], spec, options, similarity, spread)
            values[:, i] = _evaluate(prompt, masks[i])
            scales[i] = _scales([prompt])[0]
    return values, scales


def _product_at_most(sizes: list[int], b: int) -> bool:
    """Whether the product of ``sizes`` is at most ``b`` (without multiplying them all)."""
    total = 1
    for size in sizes:
        total *= size
        if total > b:
            return False
    return True


def _scales(prompts: list[_Prompt]) -> Matrix:
    """(prompts, columns): each kernel's tie scale."""
    return np.array([[k.scale for k in p.kernels] for p in prompts], dtype=np.float64)


def _stratified_masks(
    n: list[int], k_a: list[int], b: int, gen: np.random.Generator
) -> list[NDArray[np.bool_]]:
    """Each prompt's (1 + b, n_i) masks: the observed labelling, then ``b`` random splits
    drawn as ``_permutation._random_splits`` draws them one prompt after the other (the
    k_a smallest of n uniforms per row; the uniforms of consecutive prompts, a stream of
    doubles, are drawn together up to the memory budget)."""
    masks: list[NDArray[np.bool_]] = []
    start, budget = 0, max(1, MEMORY_BUDGET_BYTES // 8)
    while start < len(n):
        if b * n[start] > budget:  # a large prompt alone, in chunks of rows
            chunk = max(1, budget // n[start])
            found = _concat(_random_splits(n[start], k_a[start], b, chunk, gen))
            masks.append(_observed_first(found, k_a[start]))
            start += 1
            continue
        stop, total = start + 1, b * n[start]
        while stop < len(n) and total + b * n[stop] <= budget:
            total, stop = total + b * n[stop], stop + 1
        uniforms = gen.random(total)
        offsets = np.cumsum([0, *(b * size for size in n[start:stop])])
        block: list[NDArray[np.bool_] | None] = [None] * (stop - start)
        for size, k in set(zip(n[start:stop], k_a[start:stop], strict=True)):
            same = [j for j in range(stop - start) if (n[start + j], k_a[start + j]) == (size, k)]
            drawn = np.stack([uniforms[offsets[j] : offsets[j + 1]].reshape(b, size) for j in same])
            for j, found in zip(same, _smallest(drawn, k), strict=True):
                block[j] = _observed_first(found, k)
        masks.extend(m for m in block if m is not None)
        start = stop
    return masks


def _smallest(uniforms: NDArray[np.float64], k_a: int) -> NDArray[np.bool_]:
    """(P, rows, n) masks of the ``k_a`` smallest uniforms of every row, as
    ``_permutation._random_splits`` takes them (a row whose k_a-th and (k_a+1)-th smallest
    tie: its k_a smallest by ``argpartition``)."""
    kth = np.partition(uniforms, k_a - 1, axis=2)[:, :, k_a - 1 : k_a]
    masks: NDArray[np.bool_] = uniforms <= kth
    for p, row in zip(*np.nonzero(np.count_nonzero(masks, axis=2) != k_a), strict=True):
        masks[p, row] = False
        masks[p, row, np.argpartition(uniforms[p, row], k_a - 1)[:k_a]] = True
    return masks


def _observed_first(masks: NDArray[np.bool_], k_a: int) -> NDArray[np.bool_]:
    """The masks with the observed labelling (the first ``k_a`` outputs in group a) first."""
    observed = np.zeros((1, masks.shape[1]), dtype=bool)
    observed[0, :k_a] = True
    out: NDArray[np.bool_] = np.vstack([observed, masks])
    return out


SAME_SIZE_STACK = 4
"""Prompts of one pooled size evaluated together as they are; fewer are padded into
``_stacks``' size classes."""
SIZE_CLASS = 1.5
"""Ratio of the largest to the smallest pooled size a padded stack may hold."""


def _stacks(sizes: list[int]) -> list[list[int]]:
    """The prompts (indices) evaluated together: those of one pooled size where there are
    at least ``SAME_SIZE_STACK`` of them, the others by size class (padded to its largest)."""
    by_size: dict[int, list[int]] = {}
    for i, size in enumerate(sizes):
        by_size.setdefault(size, []).append(i)
    stacks = [members for members in by_size.values() if len(members) >= SAME_SIZE_STACK]
    rest = sorted((size, i) for i, size in enumerate(sizes) if len(by_size[size]) < SAME_SIZE_STACK)
    current: list[int] = []
    smallest = 0
    for size, i in rest:
        if current and size > SIZE_CLASS * smallest:
            stacks.append(current)
            current = []
        if not current:
            smallest = size
        current.append(i)
    if current:
        stacks.append(current)
    return stacks


def _evaluate_stacked(kernels: StackedKernels, masks: list[NDArray[np.bool_]]) -> Matrix:
    """(rows, P, columns): the stacked kernels on every prompt's (rows, n) masks, as many
    prompts (or, for one prompt, rows) per step as the memory budget allows."""
    rows = masks[0].shape[0]
    out = np.empty((len(masks), rows, kernels.scales.shape[1]))
    per_prompt = rows * kernels.bytes_per_split
    step = max(1, MEMORY_BUDGET_BYTES // per_prompt)
    chunk = (
        rows
        if per_prompt <= MEMORY_BUDGET_BYTES
        else max(1, MEMORY_BUDGET_BYTES // kernels.bytes_per_split)
    )
    for start in range(0, len(masks), step):
        block = slice(start, start + step)
        stacked = np.zeros((len(masks[block]), rows, kernels.n), dtype=bool)
        for j, m in enumerate(masks[block]):
            stacked[j, :, : m.shape[1]] = m
        for first in range(0, rows, chunk):
            out[block, first : first + chunk] = kernels(stacked[:, first : first + chunk], block)
    return out.transpose(1, 0, 2)


def _concat(chunks: Any) -> NDArray[np.bool_]:
    masks: NDArray[np.bool_] = np.vstack(list(chunks))
    return masks


def _evaluate(prompt: _Prompt, masks: NDArray[np.bool_]) -> Matrix:
    """(splits, components): each component's statistic on each split, in memory-bounded
    chunks."""
    chunk = max(1, MEMORY_BUDGET_BYTES // sum(k.bytes_per_split for k in prompt.kernels))
    out = np.empty((masks.shape[0], len(prompt.kernels)))
    for start in range(0, masks.shape[0], chunk):
        block = masks[start : start + chunk]
        for c, kernel in enumerate(prompt.kernels):
            out[start : start + chunk, c] = kernel(block)
    return out


def _tolerances(values: Matrix, scales: Vector) -> Matrix:
    """The engine's tie tolerance of every value."""
    tol: Matrix = TIE_RTOL * (np.abs(values) + scales)
    return tol


def _component_counts(values: Matrix, scales: Vector) -> tuple[Counts, NDArray[np.bool_]]:
    """At-least counts of every (row, prompt) among the rows, and which prompts vary."""
    return at_least_counts_columns(values, scales, TIE_RTOL), _varies(values, scales)


def _varies(values: Matrix, scales: Vector) -> NDArray[np.bool_]:
    """Which prompts' statistics (columns) are not the same on every row, within the tie
    tolerance."""
    width = values.max(axis=0) - values.min(axis=0)
    varies: NDArray[np.bool_] = width > _tolerances(values.max(axis=0, keepdims=True), scales)[0]
    return varies


def _set_p_value(combined: Vector) -> float:
    """Share of rows whose combined statistic is at least the observed one (row 0)."""
    scale = max(1.0, float(np.max(np.abs(combined))))
    count = at_least_counts(combined, scale, TIE_RTOL)[0]
    return float(count / combined.size)


@dataclass(frozen=True)
class _SetLevel:
    """The set's test by one combination."""

    statistic: float
    p_value: float
    null: Vector
    """The combined statistic of every row (row 0 the observed one)."""
    components: dict[str, ComponentResult]


def _set_level(relabelled: _Relabelled, combination: str) -> _SetLevel:
    """Combine each component's per-prompt statistics across prompts (the first one's with
    the spread, for ``sum_z+tippett+spread``), then (``auto``) the components by their
    non-parametric combination on the same rows."""
    values, counts, varies = relabelled.values, relabelled.counts, relabelled.varies
    combine_prompts = COMBINATIONS[combination]
    columns = [
        combine_prompts(values[:, :, c], counts[:, :, c], varies[:, c])
        for c in range(values.shape[2])
    ]
    if _with_spread(combination):
        assert relabelled.spread is not None, "relabelled without spread=True"
        assert relabelled.spread_varies is not None
        spread = _spread_set(relabelled.spread, relabelled.spread_varies)
        columns[0] = _sum_z_tippett(values[:, :, 0], counts[:, :, 0], varies[:, 0], spread)
    set_values = np.column_stack(columns)
    if set_values.shape[1] == 1:
        combined = set_values[:, 0]
        return _SetLevel(float(combined[0]), _set_p_value(combined), combined, {})
    scales = [max(1.0, float(np.max(np.abs(col)))) for col in set_values.T]
    combination_result = combine(set_values, scales, TIE_RTOL)
    evaluated = slice(0, None) if relabelled.exact else slice(1, None)
    components = {
        name: component_result(
            name,
            OMEGAS[name].aspect,
            float(set_values[0, c]),
            float(combination_result.component_p[c]),
            set_values[evaluated, c],
        )
        for c, name in enumerate(relabelled.spec.components)
    }
    combined = combination_result.combined
    return _SetLevel(float(combined[0]), combination_result.p_value, combined, components)


def _result(relabelled: _Relabelled, combination: str) -> PromptSetResult:
    """The set's test by ``combination``, with each prompt's own test."""
    set_level = _set_level(relabelled, combination)
    evaluated = slice(0, None) if relabelled.exact else slice(1, None)
    prompt_values = relabelled.prompt_values
    effects, zs = _prompt_summaries(prompt_values[evaluated], prompt_values[0])
    null = set_level.null[evaluated].copy()
    degenerate = ~relabelled.varies.any(axis=1)
    arrays = [null, prompt_values[0].copy(), relabelled.prompt_p.copy(), effects, zs, degenerate]
    for arr in arrays:
        arr.setflags(write=False)
    spec = relabelled.spec
    return PromptSetResult(
        statistic=set_level.statistic,
        p_value=set_level.p_value,
        null_distribution=arrays[0],
        prompt_statistics=arrays[1],
        prompt_p_values=arrays[2],
        prompt_effects=arrays[3],
        prompt_z=arrays[4],
        degenerate=arrays[5],
        k_a=relabelled.k_a,
        k_b=relabelled.k_b,
        n_permutations=relabelled.n_permutations,
        evaluated=int(null.size),
        exact=relabelled.exact,
        omega=spec.name,
        combination=combination,
        similarity=relabelled.similarity if spec.level != "embedding" else None,
        components=MappingProxyType(set_level.components),
        driver=driver(set_level.components) if set_level.components else None,
    )


def _prompt_combined(values: Matrix, counts: Counts) -> tuple[Matrix, Vector]:
    """Each prompt's own combined (``auto``) test on the rows (``combine_counts`` of each
    prompt, all at once): its statistic on every row (``-log`` of the smaller component
    p-value) and its p-value."""
    rows = values.shape[0]
    ordered = np.sort(counts, axis=2)
    observed = ordered[0]
    smaller = np.zeros(ordered.shape[:2], dtype=bool)
    equal = np.ones(ordered.shape[:2], dtype=bool)
    for c in range(ordered.shape[2]):
        smaller |= equal & (ordered[:, :, c] < observed[:, c])
        equal &= ordered[:, :, c] == observed[:, c]
    statistics: Matrix = -np.log(ordered[:, :, 0] / rows)
    p_values: Vector = np.count_nonzero(smaller | equal, axis=0) / rows
    return statistics, p_values


def _prompt_summaries(null: Matrix, observed: Vector) -> tuple[Vector, Vector]:
    """Per prompt: the statistic minus its null mean, and that over the null's sd
    (``null_summary`` of each prompt, all at once)."""
    by_prompt = np.ascontiguousarray(null.T)
    effects: Vector = observed - by_prompt.mean(axis=1)
    single = by_prompt.shape[1] == 1
    spread = np.zeros(observed.size) if single else by_prompt.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        zs: Vector = np.where(spread > 0, effects / spread, np.nan)
    return effects, zs
