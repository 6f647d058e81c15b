"""Audit records built through the ``Store`` API from synthetic embeddings.

Every test result is a real permutation test (``dbpa.analysis.run_test``) and every
decision a real correction (``decide_family``); nothing here calls the report code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from dbpa.analysis import (
    AnalysisSpec,
    Decision,
    Margin,
    PerturbationTestRecord,
    decide_family,
    equivalence_p_values,
    run_test,
)
from dbpa.arms import Arm
from dbpa.specs import EmbeddingBatch, Generation, Message, ModelSpec, content_hash, text_hash
from storage import Store

EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
REPORT_SCRIPT = files("dbpa.report").joinpath("report.js").read_text(encoding="utf-8")
"""The HTML report's own script, inlined in every page."""
PROMPT = "A 58-year-old patient has chest pain after climbing stairs. What should they do?"
PROMPT_TOKENS = 23
COST_PER_OUTPUT = 0.0004
DIM = 12


@dataclass(frozen=True)
class Case:
    """One perturbation of the synthetic family."""

    id: str
    shift: float
    """Distance the perturbed arm's outputs move in embedding space (0: same distribution)."""
    label: str | None = None
    kind: str = "persona"
    description: str = ""
    model: str | None = None
    """kind ``model``: the model swapped in for the audited one."""
    fails: bool = False
    """The perturbed arm could not be sampled."""


@dataclass(frozen=True)
class BuiltRun:
    """What the builder stored, for the tests to compare the reports against."""

    db: Path
    run_id: str
    audit: str
    families: tuple[str, ...]
    cases: tuple[Case, ...]
    records: dict[tuple[str, str], PerturbationTestRecord]
    """(family, perturbation id) -> stored test."""
    decisions: dict[tuple[str, str], Decision]
    outputs: dict[str, list[str]]
    """arm id -> stored output texts."""
    failure_reason: str
    completion_tokens: int
    """Total over every stored output."""
    cost_usd: float
    n_outputs: int
    n_permutations: int
    arms: dict[tuple[str, str], str] = field(default_factory=dict)
    """(family, perturbation id or "original") -> arm id."""


PERSONAS = (
    Case("doctor", 0.0, "control", description="Act as a doctor."),
    Case("nurse", 0.0, "control", description="Act as a nurse."),
    Case("supervisor", 0.25, "control", description="Act as a medical supervisor."),
    Case("comedian", 0.7, "target", description="Act as a comedian."),
    Case("robot", 0.3, "target", description="Act as a robot from the future."),
    Case("child", 0.4, "target", description="Act as a child."),
)


def _texts(prefix: str, k: int, payload: str) -> list[str]:
    return [f"{prefix} answer {i}: rest and see a doctor. {payload}".strip() for i in range(k)]


def _generations(texts: Sequence[str], seed: int) -> list[Generation]:
    return [
        Generation(
            index=i,
            text=t,
            status="ok",
            finish_reason="stop",
            prompt_tokens=PROMPT_TOKENS,
            completion_tokens=len(t.split()),
            cost_usd=COST_PER_OUTPUT,
            latency_s=0.1,
            seed=seed + i,
            request_id=f"req-{seed}-{i}",
        )
        for i, t in enumerate(texts)
    ]


def build_run(
    db: Path,
    *,
    audit: str = "personas",
    families: Sequence[str] = ("gpt-4",),
    cases: Sequence[Case] = PERSONAS,
    k: int = 10,
    n_permutations: int = 1999,
    embed: bool = True,
    payload: str = "",
    run_id: str | None = None,
    seed: int = 7,
    margin: float | None = None,
) -> BuiltRun:
    """Store one completed (or incomplete) run of ``cases`` against every family (decided
    changed / equivalent / inconclusive against a fixed ``margin`` when one is given)."""
    rng = np.random.default_rng(seed)
    analysis = AnalysisSpec(
        omega="jsd", n_permutations=n_permutations, alpha=0.05, correction="holm"
    )
    run_id = run_id or f"{audit}-run-{seed}"
    prompt = [Message(role="user", content=f"{PROMPT} {payload}".strip())]
    directions = {c.id: rng.normal(size=DIM) / np.sqrt(DIM) for c in cases}
    config = {
        "name": audit,
        "description": f"Synthetic audit of persona prompts. {payload}".strip(),
        "models": [{"model": f"openai/{f}", "name": f} for f in families],
        "prompt": [m.model_dump() for m in prompt],
        "perturbations": [{"kind": c.kind, "id": c.id, "label": c.label} for c in cases],
        "k": k,
        "embedder": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2"},
        "similarity": "cosine",
        "omega": "jsd",
        "omega_options": {},
        "n_permutations": n_permutations,
        "alpha": 0.05,
        "correction": "holm",
        "seed": seed,
        "epoch": "0",
    }
    reason = f"AuthenticationError: no API key for openai/failing {payload}".strip()
    records: dict[tuple[str, str], PerturbationTestRecord] = {}
    decisions: dict[tuple[str, str], Decision] = {}
    outputs: dict[str, list[str]] = {}
    arm_ids: dict[tuple[str, str], str] = {}
    any_failed = False
    with Store(db) as store:
        store.start_run(
            run_id,
            audit=audit,
            config=config,
            config_hash=content_hash(config),
            epoch="0",
            flow_run_id="flow-run-1",
            versions={"dbpa": "0.1.0", "numpy": np.__version__, "duckdb": "2.0.0"},
        )

        def sample(arm: Arm, centre: np.ndarray, prefix: str) -> np.ndarray:
            texts = _texts(prefix, k, payload)
            store.add_arms([arm])
            store.add_samples(arm.arm_id, _generations(texts, seed=len(outputs) * 100))
            outputs[arm.arm_id] = texts
            vectors = (centre + 0.35 * rng.normal(size=(k, DIM))).astype(np.float32)
            if embed:
                batch = EmbeddingBatch(vectors, np.zeros(k, dtype=bool))
                store.add_embeddings(EMBEDDER, [text_hash(t) for t in texts], batch)
            return vectors

        for family in families:
            model = ModelSpec(model=f"openai/{family}", name=family)
            centre = rng.normal(size=DIM) + 2.0
            original = Arm.of(model, prompt, "0")
            arm_ids[(family, "original")] = original.arm_id
            original_vectors = sample(original, centre, f"{family} original")
            rows, p_values = [], {}
            for position, case in enumerate(cases):
                perturbed_model = ModelSpec(model=case.model) if case.model else model
                messages = (
                    prompt
                    if case.kind == "model"
                    else [Message(role="user", content=f"{case.description} {prompt[0].content}")]
                )
                perturbed = Arm.of(perturbed_model, messages, "0")
                arm_ids[(family, case.id)] = perturbed.arm_id
                test_id = content_hash("test", original.arm_id, perturbed.arm_id, n_permutations)
                rows.append(
                    {
                        "family": family,
                        "perturbation_id": case.id,
                        "position": position,
                        "kind": case.kind,
                        "label": case.label,
                        "description": case.description or f"model swapped to {case.model}",
                        "original_arm": original.arm_id,
                        "perturbed_arm": perturbed.arm_id,
                        "test_id": test_id,
                    }
                )
                if case.fails:
                    store.add_arms([perturbed])
                    store.add_arm_failure(run_id, perturbed.arm_id, perturbed_model.model, reason)
                    p_values[case.id] = None
                    any_failed = True
                    continue
                shifted = centre + case.shift * 3.0 * directions[case.id]
                vectors = sample(perturbed, shifted, f"{family} {case.id}")
                record = run_test(
                    test_id,
                    original_vectors,
                    vectors,
                    original_arm=original.arm_id,
                    perturbed_arm=perturbed.arm_id,
                    embedder=EMBEDDER,
                    analysis=analysis,
                )
                store.add_tests([record])
                records[(family, case.id)] = record
                p_values[case.id] = record.p_value
            if not rows:
                continue
            store.add_family(run_id, rows)
            if margin is None:
                family_decisions = decide_family(p_values, analysis)
                store.add_corrections(run_id, family, "holm", 0.05, family_decisions)
            else:
                intervals = {
                    c.id: records[(family, c.id)].interval if (family, c.id) in records else None
                    for c in cases
                }
                equivalence = equivalence_p_values(intervals, margin)
                family_decisions = decide_family(p_values, analysis, equivalence, margin)
                store.add_corrections(
                    run_id, family, "holm", 0.05, family_decisions, Margin(margin, "fixed")
                )
            decisions.update({(family, d.perturbation_id): d for d in family_decisions})
        status = "incomplete" if any_failed else "completed"
        store.finish_run(run_id, status, "1 arm could not be sampled" if any_failed else None)
    all_texts = [t for texts in outputs.values() for t in texts]
    return BuiltRun(
        db=db,
        run_id=run_id,
        audit=audit,
        families=tuple(families),
        cases=tuple(cases),
        records=records,
        decisions=decisions,
        outputs=outputs,
        failure_reason=reason,
        completion_tokens=sum(len(t.split()) for t in all_texts),
        cost_usd=COST_PER_OUTPUT * len(all_texts),
        n_outputs=len(all_texts),
        n_permutations=n_permutations,
        arms=arm_ids,
    )


@pytest.fixture(scope="session")
def labelled_run(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    """Two models (not in alphabetical order), three control and three target personas each."""
    db = tmp_path_factory.mktemp("labelled") / "audit.duckdb"
    return build_run(db, families=("llama-3.1-8b", "gpt-4"))


@pytest.fixture(scope="session")
def unlabelled_run(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    """One model: unlabelled personas, two model swaps (Fig. 3) and a failed arm."""
    db = tmp_path_factory.mktemp("unlabelled") / "audit.duckdb"
    cases = (
        Case("comedian", 3.0, description="Act as a comedian."),
        Case("doctor", 0.0, description="Act as a doctor."),
        Case("swap-smollm", 2.5, kind="model", model="openai/smollm2-135m"),
        Case("swap-gpt-3.5", 0.0, kind="model", model="openai/gpt-3.5-turbo"),
        Case("child", 1.0, description="Act as a child.", fails=True),
    )
    return build_run(db, audit="alignment", cases=cases, n_permutations=999)


@pytest.fixture(scope="session")
def unembedded_run(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    """Tests stored, but no embedding of any output (P0/P1 cannot be drawn)."""
    db = tmp_path_factory.mktemp("unembedded") / "audit.duckdb"
    return build_run(db, audit="no-vectors", cases=PERSONAS[2:5], embed=False, n_permutations=499)


PAYLOADS = (
    "<script>window.__pwned=1;alert('script')</script>",
    "<img src=x onerror=\"window.__pwned=1;alert('img')\">",
    '"><svg onload="window.__pwned=1;alert(\'svg\')">',
    "<a href=\"javascript:window.__pwned=1;alert('link')\">click me</a>",
)
"""Markup that would run script if a report inserted it unescaped."""
HOSTILE_FAMILY = 'gpt-4 "><svg onload="window.__pwned=1"> $\\alpha$'
HOSTILE_ID = "<script>window.__pwned=1</script>"


@pytest.fixture(scope="session")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    """Outputs, prompt, description, family name and a perturbation id full of markup."""
    db = tmp_path_factory.mktemp("hostile") / "audit.duckdb"
    cases = (
        Case("doctor", 0.0, "control", description=f"Act as a doctor. {PAYLOADS[1]}"),
        Case(HOSTILE_ID, 0.7, "target", description=PAYLOADS[2]),
    )
    return build_run(
        db,
        audit="hostile",
        families=(HOSTILE_FAMILY,),
        cases=cases,
        payload=" ".join(PAYLOADS),
        n_permutations=499,
    )


@dataclass(frozen=True)
class HtmlTable:
    """One ``<table>`` of a page: its class and, per row, the row's attributes and cell texts."""

    css_class: str
    rows: list[tuple[dict[str, str], list[str]]]


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[HtmlTable] = []
        self._row: tuple[dict[str, str], list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "table":
            self.tables.append(HtmlTable(values.get("class", ""), []))
        elif tag == "tr" and self.tables:
            self._row = (values, [])
            self.tables[-1].rows.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row[1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_tables(page: str) -> list[HtmlTable]:
    """The tables of an HTML page, cell text unescaped."""
    parser = _TableParser()
    parser.feed(page)
    return parser.tables
