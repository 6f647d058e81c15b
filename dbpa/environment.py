"""Process settings that must be in place before Prefect or litellm is imported."""

from __future__ import annotations

import os

RECORD = "DBPA_DB"
"""The environment variable naming the record when ``--db`` is not given (a file's path or a
shared record's URL): read by every command and by the deployments' ticks."""

DEFAULTS = {
    # litellm fetches its model price list from the internet at import unless told not to.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # No telemetry from Prefect, its ephemeral server or anything else that honours these.
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # The audit flow's parameter is the whole config: a family of thousands of perturbations
    # is more than the 512 KiB a Prefect server stores by default (the temporary server
    # started for `dbpa run` takes its settings from here; a server of your own needs it too).
    "PREFECT_SERVER_API_MAX_PARAMETER_SIZE": "0",
    "HF_HUB_OFFLINE": "1",
    # The CLI shows its own progress; transformers' "Loading weights" bar would cut into it.
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # The statistics multiply small matrices thousands of times; on two busy cores OpenBLAS's
    # threads wait on each other and a test took 5-10x longer than on one thread
    # (`python -m benchmarks threads`). Read when numpy loads OpenBLAS, so it holds for every
    # thread of the process (torch, the embedder, keeps its own threads).
    "OPENBLAS_NUM_THREADS": "1",
}


def configure() -> None:
    """Set the defaults above where the user has not chosen otherwise."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
