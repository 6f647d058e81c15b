"""What an audit costs on a priced hosted model: fixed k, sequential, and each in batches.

No model is called and nothing is spent: the decisions come from recorded outputs of the
embedded model, the cost from their token counts at the list and batch prices litellm's
price map gives ``openai/gpt-4o-mini`` (its ``*_cost_per_token_batches``: half the list).

* **Persona study** (``examples/personas.yaml``: the original and 8 personas, k = 20):
  ``data/personas_smollm2_minilm.npz``, the embeddings of 20 recorded outputs per arm.
  Prompt tokens: litellm's counter for gpt-4o-mini on each arm's messages; completion
  tokens: the config's ``max_tokens`` (80) per output, as this file records no token counts
  (an upper bound; every design pays the same per output, so the ratios do not depend on it).
* **Prompt set** (an original and 3 changes over 20 questions, k = 8 per prompt, as in
  ``examples/prompt_set.yaml``): ``data/prompt_sets_smollm2.npz``, the first 8 of 40
  recorded outputs per arm and prompt, with their recorded token counts (SmolLM2's
  tokenizer); prompt tokens: litellm's counter for gpt-4o-mini on the system prompt and the
  question.

Designs: the fixed audit (every arm k outputs, permutation p-values corrected by Holm at
alpha 0.05, omega as each example sets it: jsd, auto; over the set, the pooled tests), the
sequential audit (the default ``SequentialSpec`` with k_max = k, run by
``dbpa.stats.sequential_family`` / ``set_sequential_family`` on the same outputs: the outputs
it actually uses), each at list price and in provider batches. A design's cost is its
outputs times the mean cost of an output over the family's arms. The sequential design draws
its paths at random: it is run with several seeds and its outputs and decisions reported per
seed. The goal of issue 53:
the sequential batch audit at or below 0.35x the fixed audit at list price, with the same
decisions.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._results import ResultFile
from dbpa.analysis import SequentialSpec
from dbpa.config import load_config
from dbpa.llm import batch_prices, litellm, model_prices
from dbpa.plan import plan_audit
from dbpa.specs import ModelSpec
from dbpa.stats import (
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
PERSONA_OMEGA = "jsd"
"""examples/personas.yaml's (pinned there to reproduce the paper's table)."""
SET_OMEGA = "auto"
"""examples/prompt_set.yaml's (the default)."""
SEED = 20261206
PERSONA_K = 20
PERSONA_MAX_TOKENS = 80
SET_K = 8
GOAL = 0.35


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


@dataclass(frozen=True)
class _Case:
    """One audit's outputs per design, decisions and mean tokens per output."""

    name: str
    fixed_outputs: int
    fixed_reject: np.ndarray
    sequential: list[tuple[float, np.ndarray]]
    """(outputs used, decisions) per seed of the sequential design."""
    prompt_tokens: float
    completion_tokens: float
    tokens_from: str


def _persona_case(seeds: int) -> _Case:
    """The persona study's outputs per design and its decisions, and its mean tokens."""
    data = np.load(DATA / "personas_smollm2_minilm.npz")
    labels = json.loads(str(data["labels"]))
    original = data["original"][:PERSONA_K]
    arms = [data[pid][:PERSONA_K] for pid in labels]
    rng = np.random.default_rng(SEED)
    p = [
        permutation_test(original, b, omega=PERSONA_OMEGA, n_permutations=B, rng=rng).p_value
        for b in arms
    ]
    fixed = correct(p, method="holm", alpha=ALPHA).reject
    design = SequentialSpec().design(PERSONA_K)
    runs = [
        sequential_family(
            original, arms, design, alpha=ALPHA, method="holm", omega=PERSONA_OMEGA, rng=s
        )
        for s in range(seeds)
    ]
    config = load_config(ROOT / "examples" / "personas.yaml", {"models.0.model": MODEL})
    counter = litellm().token_counter
    prompt = [
        counter(model=MODEL, messages=[m.model_dump() for m in arm.messages])
        for arm in plan_audit(config).arms
    ]
    return _Case(
        "persona study (9 arms, k=20)",
        (len(arms) + 1) * PERSONA_K,
        fixed,
        [(float(r.calls), r.reject) for r in runs],
        float(np.mean(prompt)),
        float(PERSONA_MAX_TOKENS),
        f"max_tokens={PERSONA_MAX_TOKENS} per output: no counts recorded",
    )


def _set_case(seeds: int) -> _Case:
    """The prompt set's outputs per design and its decisions, and its mean tokens."""
    data = np.load(DATA / "prompt_sets_smollm2.npz")
    vectors = data["embeddings"].astype(np.float32)[:, :, :SET_K]  # arm, prompt, output
    meta = json.loads(str(data["meta"]))
    n_prompts = vectors.shape[1]
    originals = list(vectors[0])
    perturbed = [list(vectors[a]) for a in range(1, vectors.shape[0])]
    rng = np.random.default_rng(SEED)
    p = [
        prompt_set_test(originals, arms, omega=SET_OMEGA, n_permutations=B, rng=rng).p_value
        for arms in perturbed
    ]
    fixed = correct(p, method="holm", alpha=ALPHA).reject
    design = SequentialSpec().design(SET_K)
    runs = [
        set_sequential_family(
            originals, perturbed, design, alpha=ALPHA, method="holm", omega=SET_OMEGA, rng=s
        )
        for s in range(seeds)
    ]
    tokens = data["tokens"][:, :, :SET_K]
    completion = float((tokens >= 0).sum(-1).mean())
    counter = litellm().token_counter
    systems = {a["system"] for a in meta["arms"].values()}
    prompt = [
        counter(
            model=MODEL,
            messages=[{"role": "system", "content": s}, {"role": "user", "content": str(q)}],
        )
        for s in sorted(systems)
        for q in data["prompts"]
    ]
    return _Case(
        f"prompt set (4 arms x {n_prompts} prompts, k={SET_K})",
        vectors.shape[0] * n_prompts * SET_K,
        fixed,
        [(float(r.calls * n_prompts), r.reject) for r in runs],
        float(np.mean(prompt)),
        completion,
        "recorded SmolLM2 token counts",
    )


def _changed(reject: np.ndarray) -> str:
    """The positions of the perturbations found changed, e.g. ``[0, 2]``."""
    return str([int(i) for i in np.flatnonzero(reject)])


def main(quick: bool = False) -> None:
    seeds = 2 if quick else 10
    result = ResultFile("cost", quick)
    start = time.perf_counter()
    li, lo, bi, bo = _prices()
    result.note(
        f"cost: {MODEL} at litellm's prices, list ${li * 1e6:.3f} / ${lo * 1e6:.3f} and batch "
        f"${bi * 1e6:.3f} / ${bo * 1e6:.3f} per million prompt / completion tokens; omega "
        f"{PERSONA_OMEGA} (personas) and {SET_OMEGA} (prompt set) as the examples set them, "
        f"B={B}, Holm at alpha={ALPHA}; the sequential design with {seeds} seeds"
    )
    rows, verdicts = [], []
    for case in (_persona_case(seeds), _set_case(seeds)):
        per_list = case.prompt_tokens * li + case.completion_tokens * lo
        per_batch = case.prompt_tokens * bi + case.completion_tokens * bo
        base = case.fixed_outputs * per_list
        used = float(np.mean([outputs for outputs, _ in case.sequential]))
        same = sum(bool(np.array_equal(r, case.fixed_reject)) for _, r in case.sequential)
        agree = f"{same}/{len(case.sequential)} seeds"
        for design, outputs, price, per in (
            ("fixed", case.fixed_outputs, "list", per_list),
            ("fixed", case.fixed_outputs, "batch", per_batch),
            ("sequential", used, "list", per_list),
            ("sequential", used, "batch", per_batch),
        ):
            cost = outputs * per
            rows.append(
                [
                    case.name,
                    design,
                    price,
                    f"{outputs:.1f}",
                    f"${cost:.4f}",
                    f"{cost / base:.2f}x",
                    "-" if design == "fixed" else agree,
                ]
            )
        ratio = used * per_batch / base
        verdicts.append(
            f"{case.name}: sequential in batches {ratio:.2f}x the fixed audit at list price "
            f"({'meets' if ratio <= GOAL else 'misses'} the goal {GOAL}x); decisions equal to "
            f"the fixed audit's with {agree}; the fixed audit finds "
            f"{int(case.fixed_reject.sum())} of {len(case.fixed_reject)} changed "
            f"({_changed(case.fixed_reject)}), the sequential "
            f"{sorted({_changed(r) for _, r in case.sequential})}; tokens per "
            f"output {case.prompt_tokens:.0f} prompt + {case.completion_tokens:.1f} completion "
            f"({case.tokens_from})"
        )
    result.table(
        "cost of one audit (outputs: the mean over the sequential design's seeds)",
        ["audit", "design", "price", "outputs", "cost", "vs fixed at list", "same decisions"],
        rows,
    )
    for line in verdicts:
        result.note(line)
    result.note(f"bench_cost: {time.perf_counter() - start:.0f} s")
    result.write()
