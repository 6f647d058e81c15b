"""dbpa.stats: the statistics of distribution-based perturbation analysis.

Pure numpy/scipy: similarities, discrepancies (omega) and their combination
(``auto``), the permutation engine of Algorithm 1, multiplicity corrections, sample
size, power and the planners of k (one pair; a whole family under its correction; the pooled
test over a set of prompts: k per prompt and the number of prompts), ROC
for labelled families, effect intervals and equivalence decisions (changed / equivalent /
inconclusive) with a calibrated margin, and the anytime-valid drift monitor of scheduled
audits (``DriftMonitor``, ``family_alarms``). Nothing here imports Prefect, DuckDB or litellm.
scipy (scipy.stats about a second to import, scipy.special and scipy.spatial half a second
together) is imported only inside the functions that use it (the bh and by corrections,
``sample_size``, ``simulate_power``, the jsd kernel, the L1 and L2 distances), so that
importing this package, as a config check does, stays cheap.
"""

from ._boundary import BoundaryDraws, TiltedSteps
from ._combined import ComponentResult
from ._difference import EffectDifference, effect_difference
from ._drilldown import PromptDrilldown, prompt_drilldown
from ._e_family import E_FAMILY_METHODS, FamilyAlarms, family_alarms
from ._equivalence import (
    Decision,
    FamilyDecision,
    MarginCalibration,
    calibrate_margin,
    decide,
    decide_family,
    equivalence_p_value,
)
from ._family_plan import (
    Detectable,
    FamilyPlan,
    PerturbationPower,
    fine_permutations,
    plan_family,
)
from ._group_sequential import (
    GroupSequentialPaths,
    PathPlan,
    group_sequential_paths,
    group_sequential_stop,
    path_plan,
    sequential_family,
)
from ._interval import INTERVAL_OMEGAS, EffectInterval, effect_interval
from ._interval import MIN_ROWS as INTERVAL_MIN_ROWS
from ._monitor import CONFORMAL as MONITOR_CONFORMAL
from ._monitor import FORMS as MONITOR_FORMS
from ._monitor import DriftMonitor, MonitorState, tolerance_reach
from ._monitor_pool import PooledEvidence, pool_evidence
from ._multiplicity import (
    CORRECTIONS,
    CorrectionResult,
    PermutationBudgetWarning,
    correct,
    lone_threshold,
    loosest_threshold,
    min_permutations,
    rejected_together,
)
from ._omega import OMEGAS, Omega, histogram_edges
from ._permutation import PermutationTestResult, permutation_test, permutation_test_matrix
from ._planning import SamplePlan, plan_k
from ._power import PowerResult, sample_size, simulate_power
from ._prompt_sets import COMBINATIONS, PromptSetResult, prompt_set_test
from ._roc import (
    ModelChoice,
    OperatingPoint,
    Rates,
    RocResult,
    best_model,
    rates_at,
    roc_curve,
    tpr_at_fpr,
)
from ._sequential import (
    SequentialDesign,
    SequentialFamily,
    SequentialTest,
    sequential_design,
    sequential_p_value,
)
from ._sequential import (
    unreachable_looks as sequential_unreachable_looks,
)
from ._set_equivalence import (
    SetEquivalence,
    SetMarginCalibration,
    calibrate_set_margin,
    set_equivalence,
    set_equivalence_p_value,
)
from ._set_power import SetPower, SetPowerPoint, SetSizePlan, plan_set_power, simulate_set_power
from ._set_sequential import set_path_plan, set_sequential_family, set_sequential_paths
from ._settle import Settling, corrected_level, settling_k
from ._similarity import SIMILARITIES, SimilaritySplit, pooled_similarity, split_similarities
from ._witness import WitnessScores, witness_scores

__all__ = [
    "COMBINATIONS",
    "CORRECTIONS",
    "E_FAMILY_METHODS",
    "INTERVAL_MIN_ROWS",
    "INTERVAL_OMEGAS",
    "MONITOR_CONFORMAL",
    "MONITOR_FORMS",
    "OMEGAS",
    "SIMILARITIES",
    "BoundaryDraws",
    "ComponentResult",
    "CorrectionResult",
    "Decision",
    "Detectable",
    "DriftMonitor",
    "EffectDifference",
    "EffectInterval",
    "FamilyAlarms",
    "FamilyDecision",
    "FamilyPlan",
    "GroupSequentialPaths",
    "MarginCalibration",
    "ModelChoice",
    "MonitorState",
    "Omega",
    "OperatingPoint",
    "PathPlan",
    "PermutationBudgetWarning",
    "PermutationTestResult",
    "PerturbationPower",
    "PooledEvidence",
    "PowerResult",
    "PromptDrilldown",
    "PromptSetResult",
    "Rates",
    "RocResult",
    "SamplePlan",
    "SequentialDesign",
    "SequentialFamily",
    "SequentialTest",
    "SetEquivalence",
    "SetMarginCalibration",
    "SetPower",
    "SetPowerPoint",
    "SetSizePlan",
    "Settling",
    "SimilaritySplit",
    "TiltedSteps",
    "WitnessScores",
    "best_model",
    "calibrate_margin",
    "calibrate_set_margin",
    "correct",
    "corrected_level",
    "decide",
    "decide_family",
    "effect_difference",
    "effect_interval",
    "equivalence_p_value",
    "family_alarms",
    "fine_permutations",
    "group_sequential_paths",
    "group_sequential_stop",
    "histogram_edges",
    "lone_threshold",
    "loosest_threshold",
    "min_permutations",
    "path_plan",
    "permutation_test",
    "permutation_test_matrix",
    "plan_family",
    "plan_k",
    "plan_set_power",
    "pool_evidence",
    "pooled_similarity",
    "prompt_drilldown",
    "prompt_set_test",
    "rates_at",
    "rejected_together",
    "roc_curve",
    "sample_size",
    "sequential_design",
    "sequential_family",
    "sequential_p_value",
    "sequential_unreachable_looks",
    "set_equivalence",
    "set_equivalence_p_value",
    "set_path_plan",
    "set_sequential_family",
    "set_sequential_paths",
    "settling_k",
    "simulate_power",
    "simulate_set_power",
    "split_similarities",
    "tolerance_reach",
    "tpr_at_fpr",
    "witness_scores",
]
