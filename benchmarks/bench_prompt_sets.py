"""Prompt sets: the pooled test's power per model call, against per-prompt Holm and MET.

Three parts (``python -m benchmarks prompt_sets``; ``--quick`` for a smoke run):

* **design**: which across-prompt combination (``dbpa.stats.COMBINATIONS``, and the
  non-parametric combinations of two of them, ``PAIRS``) has the most power, on synthetic
  sets (``_prompt_set_cells``: 20 prompts with different answer distributions, k = 10 per arm)
  where a perturbation moves 10%, 30% or 100% of the prompts; per-prompt tests with Holm on
  the same relabellings; type-I error where nothing moves. Every candidate reads the same
  relabellings of the same outputs.
* **real**: real outputs of the embedded model (``prompt_set_data``: 20 prompts x 40 outputs
  per arm); each audit draws 10 outputs per arm and prompt without replacement, and the same
  draws go to the pooled test (embeddings), per-prompt Holm (embeddings) and Model Equality
  Testing's ``mmd_hamming`` permutation test (Gao, Liang & Guestrin, ICLR 2025; the
  ``model-equality-testing`` package, a benchmark-only dependency) on the SmolLM2 token ids
  and on Unicode code points (its README's tokenisation). Cells: the three subtle changes,
  the original against itself (type-I), and mixtures where the system-prompt change moves
  10%, 30% or 100% of the prompts (drawn at random per audit; the others' "perturbed"
  outputs are other original ones).
* **curve**: the product's pooled test (``prompt_set_test``, its defaults) against
  per-prompt Holm on its per-prompt p-values, where 30% of the prompts move, over the size
  of each synthetic shape, and the most any combination of those per-prompt p-values can
  reach (``_set_bound``): where twice Holm's power can be reached at all.
* **bound_real**: the same bound on the real system-prompt change moving 10% and 30% of the
  prompts (and none and all of them), beside the default and Holm on the same draws, and a
  test reading the embeddings across prompts (``_shared_direction``: do the moved prompts
  move one way?).
* **timing**: B = 2000 relabellings over 500 prompts x k = 10.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._prompt_set_cells import prompt_models, prompt_set
from benchmarks._results import ResultFile
from benchmarks._set_bound import set_bound
from benchmarks._shared_direction import shared_direction_p
from dbpa.stats import OMEGAS, correct
from dbpa.stats._combined import combine
from dbpa.stats._permutation import TIE_RTOL
from dbpa.stats._prompt_sets import (
    COMBINATIONS,
    _relabel,
    _Relabelled,
    _set_level,
    _set_p_value,
    _SetLevel,
    _spread_set,
    _sum_z_tippett,
)

ALPHA = 0.05
SEED = 20261127
PAIRS = (("sum_z", "fisher"), ("fisher", "tippett"))
"""Two combinations referred jointly to their permutation law (Tippett's NPC of the two);
``sum_z+tippett`` is one of ``COMBINATIONS``."""
DATA = Path(__file__).parent / "data" / "prompt_sets_smollm2.npz"
BOUND_COLUMNS = [
    "pooled (default)",
    "per-prompt Holm",
    "ratio",
    "bound",
    "bound / Holm",
    "Holm in the bound's model",
]
"""The columns of the tables that set the default against Holm and the combination bound."""


def _npc(levels: dict[str, _SetLevel], names: tuple[str, str]) -> float:
    """Tippett's combination of two combinations' set statistics on the same rows."""
    values = np.column_stack([levels[name].null for name in names])
    scales = [max(1.0, float(np.abs(col).max())) for col in values.T]
    return combine(values, scales, TIE_RTOL).p_value


def _spread_p_values(relabelled: _Relabelled) -> dict[str, float]:
    """The spread's own set-level p-value, and that of the alternative to the default's way
    of adding it: the spread as a third component beside each component's
    ``sum_z+tippett`` (the default joins it to the first component's, jsd's)."""
    assert relabelled.spread is not None
    assert relabelled.spread_varies is not None
    spread = _spread_set(relabelled.spread, relabelled.spread_varies)
    values, counts, varies = relabelled.values, relabelled.counts, relabelled.varies
    columns = [
        _sum_z_tippett(values[:, :, c], counts[:, :, c], varies[:, c])
        for c in range(values.shape[2])
    ]
    table = np.column_stack([*columns, spread])
    scales = [max(1.0, float(np.abs(col).max())) for col in table.T]
    return {
        "spread alone": _set_p_value(spread),
        "spread apart": combine(table, scales, TIE_RTOL).p_value,
    }


def _holm(p_values: np.ndarray) -> bool:
    return bool(correct(p_values, method="holm", alpha=ALPHA).reject.any())


def _design_rejections(relabelled: _Relabelled) -> dict[str, bool]:
    levels = {name: _set_level(relabelled, name) for name in COMBINATIONS}
    out = {name: level.p_value <= ALPHA for name, level in levels.items()}
    for pair in PAIRS:
        out["+".join(pair)] = _npc(levels, pair) <= ALPHA
    for name, p_value in _spread_p_values(relabelled).items():
        out[name] = p_value <= ALPHA
    out["per-prompt Holm"] = _holm(relabelled.prompt_p)
    return out


def _relabel_arms(originals, perturbed, omega: str, b: int, seed: int) -> _Relabelled:
    arms_a = [np.asarray(x, dtype=np.float64) for x in originals]
    arms_b = [np.asarray(x, dtype=np.float64) for x in perturbed]
    spec = OMEGAS[omega]
    gen = np.random.default_rng(seed)
    return _relabel(arms_a, arms_b, spec, {}, "cosine", b, gen, spread=True)


def design(result_file: ResultFile, quick: bool = False) -> None:
    """Power of each combination and of per-prompt Holm on the synthetic cells."""
    n_prompts, k, b = 20, 10, 999
    n = 40 if quick else 200
    cells: list[tuple[str, float, float]] = [("none", 0.0, 0.0)]
    for shape, size in (("new answer type", 0.3), ("drift", 0.25)):
        cells += [(shape, size, share) for share in (0.1, 0.3, 1.0)]
    names = [
        *COMBINATIONS,
        *("+".join(pair) for pair in PAIRS),
        "spread apart",
        "spread alone",
        "per-prompt Holm",
    ]
    result_file.note(
        f"[prompt_sets design] {n_prompts} prompts, k={k} per arm, omega=auto, B={b}, "
        f"{n} audits per cell, alpha={ALPHA}"
    )
    start = time.perf_counter()
    rows = []
    for c, (shape, size, share) in enumerate(cells):
        rng = np.random.default_rng(SEED + c)
        counts = dict.fromkeys(names, 0)
        for _ in range(n):
            models = prompt_models(rng, n_prompts)
            moved = round(share * n_prompts)
            originals, perturbed = prompt_set(
                rng, models, k, moved=moved, shape=shape if moved else "drift", size=size
            )
            relabelled = _relabel_arms(originals, perturbed, "auto", b, int(rng.integers(2**32)))
            for name, rejected in _design_rejections(relabelled).items():
                counts[name] += rejected
        label = "none (type-I)" if share == 0 else f"{shape} {size}"
        rows.append([label, f"{share:.0%}", *(f"{counts[m] / n:.3f}" for m in names)])
    result_file.table("rejection rate per combination", ["cell", "moved", *names], rows)
    print(f"design: {time.perf_counter() - start:.0f} s")


CURVE_SIZES = {"new answer type": (0.15, 0.2, 0.3, 0.4), "drift": (0.1, 0.15, 0.2, 0.25, 0.3)}
"""Effect sizes of the ``curve`` part, per synthetic shape (the design's sizes among them)."""


def curve(result_file: ResultFile, quick: bool = False) -> None:
    """Power of the default pooled test and of per-prompt Holm (its per-prompt p-values, the
    same relabellings) where 6 of 20 prompts move, over each shape's size; their ratio; and
    the most any combination of those per-prompt p-values can reach (``_set_bound``)."""
    from dbpa.stats import prompt_set_test

    n_prompts, k, b, moved = 20, 10, 999, 6
    n = 40 if quick else 200
    result_file.note(
        f"[prompt_sets curve] {n_prompts} prompts, {moved} moved, k={k} per arm, defaults "
        f"(auto, sum_z+tippett+spread), B={b}, {n} audits per cell, alpha={ALPHA}"
    )
    start = time.perf_counter()
    rows = []
    for c, (shape, size) in enumerate((s, z) for s, sizes in CURVE_SIZES.items() for z in sizes):
        rng = np.random.default_rng(SEED + 100 + c)
        pooled = holm = 0
        moved_p = []
        for _ in range(n):
            models = prompt_models(rng, n_prompts)
            originals, perturbed = prompt_set(rng, models, k, moved=moved, shape=shape, size=size)
            result = prompt_set_test(
                originals, perturbed, n_permutations=b, rng=int(rng.integers(2**32))
            )
            pooled += result.p_value <= ALPHA
            holm += _holm(result.prompt_p_values)
            moved_p.append(result.prompt_p_values[:moved])
        bound = set_bound(np.concatenate(moved_p), n_prompts, moved, b, ALPHA, rng)
        ratio = f"{pooled / holm:.1f}" if holm else "inf"
        rows.append(
            [
                shape,
                f"{size:g}",
                f"{pooled / n:.3f}",
                f"{holm / n:.3f}",
                ratio,
                f"{bound.power:.3f}",
                f"{bound.power / (holm / n):.1f}" if holm else "inf",
                f"{bound.holm:.3f}",
            ]
        )
    result_file.table(
        "rejection rate where 30% of the prompts move",
        ["shape", "size", *BOUND_COLUMNS],
        rows,
    )
    print(f"curve: {time.perf_counter() - start:.0f} s")


# --------------------------------------------------------------------------- real outputs


def _met_package_p_value(
    x_tokens: list[np.ndarray], y_tokens: list[np.ndarray], b: int, seed: int
) -> float:
    """Model Equality Testing's own permutation test of ``mmd_hamming`` (its package): the
    MMD with a Hamming kernel, 0 between outputs of different prompts, and ``b`` permutations
    of the pooled outputs drawn by ``torch.randperm`` after ``torch.manual_seed(seed)``."""
    import torch
    from model_equality_testing.algorithm import run_two_sample_test
    from model_equality_testing.distribution import CompletionSample

    def as_sample(arms: list[np.ndarray]) -> Any:
        prompts = np.concatenate([np.full(len(a), i) for i, a in enumerate(arms)])
        return CompletionSample(prompts=prompts, completions=np.vstack(arms), m=len(arms))

    torch.manual_seed(seed)
    p_value, _ = run_two_sample_test(
        as_sample(x_tokens),
        as_sample(y_tokens),
        pvalue_type="permutation_pvalue",
        stat_type="mmd_hamming",
        b=b,
    )
    return float(p_value)


def _met_p_value(
    x_tokens: list[np.ndarray], y_tokens: list[np.ndarray], b: int, seed: int
) -> float:
    """The same test as ``_met_package_p_value``, the kernel computed once and indexed per
    permutation (the package recomputes it for each: 0.1-0.3 s a permutation here). The same
    statistic (the normalised Hamming kernel is the share of equal positions, padding
    included; pairs of different prompts and self-pairs left out of the sums and the counts),
    the same ``torch.randperm`` draws and the package's p-value, ``mean(null >= observed)``
    without the + 1: ``real`` checks that both give the same p-values."""
    import torch

    seqs = np.vstack([*x_tokens, *y_tokens])
    prompts = np.concatenate([np.full(len(a), i) for i, a in enumerate(x_tokens)] * 2)
    n_x = sum(len(a) for a in x_tokens)
    same = (prompts[:, None] == prompts[None, :]).astype(np.float64)
    np.fill_diagonal(same, 0.0)
    kernel = np.zeros(same.shape)
    for column in seqs.T:
        kernel += column[:, None] == column[None, :]
    weighted = kernel / seqs.shape[1] * same

    def statistic(in_x: np.ndarray) -> np.ndarray:
        x = in_x.astype(np.float64)
        y = 1.0 - x

        def pair_sums(matrix: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
            return np.einsum("bi,bi->b", u @ matrix, v)

        return (
            pair_sums(weighted, x, x) / pair_sums(same, x, x)
            - 2.0 * pair_sums(weighted, x, y) / pair_sums(same, x, y)
            + pair_sums(weighted, y, y) / pair_sums(same, y, y)
        )

    torch.manual_seed(seed)
    masks = np.zeros((b, len(seqs)), dtype=bool)
    for i in range(b):
        masks[i, torch.randperm(len(seqs)).numpy()[:n_x]] = True
    observed = np.zeros((1, len(seqs)), dtype=bool)
    observed[0, :n_x] = True
    null = statistic(masks)
    return float(np.mean(null >= statistic(observed)[0]))


def _unicode(texts: np.ndarray, length: int) -> np.ndarray:
    """Each text as its Unicode code points, padded with -1 (MET's ``tokenize_unicode``)."""
    out = np.full((len(texts), length), -1, dtype=np.int64)
    for i, text in enumerate(texts):
        codes = [ord(ch) for ch in str(text)][:length]
        out[i, : len(codes)] = codes
    return out


Draw = Callable[[np.random.Generator], tuple[list[np.ndarray], list[np.ndarray]]]


Picks = list[tuple[tuple[int, np.ndarray], tuple[int, np.ndarray]]]
"""Per prompt, (arm, rows) of its original and of its perturbed outputs in the cached data."""


def _draw_cell(
    shape: tuple[int, int, int], arm: int, moved: int | None
) -> Callable[[np.random.Generator], Picks]:
    """Index draws of one cell of real outputs, ``shape`` = (prompts, outputs per arm, k):
    ``moved`` prompts drawn at random per audit take their perturbed outputs from ``arm``
    (all of them when None), the others from other outputs of the original arm."""
    n_prompts, outputs, k = shape

    def draw(rng: np.random.Generator) -> Picks:
        out = []
        chosen = rng.permutation(n_prompts)[: n_prompts if moved is None else moved]
        for p in range(n_prompts):
            order = rng.permutation(outputs)
            a_rows = order[:k]
            if arm == 0 or p not in chosen:
                b_arm, b_rows = 0, order[k : 2 * k]  # other original outputs
            else:
                b_arm, b_rows = arm, rng.choice(outputs, size=k, replace=False)
            out.append(((0, a_rows), (b_arm, b_rows)))
        return out

    return draw


def _arrays(picks: Picks, source: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The picked rows of ``source`` (arms x prompts x outputs x ...): originals, perturbed."""
    x = [source[0, p, rows_a] for p, ((_, rows_a), _) in enumerate(picks)]
    y = [source[arm, p, rows_b] for p, (_, (arm, rows_b)) in enumerate(picks)]
    return x, y


def real(
    result_file: ResultFile,
    quick: bool = False,
    k: int = 10,
    subtle_only: bool = False,
    audits: int | None = None,
) -> None:
    """Power of the pooled test, per-prompt Holm and MET on the same real outputs, k per arm
    and prompt (``subtle_only``: the type-I cell and the three subtle changes), ``audits``
    per cell (default 100; 20 when ``quick``)."""
    import warnings

    os.environ.setdefault("TQDM_DISABLE", "1")
    warnings.filterwarnings("ignore", module="tqdm")
    data = np.load(DATA)
    arms = [str(a) for a in data["arms"]]
    emb = data["embeddings"].astype(np.float64)
    tokens = data["tokens"].astype(np.int64)
    texts = data["texts"]
    n_arms, n_prompts, outputs = emb.shape[:3]
    width = int(max(len(str(t)) for t in texts.ravel()))
    chars = _unicode(texts.ravel(), width).reshape(n_arms, n_prompts, outputs, width)
    b, b_met = 999, 199
    n = audits or (20 if quick else 100)
    result_file.note(
        f"[prompt_sets real] {n_prompts} prompts x {outputs} outputs per arm of the embedded "
        f"model; {n} audits per cell drawing k={k} per arm and prompt without replacement; "
        f"alpha={ALPHA}; B: dbpa {b} (pooled and per-prompt from the same relabellings), "
        f"MET {b_met}"
    )
    system = arms.index("system_friendly")

    if 2 * k > outputs:
        raise ValueError(f"k: a null audit draws 2k = {2 * k} of the {outputs} original outputs")
    shape = (n_prompts, outputs, k)
    cells = [("original vs original (type-I)", _draw_cell(shape, 0, None))]
    cells += [(name, _draw_cell(shape, a, None)) for a, name in enumerate(arms) if a > 0]
    for share in () if subtle_only else (0.1, 0.3):
        moved = round(share * n_prompts)
        cells.append((f"system_friendly on {share:.0%}", _draw_cell(shape, system, moved)))
    pooled = ["sum_z", "fisher", "sum_z+tippett", "sum_z+tippett+spread"]
    methods = [
        *(f"pooled {c}" for c in pooled),
        "spread apart",
        "spread alone",
        "per-prompt Holm",
        "MET tokens",
        "MET unicode",
    ]

    check_rng = np.random.default_rng(SEED)
    agree = []
    installed = importlib.util.find_spec("model_equality_testing") is not None
    for c in range(0 if audits or not installed else 3):  # the package takes minutes
        x, y = _arrays(_draw_cell(shape, system, None)(check_rng), tokens)
        agree.append((_met_package_p_value(x, y, b_met, c), _met_p_value(x, y, b_met, c)))
    result_file.note(
        f"MET p-values, its package against the benchmark's indexing of its kernel: {agree}"
        if installed
        else "MET's package is not installed: its p-values not checked against the benchmark's"
    )
    start = time.perf_counter()
    rows = []
    for c, (label, draw) in enumerate(cells):
        rng = np.random.default_rng(SEED + 100 + c)
        counts = dict.fromkeys(methods, 0)
        for _ in range(n):
            picks = draw(rng)
            seed = int(rng.integers(2**32))
            relabelled = _relabel_arms(*_arrays(picks, emb), "auto", b, seed)
            levels = {name: _set_level(relabelled, name) for name in pooled}
            for name in pooled:
                counts[f"pooled {name}"] += levels[name].p_value <= ALPHA
            for name, p_value in _spread_p_values(relabelled).items():
                counts[name] += p_value <= ALPHA
            counts["per-prompt Holm"] += _holm(relabelled.prompt_p)
            for name, seqs in (("MET tokens", tokens), ("MET unicode", chars)):
                counts[name] += _met_p_value(*_arrays(picks, seqs), b_met, seed % 2**31) <= ALPHA
        rows.append([label, *(f"{counts[m] / n:.2f}" for m in methods)])
        print(rows[-1], f"{time.perf_counter() - start:.0f} s", flush=True)
    result_file.table(
        f"rejection rate, {n_prompts} prompts x k={k} per arm (the same draws for every method)",
        ["cell", *methods],
        rows,
    )
    print(f"real: {time.perf_counter() - start:.0f} s")


# --------------------------------------------------------------------------- bound on real


def bound_real(result_file: ResultFile, quick: bool = False, audits: int | None = None) -> None:
    """Where the real system-prompt change moves none, 2, 6 or all of the 20 prompts
    (k = 10): the default pooled test, per-prompt Holm, the most a combination of the
    per-prompt p-values can reach (``_set_bound``, from the moved prompts' p-values of these
    audits; where some but not all moved), and the shared-direction test, on the same draws
    (``audits`` per cell, default 500)."""
    data = np.load(DATA)
    arms = [str(a) for a in data["arms"]]
    emb = data["embeddings"].astype(np.float64)
    _, n_prompts, outputs = emb.shape[:3]
    system = arms.index("system_friendly")
    k, b = 10, 999
    n = audits or (40 if quick else 500)
    start = time.perf_counter()
    rows = []
    for c, moved in enumerate((0, 2, 6, n_prompts)):
        rng = np.random.default_rng(SEED + 300 + c)
        draw = _draw_cell((n_prompts, outputs, k), system, moved)
        moved_p, counts = [], dict.fromkeys(("pooled", "holm", "shared"), 0)
        for _ in range(n):
            picks = draw(rng)
            x, y = _arrays(picks, emb)
            relabelled = _relabel_arms(x, y, "auto", b, int(rng.integers(2**32)))
            moved_p += [relabelled.prompt_p[p] for p, (_, (arm, _)) in enumerate(picks) if arm]
            counts["pooled"] += _set_level(relabelled, "sum_z+tippett+spread").p_value <= ALPHA
            counts["holm"] += _holm(relabelled.prompt_p)
            counts["shared"] += shared_direction_p(x, y, b, rng) <= ALPHA
        holm = counts["holm"] / n
        if 0 < moved < n_prompts:  # the bound of "which `moved` of them moved"
            bound = set_bound(np.array(moved_p), n_prompts, moved, b, ALPHA, rng)
            over_holm = f"{bound.power / holm:.1f}" if holm else "inf"
            bounds = [f"{bound.power:.3f}", over_holm, f"{bound.holm:.3f}"]
        else:
            bounds = ["-", "-", "-"]
        rows.append(
            [
                f"system_friendly on {moved / n_prompts:.0%}" if moved else "none (type-I)",
                f"{counts['pooled'] / n:.3f}",
                f"{holm:.3f}",
                f"{counts['pooled'] / n / holm:.1f}" if holm else "-",
                *bounds,
                f"{counts['shared'] / n:.3f}",
            ]
        )
        print(rows[-1], f"{time.perf_counter() - start:.0f} s", flush=True)
    result_file.table(
        f"\n[prompt_sets bound_real] {n_prompts} prompts x k={k} per arm, real outputs, "
        f"{n} audits per cell, B={b}",
        ["cell", *BOUND_COLUMNS, "shared direction"],
        rows,
    )


# --------------------------------------------------------------------------- timing


def timing(result_file: ResultFile, quick: bool = False) -> None:
    """Seconds of one pooled test at B=2000 over 500 prompts x k=10 (d=384)."""
    from dbpa.stats import prompt_set_test

    n_prompts = 50 if quick else 500
    rng = np.random.default_rng(SEED)
    models = prompt_models(rng, n_prompts)
    originals, perturbed = prompt_set(rng, models, 10, moved=0, shape="drift", size=0.0)
    rows = []
    for omega in ("energy_cosine", "jsd", "auto"):
        seconds = []
        for r in range(3):
            t = time.perf_counter()
            prompt_set_test(originals, perturbed, omega=omega, n_permutations=2000, rng=r)
            seconds.append(time.perf_counter() - t)
        rows.append([omega, f"{min(seconds):.2f}", f"{np.median(seconds):.2f}"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    result_file.table(
        f"\n[prompt_sets timing] B=2000, {n_prompts} prompts x k=10 per arm, d=384 "
        f"(load average before: {load:.1f})",
        ["omega", "best of 3 s", "median s"],
        rows,
    )


def main(quick: bool = False) -> None:
    result_file = ResultFile("prompt_sets", quick)
    design(result_file, quick)
    curve(result_file, quick)
    real(result_file, quick)
    real(result_file, quick, k=20, subtle_only=True)
    bound_real(result_file, quick)
    timing(result_file, quick)
    result_file.write()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_prompt_sets")
    parser.add_argument(
        "parts", nargs="*", choices=["design", "curve", "real", "real20", "bound_real", "timing"]
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--audits", type=int, help="audits per real-output cell (default 100)")
    args = parser.parse_args()
    printed = ResultFile("prompt_sets", args.quick)  # printed only: a part is not the suite's run
    parts = {
        "design": design,
        "curve": curve,
        "real": lambda r, quick: real(r, quick, audits=args.audits),
        "real20": lambda r, quick: real(r, quick, k=20, subtle_only=True, audits=args.audits),
        "bound_real": lambda r, quick: bound_real(r, quick, audits=args.audits),
        "timing": timing,
    }
    for part in args.parts or list(parts):
        parts[part](printed, args.quick)
