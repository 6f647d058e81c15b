"""Power of each omega on real outputs of the embedded model: the persona study, subsampled.

``data/personas_smollm2_minilm.npz`` holds the all-MiniLM-L6-v2 embeddings of 20 outputs
per arm of ``examples/personas.yaml`` on the embedded SmolLM2-135M (temperature 0.8, seed
0; the arms of the README's quickstart run). Each simulated audit draws k of the 20
original and k of the 20 perturbed outputs *without* replacement, so every simulated arm is
a real i.i.d. sample of the model's answers; the controls show how often each omega calls a
small persona edit a change. Rates at alpha=0.05 (one test, no correction), B=199.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

import dbpa
from benchmarks._results import ResultFile

DATA = Path(__file__).parent / "data" / "personas_smollm2_minilm.npz"
OMEGAS = ("jsd", "energy", "energy_l2", "energy_cosine", "centroid", "auto")
SINGLE = OMEGAS[:-1]
ALPHA = 0.05
B = 199
SEED = 20261123


def rates(original: np.ndarray, perturbed: np.ndarray, k: int, n: int, seed: int) -> dict:
    """Rejections per omega over n subsampled audits (the same draws for every omega)."""
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(OMEGAS, 0)
    for _ in range(n):
        a = original[rng.choice(len(original), size=k, replace=False)]
        b = perturbed[rng.choice(len(perturbed), size=k, replace=False)]
        draw = int(rng.integers(2**32))
        for omega in OMEGAS:
            p = dbpa.permutation_test(a, b, omega=omega, n_permutations=B, rng=draw).p_value
            counts[omega] += p <= ALPHA
    return {omega: c / n for omega, c in counts.items()}


def main(quick: bool = False) -> None:
    data = np.load(DATA)
    labels = json.loads(str(data["labels"]))
    n, ks = (20, (6,)) if quick else (100, (6, 10))
    result_file = ResultFile("real", quick)
    result_file.note(f"persona study, {n} subsampled audits per cell, B={B}, alpha={ALPHA}")
    start = time.perf_counter()
    rows, gaps = [], []
    for pid, label in labels.items():
        for k in ks:
            r = rates(data["original"], data[pid], k, n, SEED + k)
            best = max(SINGLE, key=lambda o: r[o])
            gap = r[best] - r["auto"]
            if label == "target":
                gaps.append(gap)
            rows.append([pid, label, k, *(f"{r[o]:.2f}" for o in OMEGAS), best, f"{gap:+.2f}"])
    result_file.table(
        "rejection rate per omega (target: auto within 0.10 of the best single omega)",
        ["perturbation", "label", "k", *OMEGAS, "best single", "gap"],
        rows,
    )
    result_file.note(
        f"largest gap on targets: {max(gaps):+.2f}; bench_real: {time.perf_counter() - start:.0f} s"
    )
    result_file.write()
