"""What an audit costs on a priced hosted model: fixed k, sequential, and each in batches.

No model is called and nothing is spent: the decisions come from recorded outputs of the
embedded model, the cost from their token counts at the list and batch prices litellm's
price map gives ``openai/gpt-4o-mini`` (its ``*_cost_per_token_batches``: half the list).

* **Persona study** (``examples/personas.yaml``: the original and 8 personas, k = 20, omega
  jsd): ``data/personas_smollm2_minilm.npz``, the embeddings of 20 recorded outputs per arm.
  Prompt tokens: litellm's counter for gpt-4o-mini on each arm's messages; completion
  tokens: the config's ``max_tokens`` (80) per output, as this file records no token counts
  (an upper bound; every design pays the same per output, so the ratios do not depend on it).
* **Prompt set** (``examples/prompt_set.yaml``: 20 questions, the original and its 3
  perturbations, a system prompt, a lower temperature and typos, k = 8, omega auto, the
  product's pooled test ``SET_COMBINATION``): ``data/prompt_set_example_smollm2.npz``, the
  example's own run (``prompt_set_example_data.py``: its 8 outputs per arm and question, their
  completion tokens). Prompt tokens: litellm's counter for gpt-4o-mini on each arm's messages.

Designs: the fixed audit (every arm k outputs, permutation p-values corrected by Holm at
alpha 0.05, B = 1999), and sequential audits up to the same k (``dbpa.stats.sequential_family``
/ ``set_sequential_family``, the outputs they actually use): **before**, ``SequentialSpec()``'s
defaults (first look 8, 4 looks, final weight 0.7, futility 0.2); **after**, the designs each
study's ``after`` names, chosen by measurement on other orders of the outputs than the check's
(benchmarks/README.md, ``cost``), each with the example's omega unless it names another (the
persona study's jsd is pinned to reproduce the paper; ``after, default omega`` runs the product's
default omega). Each at list price and in provider batches; a design's cost
is its outputs times the mean cost of an output over the family's arms.

**Same decisions**: per perturbation, changed or not after the family's correction, all
equal to the fixed audit's. Two sets of seeds: the **benchmark's** (the recorded outputs in
their recorded order, the sequential design's paths drawn with seeds 0-9) and a **check**
(the outputs of every arm, and of every prompt, in 10 other random orders, seeded 1-10: a
sequential audit sees the first outputs first; the fixed audit, recomputed on each, differs
only by its permutation seed, as every arm has k outputs recorded). Beside them, the fixed audit
against itself with other permutation seeds: how often a decision flips on the test's own
randomness, the floor under any agreement. The goal of issue 53: the sequential batch audit
at or below 0.35x the fixed audit at list price, with the same decisions.

**Where a look can stop a test**: each perturbation's p-value at each of the study's
``looks`` (outputs per arm and prompt, recorded order), at each omega its designs run. A look
stops a test only where its p-value is below the look's share of Holm's lone threshold
alpha/m (the paths' boundary is a rank among them), so these bound what any design can save
(benchmarks/README.md, ``cost``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._results import ResultFile
from dbpa.analysis import SequentialSpec
from dbpa.config import load_config
from dbpa.llm import batch_prices, litellm, model_prices
from dbpa.plan import plan_audit
from dbpa.set_analysis import SET_COMBINATION
from dbpa.specs import ModelSpec
from dbpa.stats import (
    SequentialDesign,
    SequentialFamily,
    correct,
    permutation_test,
    prompt_set_test,
    sequential_family,
    set_sequential_family,
)

ROOT = Path(__file__).parents[1]
DATA = Path(__file__).parent / "data"
MODEL = "openai/gpt-4o-mini"
ALPHA = 0.05
B = 1999
SEED = 20261206
PERSONA_MAX_TOKENS = 80
GOAL = 0.35
LOOK_SEEDS = 3
"""Permutation seeds of each p-value in ``_p_by_k`` (their median is shown)."""
BEFORE = SequentialSpec(first=8, looks=4, final_weight=0.7, futility=0.2)
"""``SequentialSpec()``'s defaults, spelled out: the design the issue measured first."""

Arms = np.ndarray
"""A study's outputs: (arms, [prompts,] outputs, embedding dim), the original arm first."""


@dataclass(frozen=True)
class Outputs:
    """A study's recorded outputs and the mean tokens of one output."""

    arms: Arms
    names: tuple[str, ...]
    """The perturbations' names, in the order of ``arms[1:]``."""
    prompt_tokens: float
    completion_tokens: float
    tokens_from: str


Test = Callable[[Arms, Arms, str, np.random.Generator], float]
"""The fixed audit's p-value of one perturbed arm against the original (their outputs so far)
at the omega named."""
Sequential = Callable[[Arms, SequentialDesign, str, int], SequentialFamily]
"""The sequential family of every perturbed arm (``arms[1:]``) against ``arms[0]``, with
the omega named and the path seed."""


@dataclass(frozen=True)
class Design:
    """A sequential design measured: its name, spec and omega (None: the study's own)."""

    name: str
    spec: SequentialSpec
    omega: str | None = None


@dataclass(frozen=True)
class Study:
    """One audit measured: how to load its outputs, its tests and its designs."""

    name: str
    load: Callable[[], Outputs]
    test: Test
    sequential: Sequential
    k: int
    """The fixed audit's outputs per arm (and prompt)."""
    omega: str
    """The example's omega: the fixed audit's, and each design's unless it names another."""
    after: tuple[Design, ...]
    """The sequential designs measured beside ``BEFORE``, by name, each up to k."""
    looks: tuple[int, ...]
    """Outputs per arm (and prompt) at which ``_p_by_k`` gives each perturbation's p-value."""


def _persona_outputs() -> Outputs:
    data = np.load(DATA / "personas_smollm2_minilm.npz")
    labels = json.loads(str(data["labels"]))
    config = load_config(ROOT / "examples" / "personas.yaml", {"models.0.model": MODEL})
    counter = litellm().token_counter
    prompt = [
        counter(model=MODEL, messages=[m.model_dump() for m in arm.messages])
        for arm in plan_audit(config).arms
    ]
    return Outputs(
        np.stack([data["original"], *(data[pid] for pid in labels)]),
        tuple(labels),
        float(np.mean(prompt)),
        float(PERSONA_MAX_TOKENS),
        f"max_tokens={PERSONA_MAX_TOKENS} per output: no counts recorded",
    )


def _set_outputs() -> Outputs:
    data = np.load(DATA / "prompt_set_example_smollm2.npz")
    meta = json.loads(str(data["meta"]))
    config = load_config(ROOT / meta["config"], {"models.0.model": MODEL})
    counter = litellm().token_counter
    tests = plan_audit(config).unit_tests
    arms = {arm.arm_id: arm for t in tests for arm in (t.original, t.perturbed)}
    prompt = [
        counter(model=MODEL, messages=[m.model_dump() for m in arm.messages])
        for arm in arms.values()
    ]
    return Outputs(
        data["embeddings"].astype(np.float32),
        tuple(p["id"] for p in meta["perturbations"]),
        float(np.mean(prompt)),
        float(data["completion_tokens"].mean()),
        "recorded SmolLM2 completion tokens",
    )


def _persona_test(original: Arms, arm: Arms, omega: str, rng: np.random.Generator) -> float:
    return permutation_test(original, arm, omega=omega, n_permutations=B, rng=rng).p_value


def _persona_sequential(
    arms: Arms, design: SequentialDesign, omega: str, seed: int
) -> SequentialFamily:
    return sequential_family(
        arms[0], list(arms[1:]), design, alpha=ALPHA, method="holm", omega=omega, rng=seed
    )


def _set_test(original: Arms, arm: Arms, omega: str, rng: np.random.Generator) -> float:
    return prompt_set_test(
        list(original),
        list(arm),
        omega=omega,
        combination=SET_COMBINATION,
        n_permutations=B,
        rng=rng,
    ).p_value


def _set_sequential(
    arms: Arms, design: SequentialDesign, omega: str, seed: int
) -> SequentialFamily:
    return set_sequential_family(
        list(arms[0]),
        [list(a) for a in arms[1:]],
        design,
        alpha=ALPHA,
        method="holm",
        omega=omega,
        combination=SET_COMBINATION,
        rng=seed,
    )


STUDIES = (
    Study(
        "persona study (9 arms, k=20, jsd)",
        _persona_outputs,
        _persona_test,
        _persona_sequential,
        k=20,
        omega="jsd",
        after=(
            Design("after", SequentialSpec(final_weight=0.5, futility=False)),
            Design(
                "after, default omega", SequentialSpec(final_weight=0.2, futility=False), "auto"
            ),
        ),
        looks=(8, 12, 16, 20),
    ),
    Study(
        "prompt set (examples/prompt_set.yaml: 3 perturbations x 20 questions, k=8, auto)",
        _set_outputs,
        _set_test,
        _set_sequential,
        k=8,
        omega="auto",
        after=(
            Design("after", SequentialSpec(first=4, looks=3, futility=0.5)),
            Design("after, no futility", SequentialSpec(first=4, looks=3, futility=False)),
            Design(
                "after, looks 5-8", SequentialSpec(first=5, looks=4, final_weight=0.5, futility=0.3)
            ),
        ),
        looks=(2, 3, 4, 5, 6, 7, 8),
    ),
)


@dataclass(frozen=True)
class Run:
    """One sequential run: outputs used (over every prompt), decisions, and each test's stop."""

    outputs: float
    reject: np.ndarray
    stops: tuple[str, ...]
    """Per perturbation, e.g. ``changed@12``, ``futile@8``, ``k_max@20``."""


@dataclass(frozen=True)
class Case:
    """One study on one order of its outputs: the fixed audit and each design's runs."""

    fixed_outputs: int
    fixed_p: np.ndarray
    fixed_reject: np.ndarray
    fixed_again: np.ndarray
    """The fixed audit's decisions with another permutation seed."""
    runs: dict[str, list[Run]]


def _first(arms: Arms, k: int) -> Arms:
    return arms[..., :k, :]


def _case(
    arms: Arms,
    study: Study,
    designs: dict[str, tuple[SequentialDesign, str]],
    seeds: range,
    fixed_seed: int,
) -> Case:
    """The study's fixed audit of ``arms`` (twice, two permutation seeds) and each design's
    sequential runs (design and omega by name), one per seed of ``seeds``."""
    units = int(np.prod(arms.shape[1:-2], dtype=int))  # prompts per arm (1 for one prompt)
    k = study.k

    def fixed(seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        p = np.array(
            [study.test(_first(arms[0], k), _first(b, k), study.omega, rng) for b in arms[1:]]
        )
        return p, correct(p, method="holm", alpha=ALPHA).reject

    p, reject = fixed(fixed_seed)
    runs = {}
    for name, (design, omega) in designs.items():
        used = _first(arms, design.k_max)
        found = [study.sequential(used, design, omega, s) for s in seeds]
        runs[name] = [
            Run(
                float(r.calls * units),
                r.reject,
                tuple(f"{t.reason}@{t.stopped_at}" for t in r.tests),
            )
            for r in found
        ]
    return Case(arms.shape[0] * units * k, p, reject, fixed(fixed_seed + 1)[1], runs)


def _p_by_k(study: Study, outputs: Outputs, omegas: list[str]) -> list[list[str]]:
    """Per omega of ``omegas`` and per perturbation: its p-value against the original at
    each of ``study.looks`` outputs per arm (and prompt), on the recorded order (the median
    over ``LOOK_SEEDS`` permutation seeds): where a look can stop it."""
    original = outputs.arms[0]
    rows = []
    for omega in omegas:
        for name, arm in zip(outputs.names, outputs.arms[1:], strict=True):
            cells = []
            for k in study.looks:
                rngs = (np.random.default_rng([SEED, k, seed]) for seed in range(LOOK_SEEDS))
                p = [study.test(_first(original, k), _first(arm, k), omega, r) for r in rngs]
                cells.append(f"{k}: {float(np.median(p)):.4f}")
            rows.append([study.name, omega, name, ", ".join(cells)])
    return rows


def _shuffled(arms: Arms, order: int) -> Arms:
    """Every arm's (and prompt's) outputs in a random order seeded by ``order``."""
    keys = np.random.default_rng([SEED, order]).random(arms.shape[:-1])
    return np.take_along_axis(arms, np.argsort(keys, axis=-1)[..., None], axis=-2)


def _prices() -> tuple[float, float, float, float]:
    """gpt-4o-mini's (list in, list out, batch in, batch out) USD per token."""
    model = ModelSpec(model=MODEL)
    listed, batched = model_prices(model), batch_prices(model)
    assert batched is not None
    return (
        listed.input_per_token,
        listed.output_per_token,
        batched.input_per_token,
        batched.output_per_token,
    )


def _changed(reject: np.ndarray) -> str:
    """The positions of the perturbations found changed, e.g. ``[0, 2]``."""
    return str([int(i) for i in np.flatnonzero(reject)])


def _agree(cases: list[Case], design: str) -> tuple[int, int]:
    """Runs of ``design`` whose decisions equal their case's fixed audit's, and runs."""
    pairs = [(c.fixed_reject, r.reject) for c in cases for r in c.runs[design]]
    return sum(bool(np.array_equal(f, s)) for f, s in pairs), len(pairs)


def _stops(counts: Counter[str]) -> str:
    """``changed@12 x3, futile@8 x1``: reason, then outputs per arm, in that order."""
    key = lambda stop: (stop.split("@")[0], int(stop.split("@")[1]))  # noqa: E731
    return ", ".join(f"{stop} x{counts[stop]}" for stop in sorted(counts, key=key))


def _measure(
    study: Study, seeds: range, orders: range, prices: tuple[float, ...]
) -> tuple[list[list[str]], list[list[str]], list[list[str]], list[str]]:
    """One study's cost rows, per-perturbation stop rows, p-values by outputs per arm
    (``_p_by_k``) and findings."""
    li, lo, bi, bo = prices
    outputs = study.load()
    designs = {"before": (BEFORE.design(study.k), study.omega)}
    designs |= {d.name: (d.spec.design(study.k), d.omega or study.omega) for d in study.after}
    bench = _case(outputs.arms, study, designs, seeds, SEED)
    checks = [
        _case(_shuffled(outputs.arms, o), study, designs, range(o, o + 1), SEED + 2 * o)
        for o in orders
    ]
    per_list = outputs.prompt_tokens * li + outputs.completion_tokens * lo
    per_batch = outputs.prompt_tokens * bi + outputs.completion_tokens * bo
    base = bench.fixed_outputs * per_list
    self_bench = int(np.array_equal(bench.fixed_reject, bench.fixed_again))
    self_check = sum(bool(np.array_equal(c.fixed_reject, c.fixed_again)) for c in checks)
    entries: list[tuple[str, float, str, str | None]] = [
        (
            "fixed",
            float(bench.fixed_outputs),
            f"{self_bench}/1 seed; check {self_check}/{len(checks)} (fixed vs itself)",
            None,
        )
    ]
    for name, (design, omega) in designs.items():
        used = float(np.mean([r.outputs for r in bench.runs[name]]))
        same, total = _agree([bench], name)
        same_c, total_c = _agree(checks, name)
        looks = ", ".join(str(k) for k in design.looks)
        label = (
            f"sequential {name} (omega {omega}; looks {looks}; last look "
            f"{design.weights[-1]:.1f} of alpha; futility {design.futility or 'none'})"
        )
        entries.append((label, used, f"{same}/{total} seeds; check {same_c}/{total_c}", name))
    rows: list[list[str]] = []
    findings: list[str] = []
    for label, used, agree, run_name in entries:
        for price, per in (("list", per_list), ("batch", per_batch)):
            cost = used * per
            rows.append(
                [study.name, label, price, f"{used:.1f}", f"${cost:.4f}",
                 f"{cost / base:.2f}x", agree]
            )  # fmt: skip
        if run_name is not None:
            ratio = used * per_batch / base
            changed = sorted({_changed(r.reject) for r in bench.runs[run_name]})
            findings.append(
                f"{study.name}, sequential {run_name}: in batches {ratio:.2f}x the fixed audit at "
                f"list price ({'within' if ratio <= GOAL else 'above'} the goal's {GOAL}x); "
                f"decisions equal to the fixed audit's {agree}; it finds {changed} where the "
                f"fixed audit finds {_changed(bench.fixed_reject)}"
            )
    findings.append(
        f"{study.name}: tokens per output {outputs.prompt_tokens:.0f} prompt + "
        f"{outputs.completion_tokens:.1f} completion ({outputs.tokens_from})"
    )
    stop_rows = []
    for i, (label, p) in enumerate(zip(outputs.names, bench.fixed_p, strict=True)):
        fixed_changed = sum(bool(c.fixed_reject[i]) for c in checks)
        for name in designs:
            stops = Counter(r.stops[i] for c in [bench, *checks] for r in c.runs[name])
            stop_rows.append(
                [
                    study.name,
                    label,
                    f"{p:.4f}",
                    f"{'yes' if bench.fixed_reject[i] else 'no'}; check "
                    f"{fixed_changed}/{len(checks)}",
                    name,
                    _stops(stops),
                ]
            )
    omegas = sorted({omega for _, omega in designs.values()})
    return rows, stop_rows, _p_by_k(study, outputs, omegas), findings


def main(quick: bool = False) -> None:
    seeds, orders = (range(2), range(1, 3)) if quick else (range(10), range(1, 11))
    result = ResultFile("cost", quick)
    start = time.perf_counter()
    prices = _prices()
    li, lo, bi, bo = prices
    result.note(
        f"cost: {MODEL} at litellm's prices, list ${li * 1e6:.3f} / ${lo * 1e6:.3f} and batch "
        f"${bi * 1e6:.3f} / ${bo * 1e6:.3f} per million prompt / completion tokens; B={B}, "
        f"Holm at alpha={ALPHA}; benchmark seeds: the recorded order, paths seeded "
        f"{seeds.start}-{seeds.stop - 1}; check: {len(orders)} other orders of the outputs "
        f"(seeded {orders.start}-{orders.stop - 1}), paths seeded by the order"
    )
    rows, stop_rows, look_rows, findings = [], [], [], []
    for study in STUDIES:
        measured = _measure(study, seeds, orders, prices)
        rows += measured[0]
        stop_rows += measured[1]
        look_rows += measured[2]
        findings += measured[3]
    result.table(
        "cost of one audit (outputs: the mean over the benchmark's seeds; same decisions: "
        "runs equal to the fixed audit's, on the benchmark's seeds and on the check)",
        ["audit", "design", "price", "outputs", "cost", "vs fixed at list", "same decisions"],
        rows,
    )
    result.table(
        "per perturbation: the fixed audit's p-value and decision (recorded order; check: "
        "changed in how many other orders), and where each sequential design stopped it "
        "(every run: benchmark seeds and check)",
        ["audit", "perturbation", "fixed p", "fixed changed", "design", "stops"],
        stop_rows,
    )
    result.table(
        f"per perturbation and omega: its p-value at each look's outputs per arm (and "
        f"question), recorded order, median of {LOOK_SEEDS} permutation seeds: a look stops "
        f"a test only below its share of Holm's alpha/m",
        ["audit", "omega", "perturbation", "outputs per arm: p-value"],
        look_rows,
    )
    for line in findings:
        result.note(line)
    result.note(f"bench_cost: {time.perf_counter() - start:.0f} s")
    result.write()
