"""Model strings checked without litellm agree with litellm, and the lists behind the check
are the installed litellm's (an upgrade that changes them fails here, not silently)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from dbpa.llm import LITELLM_ENDPOINT_HOSTS, LITELLM_PROVIDERS, check_model_string, litellm

REGENERATE = "update dbpa/llm/_provider_names.py from the installed litellm"


def test_the_providers_are_the_installed_litellms():
    lib = litellm()
    from litellm.llms.openai_like import json_loader

    json_providers = json.loads((Path(json_loader.__file__).parent / "providers.json").read_text())
    installed = {getattr(p, "value", p) for p in lib.provider_list} | set(json_providers)
    assert not installed - LITELLM_PROVIDERS, f"new in litellm: {REGENERATE}"
    assert not LITELLM_PROVIDERS - installed, f"gone from litellm: {REGENERATE}"


def test_the_endpoint_hosts_are_the_installed_litellms():
    hosts = {
        (urlparse(e if "://" in e else f"https://{e}").hostname or "").lower()
        for e in litellm().openai_compatible_endpoints
    }
    assert hosts == LITELLM_ENDPOINT_HOSTS, REGENERATE


ROUTABLE = [
    ("openai/gpt-4o-mini", None),
    ("anthropic/claude-3-5-haiku-20241022", None),
    ("hosted_vllm/meta-llama/Llama-3.1-8B", "http://localhost:8000/v1"),
    ("ollama/llama3", None),
    ("gmi/anthropic/claude-opus-4.5", None),  # a provider of litellm's providers.json
    ("gpt-4o-mini", None),  # no prefix: litellm's model map
    ("meta-llama/Llama-3.3-70B", "https://api.groq.com/openai/v1"),  # known endpoint
]


@pytest.mark.parametrize(("model", "api_base"), ROUTABLE)
def test_what_litellm_routes_passes(model, api_base):
    check_model_string(model, api_base)
    litellm().get_llm_provider(model, api_base=api_base)


@pytest.mark.parametrize(
    ("model", "api_base", "message"),
    [
        ("nosuchprovider/fake", None, r"^'nosuchprovider/fake': unknown provider 'nosuchprovider'"),
        ("OpenAI/gpt-4o", None, r"unknown provider 'OpenAI'; .*did you mean openai/\?$"),
        (
            "meta-llama/Llama-3",
            "http://localhost:8000/v1",
            r"; for an OpenAI-compatible server at api_base, write openai/meta-llama/Llama-3$",
        ),
    ],
)
def test_an_unknown_provider_is_refused_as_by_litellm(model, api_base, message):
    with pytest.raises(ValueError, match=message) as info:
        check_model_string(model, api_base)
    assert "expected a litellm provider (openai/, anthropic/" in str(info.value)
    assert "https://docs.litellm.ai/docs/providers" in str(info.value)
    with pytest.raises(Exception, match="LLM Provider NOT provided"):
        litellm().get_llm_provider(model, api_base=api_base)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("", r"^empty; give a litellm model string such as openai/gpt-4o-mini$"),
        ("  ", r"^empty; "),
        ("openai/gpt 4o", r"^'openai/gpt 4o' contains spaces or control characters; "),
        ("openai/gpt\t4o", r"contains spaces or control characters"),
        ("openai/", r"^'openai/' names no model after openai/$"),
        ("/gpt-4o", r"^'/gpt-4o' has no provider before '/'; expected provider/model$"),
        ("local/nope", r"^unknown local model 'local/nope'; known: local/smollm2-135m$"),
    ],
)
def test_malformed_strings_are_refused(model, message):
    with pytest.raises(ValueError, match=message):
        check_model_string(model)


def test_local_models_are_allowed_where_asked():
    check_model_string("local/smollm2-135m")
    with pytest.raises(ValueError, match="unknown provider 'local'") as info:
        check_model_string("local/smollm2-135m", local=False)
    assert "embedded" not in str(info.value)


def test_checking_imports_no_litellm():
    code = (
        "import sys\n"
        "from dbpa.llm import check_model_string\n"
        "check_model_string('openai/gpt-4o-mini')\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
