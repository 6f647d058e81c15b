"""Perturbation generators: 10,000 noise variants, against baselines timed in the same run.

Each case expands one ``noise`` spec of 10,000 variants (``dbpa.perturbations.expand``,
with its checks: ids, the original not repeated) on a prompt: the medical question of
``examples/noise.yaml`` (19 words) and the cardiovascular study's rendered patient (50
words). Two baselines: 10,000 ``str.replace`` calls on the same prompt (the floor: one edit,
no randomness, no perturbation), and ``expand`` of a ``prompt`` spec listing 10,000 variants
written out beforehand (what the same family costs when the texts are given). Medians of
interleaved repeats; the target is under 1 s per 10,000 variants.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from benchmarks._results import ResultFile
from dbpa.perturbations import CardiovascularSpec, NoiseSpec, PromptSpec, expand
from dbpa.specs import Message

N = 10_000
TARGET_S = 1.0
QUESTION = (
    "A 45-year-old man has had a cough, a mild fever and tiredness for three weeks. "
    "What should he do?"
)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(quick: bool = False) -> None:
    result_file = ResultFile("generators", quick)
    n = N // 10 if quick else N
    repeats = 1 if quick else 3
    prompts = {
        "question (19 words)": QUESTION,
        "patient (50 words)": CardiovascularSpec(seed=0).base_prompt,
    }
    print(
        f"\nbench_generators: {n:,} variants per case, median of {repeats}; "
        f"{os.cpu_count()} cores, load average before the run {os.getloadavg()[0]:.2f}"
    )
    rows = []
    for label, text in prompts.items():
        original = (Message(role="user", content=text),)
        word = text.split()[3]
        # given ids: 6 hex digits of derived ids collide about 3 times in 10,000 texts
        written = [{"id": f"v{i}", "text": f"{text} ({i})"} for i in range(n)]
        cases: dict[str, Callable[[], object]] = {
            "baseline: str.replace": lambda text=text, word=word: [
                text.replace(word, word.upper()) for _ in range(n)
            ],
            "baseline: prompt kind, texts given": lambda original=original, written=written: expand(
                original, [PromptSpec(variants=written)]
            ),
            "noise: typos": lambda original=original: expand(
                original, [NoiseSpec(operations=["typos"], variants=n)]
            ),
            "noise: filler": lambda original=original: expand(
                original, [NoiseSpec(operations=["filler"], variants=n)]
            ),
            "noise: 5 operations combined": lambda original=original: expand(
                original, [NoiseSpec(combine=True, variants=n)]
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):
            for name, fn in cases.items():
                times[name].append(_timed(fn))
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        floor = medians["baseline: str.replace"]
        given = medians["baseline: prompt kind, texts given"]
        for name, seconds in medians.items():
            noise = name.startswith("noise")
            rows.append(
                [
                    label,
                    name,
                    f"{seconds:.3f}",
                    f"{seconds / floor:.0f}x",
                    f"{seconds / given:.2f}x",
                    ("yes" if seconds * N / n < TARGET_S else "NO") if noise else "",
                ]
            )
    result_file.table(
        f"{n:,} variants: seconds, and the ratio to each baseline",
        ["prompt", "case", "s", "/ str.replace", "/ prompt kind", f"< {TARGET_S:g} s"],
        rows,
    )
    result_file.write()
