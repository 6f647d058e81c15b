"""dbpa.launch: one run of an audit from its config, below the command line.

A config is loaded, bound and planned once (:func:`prepare`), and every later step receives
that plan: what the record says is left (``PendingWork``), the warm-ups of what that needs,
sampling's head start while Prefect's temporary server starts (``PrefectServer``), then the
audit flow, or, for a finished audit, the decisions and reports from the record alone
(:func:`run_prepared`). The command line only parses, calls and prints.
"""

from ._from_record import MESSAGE as FROM_RECORD_MESSAGE
from ._from_record import RecordedRun, decide_from_record
from ._head_start import HeadStart
from ._prepare import Prepared, bind_stored, first_look, load_audit, prepare
from ._run import Launched, run_prepared
from ._server import PrefectServer, TemporaryServerError
from ._warm import embedder_warmed, wait_for_warm_ups, warm_up
from ._work import PendingWork, generation_work, pending_work

__all__ = [
    "FROM_RECORD_MESSAGE",
    "HeadStart",
    "Launched",
    "PendingWork",
    "PrefectServer",
    "Prepared",
    "RecordedRun",
    "TemporaryServerError",
    "bind_stored",
    "decide_from_record",
    "embedder_warmed",
    "first_look",
    "generation_work",
    "load_audit",
    "pending_work",
    "prepare",
    "run_prepared",
    "wait_for_warm_ups",
    "warm_up",
]
