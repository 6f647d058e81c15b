"""The sampled arms of a run: prompts, a few outputs each, tokens and cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import pandas as pd

from ._data import ArmView, ModelUsage, Output, Usage
from ._values import as_float, as_int, as_json

__all__ = ["ArmReader", "gather_arms", "usage_by_model"]


class ArmReader(Protocol):
    """Reads arms, their outputs and their usage from the record (``storage.Store`` is one)."""

    def arms(self, arm_ids: Sequence[str]) -> pd.DataFrame:
        """The stored rows of these arms."""
        ...

    def samples(self, arm_ids: Sequence[str], *, first: int | None = None) -> pd.DataFrame:
        """The stored outputs of these arms (with ``first``: of index below it), by arm and
        index."""
        ...

    def usage(self, arm_ids: Sequence[str]) -> pd.DataFrame:
        """Outputs, tokens and cost per arm."""
        ...


def _arm_roles(results: pd.DataFrame) -> dict[str, list[str]]:
    roles: dict[str, list[str]] = {}
    for r in results.itertuples():
        original = f"original of {r.family}"
        if original not in roles.setdefault(str(r.original_arm), []):
            roles[str(r.original_arm)].append(original)
        roles.setdefault(str(r.perturbed_arm), []).append(f"{r.perturbation_id} ({r.family})")
    return roles


def _usage_of(row: Any) -> Usage:
    return Usage(
        outputs=int(row.outputs),
        empty=int(row.empty),
        filtered=int(row.filtered),
        prompt_tokens=as_int(row.prompt_tokens) or 0,
        completion_tokens=as_int(row.completion_tokens) or 0,
        cost_usd=as_float(row.cost_usd),
    )


def gather_arms(
    store: ArmReader, results: pd.DataFrame, failures: Mapping[str, str], samples_per_arm: int
) -> tuple[ArmView, ...]:
    """Every arm of the run's results, with its first ``samples_per_arm`` outputs."""
    roles = _arm_roles(results)
    ids = list(roles)
    stored = {str(r.arm_id): r for r in store.arms(ids).itertuples()}
    usage = {str(r.arm_id): _usage_of(r) for r in store.usage(ids).itertuples()}
    outputs: dict[str, list[Output]] = {}
    for s in store.samples(ids, first=samples_per_arm).itertuples():
        outputs.setdefault(str(s.arm_id), []).append(
            Output(int(s.idx), str(s.text), str(s.status), as_int(s.seed))
        )
    views = []
    for arm_id in ids:
        if (row := stored.get(arm_id)) is not None:
            model, params = str(row.model), as_json(row.params)
            messages = tuple((str(m["role"]), str(m["content"])) for m in as_json(row.messages))
        else:
            model, params, messages = "?", {}, ()
        views.append(
            ArmView(
                arm_id=arm_id,
                model=model,
                params=params,
                messages=messages,
                roles=tuple(roles[arm_id]),
                outputs=tuple(outputs.get(arm_id, ())),
                usage=usage.get(arm_id),
                failure=failures.get(arm_id),
            )
        )
    return tuple(views)


def _add(a: Usage, b: Usage) -> Usage:
    cost = (
        None if a.cost_usd is None and b.cost_usd is None else (a.cost_usd or 0) + (b.cost_usd or 0)
    )
    return Usage(
        outputs=a.outputs + b.outputs,
        empty=a.empty + b.empty,
        filtered=a.filtered + b.filtered,
        prompt_tokens=a.prompt_tokens + b.prompt_tokens,
        completion_tokens=a.completion_tokens + b.completion_tokens,
        cost_usd=cost,
    )


def usage_by_model(arms: Iterable[ArmView]) -> tuple[tuple[ModelUsage, ...], Usage]:
    """Usage per model (arms of one model summed) and in total."""
    zero = Usage(0, 0, 0, 0, 0, None)
    per_model: dict[str, tuple[int, Usage]] = {}
    for arm in arms:
        if arm.usage is None:
            continue
        count, usage = per_model.get(arm.model, (0, zero))
        per_model[arm.model] = (count + 1, _add(usage, arm.usage))
    total = zero
    for _, usage in per_model.values():
        total = _add(total, usage)
    return tuple(ModelUsage(m, n, u) for m, (n, u) in per_model.items()), total
