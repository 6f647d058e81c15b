"""Write the reference pages that are generated from the code at build time (mkdocs-gen-files).

Run by ``mkdocs build``: the command line from the Typer app, every config key from the
config's JSON schema, the record's tables and columns from the storage migrations applied to
an in-memory DuckDB, and the environment the process sets. Nothing here is typed by hand but
the one-line description of each table, which ``tests/docs`` requires for every table.
"""

from __future__ import annotations

import inspect
import json
import typing
from typing import Any

import mkdocs_gen_files
import typer
from pydantic import BaseModel

from dbpa.cli import app
from dbpa.config import AuditConfig
from dbpa.environment import DEFAULTS
from storage import MIGRATIONS, record_layout

TABLES = {
    "meta": "The record's own settings (its schema version).",
    "arms": "One row per arm: a model, its sampling parameters, the messages, epoch and seed.",
    "samples": "Every output of every arm as its request returned: text, status, tokens, cost.",
    "embeddings": "One vector per distinct text and embedder.",
    "tests": "Every permutation test: statistic, p-value, null mean and spread, effect.",
    "effect_intervals": "Each test's energy distance, its interval and the draws behind it.",
    "runs": "One row per run of an audit: its config, status, epoch and reports.",
    "run_tests": "The family of each run: which tests it corrects together.",
    "arm_failures": "Arms that could not be sampled in a run, and why.",
    "corrections": "Each run's decisions: adjusted p-values, equivalence and stops.",
    "sequential_looks": "Every look of a sequential audit's tests.",
    "drift_tests": "Per-tick drift tests of an arm against an earlier epoch.",
    "monitor_ticks": "The drift monitor's evidence per arm, baseline and tick.",
    "monitor_resets": "Baselines started anew with `dbpa monitor reset`.",
    "run_prompt_tests": "Over a set of prompts: each run's per-prompt tests.",
    "set_prompts": "Over a set of prompts: each pooled test's prompts.",
    "prompt_decisions": "Over a set of prompts: each run's drill-down to the prompts that moved.",
    "provider_batches": "Batches of `batch: true` models, stored as the provider creates them.",
    "batch_requests": "The requests of each provider batch: arm, output indices, seed.",
}


def _cell(text: str) -> str:
    """One Markdown table cell: no newlines, no bare pipes."""
    return " ".join(text.split()).replace("|", "\\|")


# ---------------------------------------------------------------- the command line


def _walk(command: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    """Every leaf command of the click tree under ``command``, with its words."""
    if hasattr(command, "commands"):
        found = []
        for name, sub in command.commands.items():
            found += _walk(sub, [*path, name])
        return found
    return [(path, command)]


def _shown_argument(param: Any) -> str:
    """An argument as usage shows it: its metavar, else its name in capitals."""
    name = param.metavar or param.name.upper()
    return name if param.required else f"[{name}]"


def _default(param: Any) -> str:
    default = param.default
    if param.required or default is None or (param.multiple and not default):
        return ""
    if getattr(param, "is_flag", False):
        return "on" if default else "off"
    return f"`{default}`"


def cli_page() -> str:
    root = typer.main.get_command(app)
    lines = [
        "# Command line",
        "",
        "Generated from the Typer app (`dbpa.cli.app`) when the site is built. "
        "`dbpa COMMAND --help` prints the same. Exit codes: [Exit codes](exit-codes.md).",
        "",
    ]
    for words, command in _walk(root, ["dbpa"]):
        name = " ".join(words)
        anchor = "-".join(words[1:])
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        usage = " ".join([name, *(_shown_argument(a) for a in arguments), "[OPTIONS]"])
        lines += [f"## `{name}` {{#{anchor}}}", "", f"```\n{usage}\n```", ""]
        lines += [" ".join((command.help or "").replace("``", "`").split()), ""]
        lines += ["| argument or option | default | what it does |", "|---|---|---|"]
        for param in command.params:
            if param.param_type_name == "argument":
                shown = f"`{_shown_argument(param)}`"
            else:
                shown = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
                if param.multiple:
                    shown += " (repeatable)"
            lines.append(f"| {shown} | {_default(param)} | {_cell(param.help or '')} |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- the config


def _type(schema: dict[str, Any]) -> str:
    """A JSON-schema type as a short text: ``integer``, ``list of ModelSpec``, ``A or B``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "oneOf" in schema:
        return "one of " + ", ".join(_type(s) for s in schema["oneOf"])
    if "anyOf" in schema:
        kinds = [_type(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        if "items" in schema:
            return f"list of {_type(schema['items'])}"
        if "prefixItems" in schema:
            return "[" + ", ".join(_type(s) for s in schema["prefixItems"]) + "]"
        return "list"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return "mapping" if extra is True else f"mapping of {_type(extra)}"
    if isinstance(kind, list):
        return " or ".join(kind)
    return str(kind)


def _bounds(schema: dict[str, Any]) -> str:
    marks = {
        "minimum": ">=",
        "maximum": "<=",
        "exclusiveMinimum": ">",
        "exclusiveMaximum": "<",
        "minLength": "length >=",
        "maxLength": "length <=",
        "minItems": "items >=",
        "maxItems": "items <=",
    }
    return ", ".join(f"{mark} {schema[key]}" for key, mark in marks.items() if key in schema)


def _keys_table(properties: dict[str, Any], required: set[str]) -> list[str]:
    lines = ["| key | type | default | what it is |", "|---|---|---|---|"]
    for key, schema in properties.items():
        kind = _type(schema)
        bounds = _bounds(schema)
        if bounds:
            kind += f" ({bounds})"
        if key in required:
            default = "required"
        elif "default" in schema:
            default = f"`{json.dumps(schema['default'])}`"
        else:
            default = ""
        text = (schema.get("description") or "").replace("``", "`")
        lines.append(f"| `{key}` | {kind} | {default} | {_cell(text)} |")
    return lines


def _example(properties: dict[str, Any], required: set[str]) -> str:
    """A YAML fragment of the keys that have a default (as written) or are required."""
    rows = []
    for key, schema in properties.items():
        if "default" in schema:
            rows.append(f"{key}: {json.dumps(schema['default'])}")
        elif key in required:
            rows.append(f"{key}: ...")
    return "\n".join(rows)


MINIMAL_CONFIG = """
name: minimal
models:
  - model: local/smollm2-135m
prompt: "What should a 45-year-old man with a three-week cough do?"
perturbations:
  - kind: personas
"""
"""Shown on the config page; ``tests/docs`` validates it."""


def _models(model: type[BaseModel], found: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """Every model class reachable from ``model``'s fields, by name (the schema's ``$defs``)."""
    found[model.__name__] = model
    stack = [field.annotation for field in model.model_fields.values()]
    while stack:
        kind = stack.pop()
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            if kind.__name__ not in found:
                _models(kind, found)
        else:
            stack.extend(typing.get_args(kind))
    return found


def _inherited(model: type[BaseModel] | None, key: str) -> str:
    """The description of ``key`` on the nearest base class that documents it (a subclass that
    narrows a field's type or default redeclares it without its docstring)."""
    for base in model.__mro__[1:] if model else ():
        field = getattr(base, "model_fields", {}).get(key)
        if field is not None and field.description:
            return field.description
    return "Selects this kind." if key == "kind" else ""


def _described(schema: dict[str, Any], model: type[BaseModel] | None) -> dict[str, Any]:
    """``schema``'s properties, each with a description (inherited where it has none); a key
    with none at all fails the build, naming it."""
    properties = {}
    for key, value in schema.get("properties", {}).items():
        if not value.get("description"):
            value = {**value, "description": _inherited(model, key)}
        if not value["description"]:
            name = model.__name__ if model else schema.get("title")
            raise ValueError(f"config key {name}.{key} has no docstring")
        properties[key] = value
    return properties


def config_page() -> str:
    schema = AuditConfig.model_json_schema()
    definitions = schema.get("$defs", {})
    classes = _models(AuditConfig, {})
    lines = [
        "# Config keys",
        "",
        "Generated from the JSON schema of `dbpa.config.AuditConfig` (types, bounds, defaults, "
        "and the attribute docstrings as descriptions) when the site is built. A config is "
        "UTF-8 YAML; unknown keys are errors. `dbpa validate CONFIG` checks one; `--set "
        "KEY=VALUE` overrides a key by its dotted path (`--set models.0.params.temperature=0.2`). "
        "A value takes the type of the key it sets: it is read as YAML (numbers, booleans, "
        "lists, `{mappings}`), but a key that holds text keeps the text as typed, so "
        "`--set epoch=2026-01-05T03:00:00+00:00` sets that text, not a timestamp. A value the "
        "key cannot take exits 2 naming the key.",
        "",
        "## The audit {#auditconfig}",
        "",
        "The top level of a config file.",
        "",
        *_keys_table(_described(schema, AuditConfig), set(schema.get("required", []))),
        "",
        "A minimal config (the other keys take their defaults):",
        "",
        "```yaml",
        MINIMAL_CONFIG.strip(),
        "```",
        "",
    ]
    for name, definition in sorted(definitions.items()):
        lines += [f"## {name} {{#{name.lower()}}}", ""]
        lines += [" ".join((definition.get("description") or "").replace("``", "`").split()), ""]
        properties = _described(definition, classes.get(name))
        if properties:
            required = set(definition.get("required", []))
            lines += [*_keys_table(properties, required), ""]
            example = _example(properties, required)
            if example:
                lines += ["Defaults, and the keys to fill:", "", "```yaml", example, "```", ""]
        else:
            lines += [f"Type: {_type(definition)}", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the record


def record_page() -> str:
    layout = record_layout()
    descriptions = {version: description for version, description, _ in MIGRATIONS}
    lines = [
        "# The record's tables",
        "",
        "Generated from the migrations in `storage` (each applied in order to an empty "
        "DuckDB, the columns read from `information_schema`) when the site is built. "
        "`migration` is the schema version that added the column. Read them with SQL or "
        "pandas: [SQL and pandas on the record](../how-to/record-sql.md).",
        "",
        "| migration | what it added |",
        "|---|---|",
        *(f"| {v} | {_cell(d)} |" for v, d in descriptions.items()),
        "",
    ]
    tables = dict.fromkeys(column.table for column in layout.columns)
    undescribed = sorted(set(tables) - set(TABLES))
    if undescribed:
        raise ValueError(f"TABLES: describe the record's table(s) {', '.join(undescribed)}")
    for table in tables:
        lines += [f"## `{table}` {{#{table}}}", "", TABLES[table], ""]
        if table in layout.primary_keys:
            key = ", ".join(f"`{c}`" for c in layout.primary_keys[table])
            lines += [f"Primary key: {key}", ""]
        lines += ["| column | type | null | default | migration |", "|---|---|---|---|---|"]
        for column in layout.columns:
            if column.table != table:
                continue
            shown = "" if column.default is None else f"`{column.default}`"
            lines.append(
                f"| `{column.name}` | {column.type} | {'yes' if column.nullable else 'no'} "
                f"| {shown} | {column.migration} |"
            )
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- the environment


READ = {
    "DBPA_DB": "The record of every command that takes `--db`, when `--db` is not given: a "
    "DuckDB file's path, or a shared record's URL `postgresql://USER@HOST:PORT/DBNAME` (what "
    "a deployment's workers read; the password from `PGPASSWORD` or `~/.pgpass`).",
    "PGPASSWORD, ~/.pgpass (PGPASSFILE)": "The password of a shared record's user, as libpq "
    "reads it. A URL with a password in it is refused (exit 2): it would show on command "
    "lines, in Prefect's parameters and in logs.",
    "DBPA_LOCAL_THREADS": "llama.cpp threads of the embedded model. Default: the cores the "
    "process may use, less those that other work keeps busy when the model starts (measured "
    "over a quarter second; the run's own Prefect server does not count), at least 1. The "
    "texts do not depend on it.",
    "DBPA_TICK_BATCH_WAIT_S": "Seconds a scheduled tick of a `batch: true` model polls its "
    "provider batches before it schedules a run of its deployment for the same epoch at the "
    "next poll and ends as `AwaitingBatches` (default 120; read by the process that runs the "
    "tick: a worker's).",
    "PREFECT_API_URL": "A Prefect server to report to; unset, `dbpa run` starts a temporary "
    "one for the run (and a finished audit run again starts none).",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "Seconds the temporary server gets to "
    "start (default 90, then one retry).",
    "SENTENCE_TRANSFORMERS_HOME": "Where sentence-transformers caches models other than the "
    "embedded default.",
    "OPENAI_API_KEY, ANTHROPIC_API_KEY, ...": "Provider keys, read from the variable a model's "
    "`api_key_env` names; only the name is stored, never the key.",
}
"""The variables dbpa reads (``tests/docs`` checks each is named in the code)."""


def environment_page() -> str:
    lines = [
        "# Environment variables",
        "",
        "## Read",
        "",
        "| variable | what it does |",
        "|---|---|",
        *(f"| `{key}` | {_cell(text)} |" for key, text in READ.items()),
        "",
        "## Set",
        "",
        "Generated from `dbpa.environment.DEFAULTS`: every `dbpa` process sets these before "
        "Prefect or litellm is imported, unless they are set already (no telemetry, no "
        "download of litellm's price list, Hugging Face offline, one BLAS thread).",
        "",
        "| variable | value |",
        "|---|---|",
        *(f"| `{key}` | `{value}` |" for key, value in DEFAULTS.items()),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- Prefect

ARTIFACTS = {
    "progress": "Sampling progress while the audit samples (percentage and counts).",
    "results": "The results table.",
    "summary": "The decisions, the epoch, the drift monitor's outcome, where the report is.",
    "report": "A link to the HTML report when `dbpa view` serves the record, else how to open it.",
    "monitor": "Each arm's drift-monitor evidence, alarm line and alarm (from the second tick).",
    "evidence": "The chart of each arm's evidence over the ticks.",
    "drift": "With `per_tick`: the per-tick drift tests against the previous and first tick.",
    "batches": "While `batch: true` models wait: the open provider batches, requests, deadline.",
}
"""Artifact key suffixes, one key ``<audit>-<suffix>`` each (``tests/docs`` checks the code's)."""


def _flow_section(flow: Any) -> list[str]:
    signature = inspect.signature(flow.fn)
    doc = inspect.getdoc(flow.fn) or ""
    lines = [f"### `{flow.name}`", "", " ".join(doc.split("\n\n")[0].replace("``", "`").split())]
    lines += ["", "| parameter | default |", "|---|---|"]
    for name, parameter in signature.parameters.items():
        default = parameter.default
        shown = "required" if default is inspect.Parameter.empty else f"`{default!r}`"
        lines.append(f"| `{name}` | {shown} |")
    return [*lines, ""]


def prefect_page() -> str:
    from flows.audit import audit
    from flows.drift import drift
    from flows.monitor import monitor
    from flows.scheduled import scheduled_audit
    from tasks.monitor import ALARM_EVENT

    lines = [
        "# Prefect flows, artifacts and events",
        "",
        "## Flows and their parameters",
        "",
        "Generated from the flows' signatures when the site is built. A deployment's runs "
        "take these parameters (`prefect deployment run NAME -p KEY=VALUE`); the deployments "
        "of `deployments/prefect.yaml` and `dbpa serve` run `dbpa-scheduled-audit`, whose "
        '`overrides` set config keys by dotted path (`{"k": 10}`, `{"epoch": "..."}`).',
        "",
    ]
    for flow in (scheduled_audit, audit, monitor, drift):
        lines += _flow_section(flow)
    lines += [
        "## Artifacts",
        "",
        "One key per audit and kind, on the flow run you open (`dbpa run`'s, or a tick's); an "
        "outcome published again adds no version.",
        "",
        "| key | what it shows |",
        "|---|---|",
        *(f"| `<audit>-{suffix}` | {text} |" for suffix, text in ARTIFACTS.items()),
        "",
        "## Events",
        "",
        f"`{ALARM_EVENT}`: emitted once when an arm's drift monitor first alarms (it stays "
        "raised until `dbpa monitor reset`). Resource id `dbpa.audit.<audit>.<arm id>`; "
        "payload: `audit`, `arm`, `arm_id`, `epoch`, `baseline_epoch`, `tick`, `e_value`, "
        "`log_e_value`, `threshold`, `form`. `deployments/automations/drift-alarm.yaml` turns "
        "it into a notification: [Scheduled audits and a drift alarm]"
        "(../tutorials/scheduling.md#5-be-notified-of-an-alarm).",
    ]
    return "\n".join(lines)


PAGES = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
    "reference/record.md": record_page,
    "reference/environment.md": environment_page,
    "reference/prefect.md": prefect_page,
}

for path, page in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as file:
        file.write(page() + "\n")
