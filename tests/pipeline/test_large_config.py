"""A config too large for a Prefect flow-run parameter by Prefect's default still runs."""

from __future__ import annotations

import json

import pytest

from dbpa.config import parse_config
from flows.audit import run_audit
from tests.pipeline.conftest import make_config

pytestmark = pytest.mark.usefixtures("prefect_harness")

PREFECT_DEFAULT_LIMIT = 524_288
"""Bytes of flow-run parameters a Prefect server stores unless told otherwise."""


def test_a_config_over_prefects_parameter_limit_runs(provider, tmp_path):
    # A family of thousands of perturbations serialises to megabytes; a long description
    # makes one as large without sampling thousands of arms.
    config = parse_config(make_config(provider) | {"description": "a long audit. " * 40_000})
    assert len(json.dumps(config.model_dump(mode="json"))) > PREFECT_DEFAULT_LIMIT
    outcome = run_audit(config, str(tmp_path / "large.duckdb"))
    assert outcome.status == "completed"
