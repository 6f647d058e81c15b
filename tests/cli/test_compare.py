"""``dbpa compare``: two runs of one family, perturbation by perturbation."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import KEY_ENV, ONE_ANSWER_EACH, make_config
from tests.support.scripted_server import Rule, ScriptedServer

pytestmark = pytest.mark.usefixtures("wide_console")

# At the second epoch the doctor persona answers like the comedian: its decision flips. Each
# arm repeats one text, so every effect and decision is certain whatever the server's port
# (under ``RULES`` an unchanged control's effect at k=8 is now and then as large as a target's).
FLIPPED_RULES = (Rule("Act as a doctor", [("Knock knock, it's flu.", 1)]), *ONE_ANSWER_EACH)


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory, prefect_harness):
    """A record with two runs of the persona family: epoch 0, then epoch 1 whose doctor
    answers differ from the original's."""
    tmp = tmp_path_factory.mktemp("compare")
    db = str(tmp / "c.duckdb")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "sk-pipeline-test")
        runs = [
            _run(tmp, db, epoch, rules)
            for epoch, rules in (("0", ONE_ANSWER_EACH), ("1", FLIPPED_RULES))
        ]
    return db, runs


def _run(tmp, db: str, epoch: str, rules) -> str:
    """Run the persona audit at ``epoch`` against a server answering by ``rules``."""
    with ScriptedServer(rules=rules, embedding_dimension=24) as server:
        path = tmp / f"epoch{epoch}.yaml"
        path.write_text(json.dumps(make_config(server, epoch=epoch)))
        result = invoke("run", str(path), "--db", db, "--out", str(tmp / "reports"))
        assert result.exit_code == 0, result.output
    rows = json.loads(invoke("results", "latest", "--db", db, "--format", "json").output)
    return rows[0]["run_id"]


def test_a_flipped_decision_is_shown_with_the_difference_of_the_effects(two_epochs, tmp_path):
    db, (first, second) = two_epochs
    result = invoke("compare", first, second, "--db", db, "--html", str(tmp_path / "c.html"))
    assert result.exit_code == 0, result.output
    shown = text(result)
    assert "4 perturbation(s) in both runs" in shown

    data = json.loads(invoke("compare", first, second, "--db", db, "--format", "json").output)
    assert data["run_a"]["run_id"] == first
    rows = {r["perturbation_id"]: r for r in data["rows"]}
    assert data["flipped"] == ["persona-doctor"]
    assert data["flipped"] == [pid for pid, r in rows.items() if r["decision_a"] != r["decision_b"]]
    assert ("(flipped)" in shown) == bool(data["flipped"])
    assert f"{len(data['flipped'])} whose decision flipped" in shown
    doctor = rows["persona-doctor"]
    assert doctor["flipped"] == (doctor["decision_a"] != doctor["decision_b"])
    # a - b: the doctor moved far more at the second epoch; the interval says so
    assert doctor["difference"]["high"] < 0
    assert doctor["difference"]["estimate"] == pytest.approx(
        doctor["effect_a"]["estimate"] - doctor["effect_b"]["estimate"]
    )
    for r in rows.values():
        assert r["difference"]["low"] <= r["difference"]["high"]
    assert data["only_in_a"] == data["only_in_b"] == []

    page = (tmp_path / "c.html").read_text()
    assert "Content-Security-Policy" in page
    assert "<script" not in page
    assert page.count('class="flipped"') == len(data["flipped"])


def test_a_run_against_itself_is_refused_and_unknown_runs_exit_2(two_epochs):
    db, (first, _) = two_epochs
    same = invoke("compare", first, first, "--db", db)
    assert same.exit_code == 2
    assert "is run a too; name two different runs" in text(same)
    unknown = invoke("compare", first, "no-such-run", "--db", db)
    assert unknown.exit_code == 2
    assert "run 'no-such-run' is not in" in text(unknown)
    bad = invoke("compare", first, "latest", "--db", db, "--format", "xml")
    assert bad.exit_code == 2
    assert "--format: unknown 'xml'; choose table or json" in text(bad)
