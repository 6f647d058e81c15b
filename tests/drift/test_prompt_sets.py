"""Drift over a set of prompts: every prompt's arms are compared, each under its own name."""

from __future__ import annotations

from pathlib import Path

from dbpa.config import parse_config
from dbpa.drift import replay_monitor
from dbpa.drift._plan import _jobs
from dbpa.plan import plan_audit
from storage import Store
from tests.drift.conftest import BASE, record_tick

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


def test_a_change_on_every_prompt_alarms_pooled_and_not_arm_by_arm(tmp_path: Path) -> None:
    """Six prompts whose originals all move a little from the sixth of twelve ticks: pooled,
    the originals' series alarms (its six arms' evidence multiplied, alarm line 2 / alpha);
    each arm alone (alarm line 12 / alpha) none does. A reset of the series restarts all
    of its arms."""
    prompts = [{"id": f"q{i}", "prompt": f"Question {i}?"} for i in range(6)]
    epochs = [f"2026-11-{day:02d}T03:00:00+00:00" for day in range(1, 13)]
    moved = {f"original on q{i}": 1.0 for i in range(6)}
    with Store(tmp_path / "set.duckdb") as store:
        for i, epoch in enumerate(epochs):
            record_tick(
                store,
                epoch,
                shift=moved if i >= 5 else None,
                prompt=None,
                prompts=prompts,
                perturbations=SET["perturbations"],
                monitor={"conformal": "outputs"},  # two processes: pooling, not the design
            )
        pooled = replay_monitor(store, "drifty")
        alone = replay_monitor(store, "drifty", pool="arms")
        store.add_monitor_reset("drifty", "original (m)", epochs[8])
        reset = replay_monitor(store, "drifty")
    assert pooled.members == {"original (m)": 6, "system-be-brief (m)": 6}
    assert pooled.design.startswith("12 arms pooled over the prompts into 2 series")
    alarms = {t.series: t.state.alarm_tick for t in pooled.latest()}
    assert alarms["system-be-brief (m)"] is None
    assert alarms["original (m)"] is not None
    assert alarms["original (m)"] > 4  # not before the change (the sixth epoch is tick 5)
    assert {t.state.threshold for t in pooled.latest()} == {2 / 0.05}
    assert {t.arms for t in pooled.ticks} == {6}
    assert alone.arms == 12
    assert not any(t.state.alarm for t in alone.ticks)
    latest = {t.series: t for t in reset.latest()}
    assert latest["original (m)"].baseline_epoch == epochs[8]
    assert latest["system-be-brief (m)"].baseline_epoch == epochs[0]
