"""The statistics core stays pure numpy/scipy."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ["prefect", "duckdb", "litellm", "torch", "sentence_transformers", "pandas"]


def test_importing_the_statistics_pulls_in_no_orchestration_or_io():
    code = (
        f"import sys, dbpa, dbpa.stats; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
