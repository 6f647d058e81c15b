"""An arm's identity: everything that changes its outputs, the seed included."""

from __future__ import annotations

from dbpa.arms import Arm
from dbpa.specs import Message, ModelSpec

MODEL = ModelSpec(model="openai/m", params={"temperature": 0.7})
MESSAGES = [Message(role="user", content="Is it flu?")]


def test_arms_of_seed_0_keep_the_ids_records_already_hold():
    """Ids computed by the code before the seed was part of them (2026-11-26)."""
    assert Arm.of(MODEL, MESSAGES, "0").arm_id == "72573834c0fa407982e3bce8e7db8daa"
    replicate = Arm.of(MODEL, MESSAGES, "0", replicate=2)
    assert replicate.arm_id == "b9796aa6aeb3a6985cc2b5b94b7c601e"


def test_another_seed_is_another_arm():
    ids = {Arm.of(MODEL, MESSAGES, "0", seed=s).arm_id for s in (0, 1, 2, -1)}
    assert len(ids) == 4
    assert Arm.of(MODEL, MESSAGES, "0", seed=3).seed == 3
    replicas = {Arm.of(MODEL, MESSAGES, "0", replicate=1, seed=s).arm_id for s in (0, 1)}
    assert len(replicas) == 2
