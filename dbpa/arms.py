"""Arms: what one set of k outputs is sampled from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dbpa.specs import Message, ModelSpec, content_hash


@dataclass(frozen=True)
class Arm:
    """A model, its sampling parameters, the chat messages, the epoch and the seed.

    Everything that changes the outputs is in ``arm_id``: the seed too, since it seeds every
    request (``AuditPlan.arm_seed``), so another seed is another sample; the concurrency,
    timeouts and display name of the model are not.
    """

    arm_id: str
    model: ModelSpec
    messages: tuple[Message, ...]
    epoch: str
    replicate: int = 0
    """0 for an arm of the family; r > 0 for the r-th replicate of an original: the same
    model and messages sampled again under other seeds (an equivalence margin's calibration)."""
    seed: int = 0
    """The seed its requests derive from (the audit's, or a generator spec's)."""

    @classmethod
    def of(
        cls,
        model: ModelSpec,
        messages: Sequence[Message],
        epoch: str,
        replicate: int = 0,
        seed: int = 0,
    ) -> Arm:
        """The arm with its content-derived id. A replicate's id also holds its number, and
        a seed other than 0 the seed (so arms of seed 0, the default, keep the ids they had
        before the seed was part of them)."""
        msgs = tuple(messages)
        content = [model.model, model.api_base, model.params, [m.model_dump() for m in msgs], epoch]
        if replicate:
            content.append(["replicate", replicate])
        if seed:
            content.append(["seed", seed])
        arm_id = content_hash("arm", *content)
        return cls(
            arm_id=arm_id, model=model, messages=msgs, epoch=epoch, replicate=replicate, seed=seed
        )
