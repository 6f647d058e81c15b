"""dbpa: statistical robustness audits for large language models.

The statistics are importable without the heavy stack::

    import dbpa
    result = dbpa.permutation_test(original_embeddings, perturbed_embeddings, rng=0)
    result.p_value, result.statistic, result.effect

They are loaded on first use (PEP 562), so ``import dbpa`` (as every subpackage and the
``dbpa`` command do) costs nothing; so are the subpackages, ``dbpa.stats.effect_interval``
after a bare ``import dbpa`` included.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dbpa.stats import (
        CorrectionResult,
        PermutationTestResult,
        PowerResult,
        RocResult,
        best_model,
        correct,
        permutation_test,
        permutation_test_matrix,
        roc_curve,
        sample_size,
        simulate_power,
    )

__version__ = "0.1.0"

__all__ = [
    "CorrectionResult",
    "PermutationTestResult",
    "PowerResult",
    "RocResult",
    "__version__",
    "best_model",
    "correct",
    "permutation_test",
    "permutation_test_matrix",
    "roc_curve",
    "sample_size",
    "simulate_power",
]


def __getattr__(name: str) -> Any:
    """The public statistics, imported from ``dbpa.stats`` when first asked for, and the
    public subpackages and modules (``dbpa.stats``, ``dbpa.config``, ...) likewise."""
    if name in __all__:
        value = getattr(importlib.import_module("dbpa.stats"), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'dbpa' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
