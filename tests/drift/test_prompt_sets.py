"""Drift over a set of prompts: every prompt's arms are compared, each under its own name."""

from __future__ import annotations

from dbpa.config import parse_config
from dbpa.drift._plan import _jobs
from dbpa.plan import plan_audit
from tests.drift.conftest import BASE

SET = {
    **{key: value for key, value in BASE.items() if key != "prompt"},
    "prompts": [{"id": "sky", "prompt": "Is the sky blue?"}, {"id": "grass", "prompt": "Green?"}],
    "perturbations": [{"kind": "system_prompt", "variants": ["Be brief."]}],
}


def _arms(epoch: str) -> set[tuple[str, str]]:
    """(prompt id, arm id) of every per-prompt test's two arms at ``epoch``."""
    plan = plan_audit(parse_config({**SET, "epoch": epoch}))
    return {(t.prompt_id, a.arm_id) for t in plan.prompt_tests for a in (t.original, t.perturbed)}


def test_every_prompts_arms_drift_under_their_prompts_name() -> None:
    config = parse_config({**SET, "epoch": "2026-11-28"})
    (spec,) = config.family
    jobs = _jobs(config, plan_audit(config), "2026-11-27", config.k)
    assert sorted(job.label for job in jobs) == sorted(
        f"{role} on {prompt} (m)" for role in ("original", spec.id) for prompt in ("sky", "grass")
    )
    assert {job.arm for job in jobs} == {arm for _, arm in _arms("2026-11-28")}
    assert {job.reference_arm for job in jobs} == {arm for _, arm in _arms("2026-11-27")}
    for job in jobs:  # each arm against the same prompt's arm at the reference epoch
        prompt = job.role.rsplit(" on ", 1)[1]
        assert (prompt, job.reference_arm) in _arms("2026-11-27")


def test_every_prompts_arm_of_a_perturbation_is_one_series() -> None:
    config = parse_config({**SET, "epoch": "2026-11-28"})
    (spec,) = config.family
    jobs = _jobs(config, plan_audit(config), "2026-11-27", config.k)
    pools: dict[str, set[str]] = {}
    for job in jobs:
        pools.setdefault(job.pool, set()).add(job.prompt_id)
    assert pools == {"original (m)": {"sky", "grass"}, f"{spec.id} (m)": {"sky", "grass"}}
