"""dbpa.drift: the arms of an audit at one epoch tested against the same arms at an earlier one.

An arm is a model, its parameters, the messages and the epoch, so the same model,
parameters and messages at two ticks of a scheduled audit are two arms. Their stored
embeddings go through the permutation test of a perturbation (``run_test``); the tests
of one comparison (every arm at ``epoch`` against ``reference_epoch``) are one family for
the multiplicity correction, with the audit's correction and alpha.

``_epochs`` reads the ticks of an audit in epoch order (time order for dated epochs, such
as scheduled ticks, whatever order they ran in), ``_plan`` plans the comparisons, ``_compare``
tests and decides them, ``_history`` reads the recorded tests back for the report, and
``_monitor`` replays the anytime-valid drift monitor of every arm over the epochs (the
default of ``dbpa drift`` and of scheduled audits). The
record is read through the small ``*Reader`` protocols (``storage.Store`` satisfies
them); no model is called and nothing is written here.
"""

from ._compare import (
    DriftResult,
    Loaded,
    VectorReader,
    decide,
    load_many,
    load_vectors,
    run_comparison,
)
from ._epochs import Epoch, EpochReader, epoch_order, read_epochs
from ._history import DriftHistory, DriftPoint, HistoryReader, read_history
from ._monitor import (
    ALL_SERIES,
    POOLS,
    EvidencePoint,
    MonitorHistory,
    MonitorHistoryReader,
    MonitorReader,
    MonitorReplay,
    MonitorTick,
    read_monitor,
    replay_monitor,
)
from ._plan import AGAINST, Comparison, DriftError, DriftJob, outdated, plan_drift

__all__ = [
    "AGAINST",
    "ALL_SERIES",
    "POOLS",
    "Comparison",
    "DriftError",
    "DriftHistory",
    "DriftJob",
    "DriftPoint",
    "DriftResult",
    "Epoch",
    "EpochReader",
    "EvidencePoint",
    "HistoryReader",
    "Loaded",
    "MonitorHistory",
    "MonitorHistoryReader",
    "MonitorReader",
    "MonitorReplay",
    "MonitorTick",
    "VectorReader",
    "decide",
    "epoch_order",
    "load_many",
    "load_vectors",
    "outdated",
    "plan_drift",
    "read_epochs",
    "read_history",
    "read_monitor",
    "replay_monitor",
    "run_comparison",
]
