"""Input validation shared by the statistics modules.

Every check raises ``ValueError`` whose message starts with the argument's name,
so a caller can always tell which input was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

RngLike = int | np.random.Generator | np.random.SeedSequence | None


def as_rng(rng: RngLike, name: str = "rng") -> np.random.Generator:
    """Return a ``Generator`` from a seed, a ``SeedSequence``, a ``Generator`` or ``None``."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"{name}: a seed must be non-negative, got {rng}")
        return np.random.default_rng(int(rng))
    raise ValueError(
        f"{name}: expected an int seed, a numpy Generator or None, got {type(rng).__name__}"
    )


def as_embeddings(x: ArrayLike, name: str) -> NDArray[np.float64]:
    """A finite float (k, d) array with k >= 2 outputs."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric array ({exc})") from None
    if arr.ndim != 2:
        raise ValueError(f"{name}: must be a 2-D (k, d) array of embeddings, got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError(f"{name}: needs at least 2 rows (outputs), got {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name}: embeddings have dimension 0")
    if not np.all(np.isfinite(arr)):
        bad = int(np.argwhere(~np.isfinite(arr))[0, 0])
        raise ValueError(f"{name}: contains NaN or inf (first in row {bad})")
    return arr


def as_pooled_matrix(
    matrix: ArrayLike, k_a: Any, name: str = "matrix"
) -> tuple[NDArray[np.float64], int]:
    """A finite, symmetric (n, n) matrix and a split size 2 <= k_a <= n - 2."""
    try:
        arr = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric array ({exc})") from None
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name}: must be a square (n, n) pooled matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    scale = max(float(np.max(np.abs(arr))), 1.0)
    if not np.allclose(arr, arr.T, rtol=0.0, atol=1e-9 * scale):
        raise ValueError(f"{name}: must be symmetric")
    n = arr.shape[0]
    if isinstance(k_a, bool) or not isinstance(k_a, (int, np.integer)):
        raise ValueError(f"k_a: must be an integer, got {k_a!r}")
    if not 2 <= k_a <= n - 2:
        raise ValueError(f"k_a: each arm needs at least 2 outputs; got k_a={k_a} of n={n}")
    return arr, int(k_a)


def as_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    return int(value)


def as_arm_sizes(values: Any, name: str) -> list[int]:
    """Distinct arm sizes >= 2, sorted."""
    try:
        items = list(values)
    except TypeError:
        raise ValueError(f"{name}: expected a sequence of arm sizes, got {values!r}") from None
    if not items:
        raise ValueError(f"{name}: needs at least one arm size")
    return sorted({as_positive_int(v, name, minimum=2) for v in items})


def as_finite(value: Any, name: str) -> float:
    """A finite float (bools are numbers here, as in ``float``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number, got {value!r}") from None
    if not np.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return v


def as_weights(value: Any, count: int, name: str, parts: str = "") -> tuple[float, ...]:
    """``count`` finite positive floats summing to 1 (one per ``parts``, named in the
    message)."""
    of = f"{count}: {parts}" if parts else f"{count}"
    try:
        given = tuple(float(w) for w in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}: a sequence of numbers, one per process ({of}), got {value!r}"
        ) from None
    if len(given) != count:
        raise ValueError(f"{name}: one per process ({of}), got {len(given)}")
    if not all(np.isfinite(w) and w > 0.0 for w in given) or abs(sum(given) - 1.0) > 1e-9:
        raise ValueError(f"{name}: positive numbers summing to 1, got {value!r}")
    return given


def as_probability(value: Any, name: str) -> float:
    """A float strictly inside (0, 1)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name}: must be in (0, 1), got {value!r}")
    return v


def as_p_values(p_values: ArrayLike, name: str = "p_values") -> NDArray[np.float64]:
    """A non-empty 1-D array of p-values in [0, 1]."""
    try:
        arr = np.asarray(p_values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: not a numeric array") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-D sequence, got shape {arr.shape}")
    if np.any(np.isnan(arr)) or np.any((arr < 0.0) | (arr > 1.0)):
        raise ValueError(f"{name}: every p-value must be in [0, 1]")
    return arr


def choose(value: Any, name: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``; otherwise a message that lists them."""
    options = list(choices)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name}: unknown {value!r}; choose one of {', '.join(options)}")
    return value
