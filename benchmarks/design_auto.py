"""Design study of ``auto``: candidate components evaluated on the same splits, combined by
Tippett (ties broken by the next p-value, as ``auto`` does), on the power benchmark's
scenarios and on real outputs of the embedded model.

It tries candidates rather than measuring what ships: why ``auto`` is jsd + energy_cosine
combined by Tippett with ties broken by the next p-value (``docs/explanation/omega.md`` says
what it is; the ``power`` page, how it performs). Synthetic cells: the five alternatives of the
power suite at k = 10, 20, 30, 40, 200 audits per cell, B = 199; real cells: the persona
study's eight perturbations at k = 6 and 10, 100 subsampled audits per cell. The gap is the best
single shipped omega's rejection rate minus the candidate's, "misses" the cells where it
exceeds 0.10; "null max" the candidate's largest rejection rate where nothing changed.
Candidates beyond the shipped omegas:

* ``benergy`` / ``bks``: the energy distance and the KS statistic of P0 vs P1 computed from
  jsd's own 30-bin histograms (free once jsd is computed);
* ``mmd_c``: the MMD with a Gaussian kernel of bandwidth c times the median pooled distance;
* ``en05``: the energy distance with distances to the power 1/2.

How the design was chosen (an earlier run with Fisher's combination and energy_l2 among the
candidates, 200 audits per cell, k = 10-40, B = 199):

* **energy_cosine, not energy_l2**: the centroid statistic is the best location test on unit
  vectors and loses only where jsd leads.
* **Tippett, not Fisher**: Fisher is ahead at alpha = 0.05 with B = 199, but a corrected
  family tests at alpha/m, near the floor 1/(B+1), and there Fisher's product is capped by
  the component that saw nothing: at level 0.01 = 2/(B+1) it lost up to 0.76 of power where
  Tippett lost 0.33.
* **Ties broken by the next p-value**: plain Tippett ranks every split whose smaller p-value
  is 1/(B+1) alike, so at a level of exactly 1/(B+1) it almost never rejects (0.005 for the
  spread change at k = 40 where jsd alone reaches 0.94); with the tie-break 0.22, and 0.95 at
  2/(B+1). In a family, give auto B >= 2m/alpha - 1, twice the single-omega minimum.
* **No third component**: each component adds splits that share the floor; a third one
  trades the new-answer-type cells for the levels a corrected family tests at. No candidate is
  within 0.10 everywhere, and none can be: each scenario is led by a different single
  statistic (jsd for a shift from a compact original, energy_cosine for a shift from a
  diffuse one, the P0/P1 CDF statistics for a new answer type), and in the steep middle of a
  power curve a second look costs the leader more than 0.10. jsd with 15 bins is slightly
  better than the paper's 30 but would make auto's jsd component differ from
  ``omega="jsd"``; not taken.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from benchmarks._results import ResultFile
from benchmarks._synthetic import answer_space, sample
from benchmarks.bench_power import SCENARIOS, B
from benchmarks.bench_real import DATA
from dbpa.stats._combined import combine
from dbpa.stats._omega import OMEGAS, _CentroidKernel, _EnergyKernel, _JSDKernel
from dbpa.stats._permutation import TIE_RTOL, _splits
from dbpa.stats._similarity import SIMILARITIES, pool_arms

SHIPPED = ("energy", "ks", "mean_diff", "energy_cosine", "energy_l2")
BANDWIDTHS = {"mmd_q": 0.25, "mmd_h": 0.5, "mmd_1": 1.0, "mmd_2": 2.0}
NAMES = ("jsd", "benergy", "bks", *SHIPPED, *BANDWIDTHS, "en05")
SINGLE = ("jsd", *SHIPPED)
CANDIDATES = (
    ("jsd", "energy_cosine"),
    ("jsd", "benergy", "energy_cosine"),
    ("jsd", "bks", "energy_cosine"),
    ("jsd", "energy", "energy_cosine"),
    ("benergy", "energy_cosine"),
    ("energy", "energy_cosine"),
    ("jsd", "mmd_1"),
    ("jsd", "mmd_h", "mmd_2"),
    ("jsd", "en05"),
    ("mmd_q", "mmd_h", "mmd_1", "mmd_2"),
    ("jsd", "benergy", "mmd_h", "energy_cosine"),
)
LEVELS = (0.05, 0.01)


class _Histograms(_JSDKernel):
    """jsd and the binned energy and KS statistics of the same P0/P1 histograms."""

    def __call__(self, masks: Any) -> Any:
        h0, h1 = self.counts(masks)
        js = self.jsd(h0, h1)
        d = np.cumsum(h0, axis=1) / self._n0 - np.cumsum(h1, axis=1) / self._n1
        return np.column_stack([js, np.sqrt((d * d).sum(axis=1)), np.abs(d).max(axis=1)])


def component_values(a: Any, b: Any, rng: np.random.Generator) -> tuple[Any, list[float]]:
    """(rows, NAMES) values on the observed split (row 0) and B random or all splits."""
    z = pool_arms(a, b, nonzero=True)
    k_a, n = len(a), len(z)
    sim = SIMILARITIES["cosine"](z, "a or b")
    squared = np.maximum(2.0 - 2.0 * sim, 0.0)
    np.fill_diagonal(squared, 0.0)
    median = np.median(squared[np.triu_indices(n, 1)])
    kernels = [_Histograms(sim, k_a, bins=30, range="pooled")]
    for name in SHIPPED:
        omega = OMEGAS[name]
        matrix = sim if omega.from_embeddings is None else omega.from_embeddings(z)
        kernels.append(omega.build(matrix, k_a, omega.defaults))
    for c in BANDWIDTHS.values():
        kernels.append(_CentroidKernel(np.exp(-squared / (2 * c * c * median)), k_a))
    kernels.append(_EnergyKernel(squared**0.25, k_a))
    exact, splits = _splits(n, k_a, B, 10**6, rng)
    observed = np.zeros((1, n), dtype=bool)
    observed[0, :k_a] = True
    chunks = ([] if exact else [observed]) + list(splits)
    values = np.vstack([np.column_stack([kern(m) for kern in kernels]) for m in chunks])
    scales = [1.0, 1.0, 1.0, *(kern.scale for kern in kernels[1:])]
    return values, scales


def rates(draws: Any, n: int) -> dict[str, dict[float, float]]:
    """Rejection rate of every single statistic and candidate at each level."""
    combos = [(s,) for s in NAMES] + list(CANDIDATES)
    counts = {c: dict.fromkeys(LEVELS, 0) for c in combos}
    for a, b, rng in draws:
        values, scales = component_values(a, b, rng)
        for combo in combos:
            idx = [NAMES.index(c) for c in combo]
            p = combine(values[:, idx], [scales[i] for i in idx], TIE_RTOL).p_value
            for level in LEVELS:
                counts[combo][level] += p <= level
    return {"+".join(c): {lv: v / n for lv, v in r.items()} for c, r in counts.items()}


def synthetic(scenario: int, k: int, n: int) -> Any:
    rng = np.random.default_rng([7, scenario, k])
    for _ in range(n):
        space = answer_space(rng)
        s = SCENARIOS[scenario]
        yield sample(rng, space, s.original, k), sample(rng, space, s.perturbed, k), rng


def real(perturbation: str, k: int, n: int) -> Any:
    data = np.load(DATA)
    rng = np.random.default_rng([11, k, len(perturbation)])
    for _ in range(n):
        a = data["original"][rng.choice(len(data["original"]), size=k, replace=False)]
        b = data[perturbation][rng.choice(len(data[perturbation]), size=k, replace=False)]
        yield a, b, rng


def main(quick: bool = False) -> None:
    n_syn, n_real, ks = (20, 10, (10, 20)) if quick else (200, 100, (10, 20, 30, 40))
    result_file = ResultFile("design_auto", quick)
    cells: dict[str, Any] = {}
    for s in range(len(SCENARIOS)):
        for k in ks:
            cells[f"synthetic {s} k={k}"] = rates(synthetic(s, k, n_syn), n_syn)
    labels = json.loads(str(np.load(DATA)["labels"]))
    for pid in labels:
        for k in (6, 10):
            cells[f"real {pid} k={k}"] = rates(real(pid, k, n_real), n_real)
    rows = []
    for combo in CANDIDATES:
        name = "+".join(combo)

        def gaps(prefix: str, level: float, name: str = name) -> list[float]:
            return [
                max(v[s][level] for s in SINGLE) - v[name][level]
                for cell, v in cells.items()
                if cell.startswith(prefix) and not cell.startswith("synthetic 0 ")
            ]

        nulls = [v[name][0.05] for c, v in cells.items() if c.startswith("synthetic 0 ")]
        row = [" + ".join(combo)]
        for prefix, level in (("synthetic", 0.05), ("synthetic", 0.01), ("real", 0.05)):
            g = gaps(prefix, level)
            row.append(f"{max(g):.2f} / {sum(g) / len(g):.3f}, {sum(x > 0.1 for x in g)}")
        rows.append([*row, f"{max(nulls):.3f}"])
    result_file.table(
        f"candidates for auto, Tippett with ties broken by the next p-value ({n_syn} synthetic "
        f"audits per cell at k in {ks}, {n_real} real per cell at k in (6, 10))",
        [
            "components",
            "synthetic 0.05: max / mean gap, misses",
            "synthetic 0.01",
            "real 0.05",
            "null max",
        ],
        rows,
    )
    result_file.write()
