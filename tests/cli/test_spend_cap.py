"""``max_cost_usd``: refused before anything is sent, a run stopped at its cap, resumed."""

from __future__ import annotations

import pytest

from dbpa.spend import usd_above
from storage import Store
from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import make_config

pytestmark = pytest.mark.usefixtures("wide_console")

IN, OUT = 1e-6, 1e-5
PRICES = {"input_cost_per_token": IN, "output_cost_per_token": OUT, "params": {"max_tokens": 20}}


def _priced(server, **overrides):
    config = make_config(server, **overrides)
    config["models"][0].update(PRICES)
    return config


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("max_cost_usd", 0, "max_cost_usd"),
        ("max_cost_usd", -1, "max_cost_usd"),
        ("models.0.max_cost_usd", 0, "models[0].max_cost_usd"),
        ("models.0.input_cost_per_token", -1e-6, "models[0].input_cost_per_token"),
        ("models.0.output_cost_per_token", -1e-6, "models[0].output_cost_per_token"),
        ("models.0.output_cost_per_token", "null", "models[0]: input_cost_per_token and"),
    ],
)
def test_a_bad_cap_or_price_exits_2_naming_the_key(provider, write_config, key, value, named):
    result = invoke("validate", str(write_config(_priced(provider))), "--set", f"{key}={value}")
    assert result.exit_code == 2, result.output
    assert named in text(result)


def test_an_unknown_price_under_a_cap_exits_2_naming_the_keys(provider, write_config):
    config = make_config(provider, max_cost_usd=1.0)  # openai/scripted: not in litellm's map
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 2, result.output
    assert "openai/scripted" in text(result)
    assert "input_cost_per_token and output_cost_per_token" in text(result)
    assert invoke("validate", str(write_config(make_config(provider)))).exit_code == 0


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_cap_below_the_prompts_cost_is_refused(tmp_path, provider, write_config, command):
    config = _priced(provider, max_cost_usd=0.0001)
    # 5 arms x k=8 requests of a prompt of over 10 tokens at $1e-6: at least $0.0004
    args = [command, str(write_config(config)), "--db", str(tmp_path / "none.duckdb")]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "max_cost_usd" in text(result)
    assert "above the cap $0.0001" in text(result)
    shown = text(result).split(" is $")[1].split(",")[0]
    assert float(shown) > 0.0001  # the estimate reads above the cap, not as the cap
    if command == "validate":
        roomy = invoke(*args, "--set", "max_cost_usd=1")
        assert roomy.exit_code == 0, roomy.output


@pytest.mark.parametrize(
    ("amount", "cap", "shown"),
    [
        (0.00010372, 0.0001, "$0.0001037"),
        (0.10000004, 0.1, "$0.10000004"),
        (0.004, 0.001, "$0.004000"),
        (12345.678, 100.0, "$12,345.68"),
    ],
)
def test_an_amount_above_a_cap_reads_above_it(amount, cap, shown):
    assert usd_above(amount, cap) == shown


def test_a_models_cap_below_its_prompts_cost_is_refused(tmp_path, provider, write_config):
    config = _priced(provider)  # no cap for the run: the model's alone
    config["models"][0]["max_cost_usd"] = 0.0001
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 2, result.output
    assert "models.0.max_cost_usd" in text(result)
    assert "on model 'openai/scripted'" in text(result)
    unpriced = make_config(provider)
    unpriced["models"][0]["max_cost_usd"] = 1.0
    refused = invoke("validate", str(write_config(unpriced)))
    assert refused.exit_code == 2, refused.output
    assert "models.0.max_cost_usd" in text(refused)
    assert "input_cost_per_token and output_cost_per_token" in text(refused)


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_stops_at_its_cap_and_resumes_with_a_larger_one(tmp_path, provider, write_config):
    # A request reserves <= 71 prompt tokens x $1e-6 + 20 x $1e-5 = $0.000271 and costs about
    # $0.0001; 40 outputs cost about $0.004 in all, so a cap of $0.002 stops the run halfway.
    cap = 0.002
    config = write_config(_priced(provider, max_cost_usd=cap))
    db = tmp_path / "capped.duckdb"
    result = invoke("run", str(config), "--db", str(db))
    assert result.exit_code == 1, result.output
    line = text(result)
    assert "spend cap reached" in line
    assert "max_cost_usd=$0.002" in line
    assert "output(s) still missing" in line
    assert f"dbpa run {config} --db {db} --set max_cost_usd=" in line
    with Store(db, read_only=True) as store:
        stored = store.samples()
    sent = provider.counts.by_endpoint["/v1/chat/completions"]
    assert 0 < len(stored) < 40
    assert sent == len(stored)  # everything answered is stored
    real = (stored.prompt_tokens * IN + stored.completion_tokens * OUT).sum()
    assert real <= cap

    resumed = invoke("run", str(config), "--db", str(db), "--set", "max_cost_usd=1")
    assert resumed.exit_code == 0, resumed.output
    asked = [
        (str(body["messages"]), body["seed"]) for body in provider.counts.requests if "seed" in body
    ]
    assert len(asked) == 40
    assert len(set(asked)) == 40  # nothing asked twice
