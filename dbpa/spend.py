"""A run's spend cap against its config and plan, before anything is sent.

``check_prices``: every priced model of a capped run has a known price (exit 2 otherwise);
``lowest_cost``: the least the run's outputs can cost (each request's prompt alone, at its
model's input price); ``check_estimate``: a cap below an estimate is refused.
"""

from __future__ import annotations

from dbpa.config import AuditConfig, ConfigError
from dbpa.llm import Prices, UnknownPriceError, litellm, model_prices, requests_needed
from dbpa.plan import AuditPlan
from dbpa.specs import ModelSpec


def check_prices(config: AuditConfig, plan: AuditPlan) -> dict[str, Prices]:
    """The prices of every model the plan samples (by label), when the config has a cap;
    a ``ConfigError`` naming the model and the keys to set where one is unknown."""
    if config.max_cost_usd is None:
        return {}
    found: dict[str, Prices] = {}
    for model in _models(plan):
        try:
            found[model.label] = prices = model_prices(model)
        except UnknownPriceError as exc:
            raise ConfigError(f"max_cost_usd: {exc}") from None
        if not model.is_local and prices.max_tokens is None:
            raise ConfigError(
                f"max_cost_usd: model {model.label!r}: nothing bounds the length of an answer; "
                "a capped run needs the model's params.max_tokens"
            )
    return found


def lowest_cost(config: AuditConfig, plan: AuditPlan, prices: dict[str, Prices]) -> float:
    """The least the plan's k outputs per arm can cost: every request pays its prompt
    (counted by litellm's token counter) at its model's input price, its answer nothing."""
    total = 0.0
    for arm in plan.arms:
        price = prices[arm.model.label].input_per_token
        if price == 0:
            continue
        messages = [m.model_dump() for m in arm.messages]
        tokens = litellm().token_counter(model=arm.model.model, messages=messages)
        total += requests_needed(arm.model, range(plan.k)) * tokens * price
    return total


def check_estimate(config: AuditConfig, estimate: float, what: str) -> None:
    """``ConfigError`` when ``estimate`` (USD, ``what`` says of what) exceeds the cap."""
    cap = config.max_cost_usd
    if cap is not None and estimate > cap:
        raise ConfigError(
            f"max_cost_usd: {what} is ${estimate:.4f}, above the cap ${cap:g}; nothing was "
            "sent (raise the cap or lower k)"
        )


def _models(plan: AuditPlan) -> list[ModelSpec]:
    seen: dict[str, ModelSpec] = {}
    for arm in plan.arms:
        seen.setdefault(arm.model.label, arm.model)
    return list(seen.values())
