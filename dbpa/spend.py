"""A run's spend caps against its config and plan, before anything is sent.

The run's ``max_cost_usd`` holds every model's requests, a model's own ``max_cost_usd``
that model's. ``check_prices``: every model a cap holds has a known price (exit 2
otherwise); ``lowest_costs``: the least each model's outputs can cost (each request's prompt
alone, at its input price); ``check_lowest`` / ``check_estimate``: a cap below an estimate
is refused.
"""

from __future__ import annotations

import math

from dbpa.config import AuditConfig, ConfigError
from dbpa.llm import (
    BatchUnsupportedError,
    PermanentModelError,
    Prices,
    UnknownPriceError,
    batch_prices,
    check_batchable,
    litellm,
    model_prices,
    requests_needed,
)
from dbpa.perturbations import ModelSwapSpec
from dbpa.plan import AuditPlan
from dbpa.specs import ModelSpec


def model_cap_keys(config: AuditConfig) -> dict[str, tuple[str, float]]:
    """Each model with a cap of its own: label -> (its config key, USD)."""
    found: dict[str, tuple[str, float]] = {}
    for i, model in enumerate(config.models):
        if model.max_cost_usd is not None:
            found.setdefault(model.label, (f"models.{i}.max_cost_usd", model.max_cost_usd))
    for i, spec in enumerate(config.perturbations):
        if isinstance(spec, ModelSwapSpec):
            for j, variant in enumerate(spec.models):
                if variant.model.max_cost_usd is not None:
                    key = f"perturbations.{i}.models.{j}.model.max_cost_usd"
                    found.setdefault(variant.model.label, (key, variant.model.max_cost_usd))
    return found


def check_batches(config: AuditConfig) -> None:
    """A ``ConfigError`` naming the model and why where ``batch: true`` cannot be honoured
    (its provider has no batch API dbpa drives)."""
    for where, model in _model_specs(config):
        if model.batch:
            try:
                check_batchable(model)
            except (BatchUnsupportedError, PermanentModelError) as exc:
                raise ConfigError(f"{where}.batch: {exc}") from None


def _model_specs(config: AuditConfig) -> list[tuple[str, ModelSpec]]:
    found = [(f"models[{i}]", m) for i, m in enumerate(config.models)]
    for i, spec in enumerate(config.perturbations):
        if isinstance(spec, ModelSwapSpec):
            found += [
                (f"perturbations[{i}].models[{j}].model", v.model)
                for j, v in enumerate(spec.models)
            ]
    return found


def is_capped(config: AuditConfig) -> bool:
    """Whether the run or any of its models has a spend cap."""
    return config.max_cost_usd is not None or bool(model_cap_keys(config))


def check_prices(config: AuditConfig, plan: AuditPlan) -> dict[str, Prices]:
    """The prices of every model of the plan a cap holds (by label); a ``ConfigError``
    naming the model and the keys to set where one is unknown."""
    own = model_cap_keys(config)
    found: dict[str, Prices] = {}
    for model in _models(plan):
        if config.max_cost_usd is None and model.label not in own:
            continue
        key = own[model.label][0] if model.label in own else "max_cost_usd"
        try:
            found[model.label] = prices = model_prices(model)
        except UnknownPriceError as exc:
            raise ConfigError(f"{key}: {exc}") from None
        if not model.is_local and prices.max_tokens is None:
            raise ConfigError(
                f"{key}: model {model.label!r}: nothing bounds the length of an answer; "
                "a capped run needs the model's params.max_tokens"
            )
    return found


def lowest_costs(plan: AuditPlan, prices: dict[str, Prices]) -> dict[str, float]:
    """The least the plan's k outputs per arm can cost, by model (the models of ``prices``):
    every request pays its prompt (counted by litellm's token counter) at its model's input
    price, its answer nothing."""
    totals = dict.fromkeys(prices, 0.0)
    for arm in plan.arms:
        price = prices.get(arm.model.label)
        if price is None or price.input_per_token == 0:
            continue
        messages = [m.model_dump() for m in arm.messages]
        tokens = litellm().token_counter(model=arm.model.model, messages=messages)
        need = requests_needed(arm.model, range(plan.k))
        totals[arm.model.label] += need * tokens * price.input_per_token
    return totals


def check_lowest(config: AuditConfig, plan: AuditPlan) -> float:
    """Refuse (``ConfigError``) a run whose prompts alone cost more than its cap or a model's
    own; the least the capped models' requests cost in all."""
    lowest = lowest_costs(plan, check_prices(config, plan))
    what = "the least its prompts alone can cost"
    check_estimate(config, sum(lowest.values()), what)
    for label, (key, cap) in model_cap_keys(config).items():
        if lowest.get(label, 0.0) > cap:
            raise ConfigError(
                f"{key}: {what} on model {label!r} is {usd_above(lowest[label], cap)}, above "
                f"its cap ${cap:g}; nothing was sent (raise the cap or lower k)"
            )
    return sum(lowest.values())


def batch_share(config: AuditConfig) -> float | None:
    """The most any of the config's models costs in a batch as a share of its list price
    (litellm's batch prices, else ``BATCH_DISCOUNT``); None when a price is unknown or
    every model is the embedded one."""
    shares = []
    for _, model in _model_specs(config):
        if model.is_local:
            continue
        try:
            listed = model_prices(model)
        except UnknownPriceError:
            return None
        batched = batch_prices(model)
        if batched is None:
            return None
        for lst, bat in (
            (listed.input_per_token, batched.input_per_token),
            (listed.output_per_token, batched.output_per_token),
        ):
            shares.append(bat / lst if lst > 0 else 0.0)
    return max(shares) if shares else None


def check_estimate(config: AuditConfig, estimate: float, what: str) -> None:
    """``ConfigError`` when ``estimate`` (USD, ``what`` says of what) exceeds the run's cap."""
    cap = config.max_cost_usd
    if cap is not None and estimate > cap:
        raise ConfigError(
            f"max_cost_usd: {what} is {usd_above(estimate, cap)}, above the cap ${cap:g}; "
            "nothing was sent (raise the cap or lower k)"
        )


def usd_above(amount: float, cap: float) -> str:
    """``amount`` (above ``cap``) in dollars, to 4 significant digits and at least cents, or
    to as many more decimals as it takes to read above ``cap`` (``$0.0001037``, not
    ``$0.0001``, beside a cap of ``$0.0001``)."""
    decimals = max(2, 3 - math.floor(math.log10(amount)))
    while float(f"{amount:.{decimals}f}") <= cap and decimals < 17:
        decimals += 1
    return f"${amount:,.{decimals}f}"


def _models(plan: AuditPlan) -> list[ModelSpec]:
    seen: dict[str, ModelSpec] = {}
    for arm in plan.arms:
        seen.setdefault(arm.model.label, arm.model)
    return list(seen.values())
