"""Every way a config file or an override can be wrong is a ``ConfigError`` naming the file,
the field and the reason, and ``dbpa validate`` exit 2 without a traceback."""

from __future__ import annotations

import copy
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbpa.config import ConfigError, load_config, parse_config, parse_overrides

from .conftest import BASE, Validate, flat


def laughs(levels: int) -> str:
    """A "billion laughs" mapping: each level lists the one below it nine times."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "{" + ", ".join(lines) + "}"


def write(tmp_path: Path, content: str | bytes, name: str = "audit.yaml") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def base_yaml(**changes: Any) -> str:
    return yaml.safe_dump(BASE | changes, sort_keys=False)


BAD_FILES = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00", r"line 1, column 1: not UTF-8 text \(byte 0x89\)"),
    "latin-1": (
        "name: caf\xe9\n".encode("latin-1"),
        r"line 1, column 10: not UTF-8 text \(byte 0xe9\); a config is a YAML text file$",
    ),
    "nul": ("name: a\x00b\n", r"line 1, column 8: not valid YAML \(character #x0000 is not"),
    "deep": ("[" * 10_000 + "]" * 10_000, r"line 1, column 101: not valid YAML \(nested more"),
    "deep-value": (
        base_yaml() + "description: " + "[" * 5_000 + "]" * 5_000,
        r"line 16, column 113: not valid YAML \(nested more than 100 levels deep\)$",
    ),
    "laughs": (
        base_yaml().replace("temperature: 0.7", f"temperature: 0.7\n    x: {laughs(9)}"),
        r": more than 1,000,000 values once its aliases are expanded; write the values out",
    ),
    "cycle": ("name: &a [*a]\n", r": an alias refers to a list or mapping that contains it"),
    "deep-by-aliases": (
        "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n",
        r": nested more than 100 levels deep once its aliases are expanded$",
    ),
    "bad-date": (base_yaml(k="X").replace("k: X", "k: 2024-13-01"), r"cannot read '2024-13-01'"),
    "huge-int": (base_yaml(k="X").replace("k: X", "k: " + "9" * 5000), r"cannot read '9999"),
    "two-documents": (
        base_yaml() + "---\nname: x\n",
        r"not valid YAML \(expected a single document in the stream, but found another",
    ),
    "empty": ("", r": expected a mapping of settings at the top level, found an empty file$"),
    "list": ("- a\n", r": expected a mapping of settings at the top level, found a list$"),
    "unhashable-key": ("? [a]\n: 1\n", r"line 1, column 3: not valid YAML \(found unhashable"),
    "lone-surrogate": (
        base_yaml() + 'description: "a \\ud800 b"\n',
        r"line 16, column 14: not valid YAML \('a \\ud800 b' holds an escaped lone surrogate",
    ),
    "python-tag": ("name: !!python/object:os.system x\n", r"could not determine a constructor"),
}


@pytest.mark.parametrize(("content", "message"), BAD_FILES.values(), ids=list(BAD_FILES))
def test_a_bad_file_is_a_config_error_naming_it(tmp_path, validate: Validate, content, message):
    path = write(tmp_path, content)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    result = validate(path)
    assert result.exit_code == 2, result.output
    assert str(path) in flat(result)


def test_a_directory_missing_file_and_unreadable_file(tmp_path, validate: Validate, monkeypatch):
    with pytest.raises(ConfigError, match=f"^{tmp_path}: is a directory, not a config file$"):
        load_config(tmp_path)
    assert validate(tmp_path).exit_code == 2
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such file$"):
        load_config(tmp_path / "nope.yaml")
    locked = write(tmp_path, base_yaml())
    opened = Path.open

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ConfigError, match=r"audit\.yaml: cannot be read \(permission denied\)$"):
        load_config(locked)
    assert validate(locked).exit_code == 2


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0,
    reason="root reads a file whatever its mode (the refusal is simulated in the test above)",
)
def test_a_file_without_read_permission(tmp_path):
    locked = write(tmp_path, base_yaml())
    locked.chmod(0)
    with pytest.raises(ConfigError, match=r"cannot be read \(permission denied\)$"):
        load_config(locked)


def test_a_huge_file_is_refused_without_reading_it_all(tmp_path, validate: Validate):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:  # a 100 MB string scalar, sparse on disk
        f.write(b'description: "')
        f.seek(100_000_000)
        f.write(b'"\n')
    with pytest.raises(ConfigError, match=r"huge\.yaml: larger than 10 MB: not an audit config"):
        load_config(path)
    assert validate(path).exit_code == 2


def test_a_large_file_under_the_bound_is_read(tmp_path):
    description = "x" * 1_000_000  # PyYAML reads about 1 MB/s: 9 MB would take 8 s
    config = load_config(write(tmp_path, base_yaml(description=description)))
    assert config.description == description


def test_many_errors_are_counted_beyond_the_first_twenty():
    raw = BASE | {f"unknown_{i}": i for i in range(30)}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, source="f.yaml")
    lines = str(info.value).splitlines()
    assert len(lines) == 21
    assert lines[0] == "f.yaml: unknown_0: unknown key (check its spelling)"
    assert lines[-1] == "f.yaml: ... and 10 more errors"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_permutation": 999}, "n_permutation: unknown key (did you mean n_permutations?)"),
        ({"sequential": {"frist": 4}}, "sequential.frist: unknown key (did you mean first?)"),
        ({"embedder": {"modle": "x"}}, "embedder.modle: unknown key (did you mean model?)"),
        (
            {"models": [{"model": "local/smollm2-135m", "parms": {}}]},
            "models[0].parms: unknown key (did you mean params?)",
        ),
        (
            {"perturbations": [{"kind": "prompt", "variant": ["x"]}]},
            "perturbations[0].variant: unknown key (did you mean variants?)",
        ),
        ({"colour": "red"}, "colour: unknown key (check its spelling)"),  # nothing near it
    ],
)
def test_a_misspelt_key_is_told_the_key_it_is_nearest(changes, message):
    with pytest.raises(ConfigError) as info:
        parse_config(BASE | changes, source="f.yaml")
    assert f"f.yaml: {message}" in str(info.value).splitlines()


def test_a_perturbation_field_is_named_as_written_without_its_kind():
    raw = BASE | {"perturbations": [{"kind": "prompt", "variants": [{"text": 3}]}]}
    with pytest.raises(ConfigError, match=r"^f\.yaml: perturbations\[0\]\.variants\[0\]\.text: "):
        parse_config(raw, source="f.yaml")


def test_odd_keys_are_shown_on_one_short_line():
    raw = BASE | {"a\nb": 1, "k" * 100: 2}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, source="f.yaml")
    assert str(info.value).splitlines() == [
        "f.yaml: 'a\\nb': unknown key (check its spelling)",
        f"f.yaml: '{'k' * 35}...': unknown key (check its spelling)",
    ]


def test_text_that_looks_like_markup_is_shown_as_written(tmp_path, validate: Validate):
    result = validate(write(tmp_path, base_yaml() + '"[/x]": 1\n"[red]y": 2\n'))
    assert result.exit_code == 2
    assert "[/x]: unknown key" in flat(result)
    assert "[red]y: unknown key" in flat(result)
    variants = {"kind": "prompt", "variants": ["[/x] [red]statin?"]}
    result = validate(write(tmp_path, base_yaml(perturbations=[variants])))
    assert result.exit_code == 0, result.output
    assert "user prompt replaced by '[/x] [red]statin?'" in flat(result)


# ---------------------------------------------------------------------- overrides


def test_overrides_address_list_items(base_file):
    config = load_config(
        base_file,
        {"models.0.params.temperature": 0.2, "perturbations.1.label": "control", "k": 20},
    )
    assert config.models[0].params == {"temperature": 0.2}
    assert config.perturbations[1].label == "control"
    assert config.k == 20
    replaced = load_config(base_file, {"models.0": {"model": "openai/gpt-4o"}})
    assert replaced.models[0].model == "openai/gpt-4o"


def test_an_override_edits_one_place_of_a_shared_alias(tmp_path):
    text = base_yaml(models="MODELS").replace(
        "models: MODELS",
        "models:\n- {model: openai/gpt-4o-mini, params: &p {temperature: 0.7}}\n"
        "- {model: openai/gpt-4o, params: *p}",
    )
    config = load_config(write(tmp_path, text), {"models.1.params.temperature": 1.5})
    assert [m.params["temperature"] for m in config.models] == [0.7, 1.5]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("models.1.model", r"override models\.1\.model: models has 1 item\(s\), so no item 1 "),
        ("models.x", r"override models\.x: models is a list; address its items by number \(0 to 0"),
        ("k.x", r"^override k\.x: k is a number, not a mapping or a list$"),
        ("models.0.model.x", r"models\.0\.model is a string, not a mapping or a list$"),
        ("perturbations..label", r"^override perturbations\.\.label: an empty name between dots$"),
    ],
)
def test_a_bad_override_names_it(base_file, validate: Validate, key, message):
    with pytest.raises(ConfigError, match=message):
        load_config(base_file, {key: "x"})
    result = validate(base_file, "--set", f"{key}=x")
    assert result.exit_code == 2
    assert f"override {key}:" in flat(result)


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("k", r"--set 'k': expected KEY=VALUE \(e\.g\. k=30\)"),
        ("x=[", r"--set x: line 1, column 2: not valid YAML \(expected the node content"),
        ("x=" + "[" * 200, r"--set x: line 1, column 101: not valid YAML \(nested more than"),
    ],
)
def test_a_bad_set_value_exits_2(base_file, validate: Validate, pair, message):
    result = validate(base_file, "--set", pair)
    assert result.exit_code == 2
    assert re.search(message, flat(result)), result.output


def test_override_values_are_read_within_the_bounds():
    assert parse_overrides(["k=30", "models.0.params={temperature: 0.2}"]) == {
        "k": 30,
        "models.0.params": {"temperature": 0.2},
    }
    with pytest.raises(ConfigError, match=r"^--set 'k': expected KEY=VALUE \(e\.g\. k=30\)$"):
        parse_overrides(["k"])
    with pytest.raises(ConfigError, match=r"^--set x: line 1, column 101: not valid YAML"):
        parse_overrides(["x=" + "[" * 1000])
    with pytest.raises(ConfigError, match=r"^--set x: more than 1,000,000 values"):
        parse_overrides([f"x={laughs(9)}"])


def test_an_override_value_is_bounded_too(base_file):
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ConfigError, match=r"audit\.yaml: an alias refers to a list or mapping"):
        load_config(base_file, {"models.0.params.x": cyclic})


# ---------------------------------------------------------------------- model strings


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"models": [{"model": "nosuchprovider/fake"}]},
            r"^f\.yaml: models\[0\]\.model: 'nosuchprovider/fake': unknown provider "
            r"'nosuchprovider'; expected a litellm provider \(openai/, anthropic/, ",
        ),
        ({"models": [{"model": "openai/"}]}, r"models\[0\]\.model: 'openai/' names no model"),
        ({"models": [{"model": " "}]}, r"models\[0\]\.model: empty; give a litellm model"),
        ({"models": [{"model": "gpt 4"}]}, r"models\[0\]\.model: 'gpt 4' contains spaces"),
        ({"models": [{"model": "local/nope"}]}, r"models\[0\]\.model: unknown local model"),
        (
            {"perturbations": [{"kind": "model", "models": ["openai/gpt-4o", "opnai/gpt-4o"]}]},
            r"^f\.yaml: perturbations\[0\]\.models\[1\]\.model: 'opnai/gpt-4o': unknown provider "
            r"'opnai'; .*; did you mean openai/\?$",
        ),
        (
            {"embedder": {"backend": "litellm", "model": "local/smollm2-135m"}},
            r"^f\.yaml: embedder\.model: 'local/smollm2-135m': unknown provider 'local'",
        ),
    ],
)
def test_a_model_string_litellm_cannot_route_is_a_config_error(change, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(BASE | change, source="f.yaml")


def test_an_unknown_provider_fails_validate_naming_the_model(tmp_path, validate: Validate):
    path = write(tmp_path, base_yaml(models=[{"model": "nosuchprovider/fake"}]))
    result = validate(path)
    assert result.exit_code == 2
    assert f"{path}: models[0].model: 'nosuchprovider/fake': unknown provider" in flat(result)
    assert "https://docs.litellm.ai/docs/providers" in flat(result)


@pytest.mark.parametrize(
    "model",
    [
        {"model": "gpt-4o-mini"},
        {"model": "anthropic/claude-3-5-haiku-latest"},
        {"model": "local/smollm2-135m"},
        {"model": "openai/my-vllm-model", "api_base": "http://localhost:8000/v1"},
        {"model": "meta-llama/Llama-3.3-70B", "api_base": "https://api.groq.com/openai/v1"},
    ],
)
def test_model_strings_litellm_routes_stay_valid(model):
    assert parse_config(BASE | {"models": [model]}).models[0].model == model["model"]


def test_validation_imports_no_litellm(base_file):
    import subprocess

    code = (
        "import sys\n"
        "from dbpa.config import load_config\n"
        "from dbpa.plan import plan_audit\n"
        f"plan_audit(load_config({str(base_file)!r}))\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_base_config_is_valid():
    parse_config(copy.deepcopy(BASE))
