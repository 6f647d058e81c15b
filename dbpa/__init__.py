"""dbpa: statistical robustness audits for large language models.

The statistics are importable without the heavy stack::

    import dbpa
    result = dbpa.permutation_test(original_embeddings, perturbed_embeddings, rng=0)
    result.p_value, result.statistic, result.effect
"""

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
