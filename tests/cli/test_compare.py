"""``dbpa compare``: two runs of one family, perturbation by perturbation."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import KEY_ENV, ONE_ANSWER_EACH, make_config
from tests.support.scripted_server import Rule, ScriptedServer

pytestmark = [
    pytest.mark.usefixtures("wide_console"),
    pytest.mark.xdist_group("compare"),  # one worker builds the two runs of the module
]

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
    assert "settings that differ (a -> b):" in shown
    assert "epoch: 0 -> 1" in shown

    data = json.loads(invoke("compare", first, second, "--db", db, "--format", "json").output)
    assert data["run_a"]["run_id"] == first
    rows = {r["perturbation_id"]: r for r in data["rows"]}
    assert data["flipped"] == ["persona-doctor"]
    assert data["flipped"] == [pid for pid, r in rows.items() if r["decision_a"] != r["decision_b"]]
    assert ("(flipped)" in shown) == bool(data["flipped"])
    assert f"{len(data['flipped'])} whose decision flipped" in shown
    assert "a - b is the difference of the unclipped estimates" in shown
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
    # the epoch, and the scripted servers' addresses (a new port each): nothing else
    differences = {d["setting"]: (d["a"], d["b"]) for d in data["differences"]}
    assert differences.pop("epoch") == ("0", "1")
    assert set(differences) <= {"model(s)", "embedder"}
    for a, b in differences.values():
        assert a.split(" at ")[0] == b.split(" at ")[0]

    page = (tmp_path / "c.html").read_text()
    assert "Content-Security-Policy" in page
    assert "<script" not in page
    assert page.count('class="flipped"') == len(data["flipped"])


def test_a_run_against_itself_is_refused_and_unknown_runs_exit_2(two_epochs):
    db, (first, _) = two_epochs
    same = invoke("compare", first, first, "--db", db)
    assert same.exit_code == 2
    assert "is RUN_A too; name two different runs" in text(same)
    unknown = invoke("compare", first, "no-such-run", "--db", db)
    assert unknown.exit_code == 2
    assert "run 'no-such-run' is not in" in text(unknown)
    bad = invoke("compare", first, "latest", "--db", db, "--format", "xml")
    assert bad.exit_code == 2
    assert "--format: unknown 'xml'; choose table or json" in text(bad)


LONG_ID = "paraphrase-of-the-original-prompt-number-"
"""A long perturbation id: 41 characters and a number, wider than its share of 80 columns."""


def _large_record(path, m: int):
    """Runs a (k=20, seed 0) and b (k=40, seed 1, Bonferroni) of one family of ``m``
    perturbations: a changed the first 20, b the first 10 and the last 5 (15 flips)."""
    from dbpa.analysis import Decision
    from storage import Store
    from tests.storage.conftest import family_row, make_record

    changed = {"a": set(range(20)), "b": set(range(10)) | set(range(m - 5, m))}
    configs = {
        "a": {"k": 20, "seed": 0, "correction": "holm", "models": [{"model": "openai/m"}]},
        "b": {"k": 40, "seed": 1, "correction": "bonferroni", "models": [{"model": "openai/m"}]},
    }
    with Store(path, serve_readers=False) as store:
        for run in ("a", "b"):
            store.add_tests([make_record(f"{run}{i}", "o", f"p{i}", 0.5) for i in range(m)])
            store.start_run(
                run,
                audit="big",
                config=configs[run],
                config_hash=run,
                epoch="0",
                flow_run_id=None,
                versions={},
            )
            store.add_family(
                run,
                [
                    family_row(f"{LONG_ID}{i}", "o", f"p{i}", f"{run}{i}", position=i)
                    for i in range(m)
                ],
            )
            decisions = [
                Decision(f"{LONG_ID}{i}", 0.5, 0.5, i in changed[run], True) for i in range(m)
            ]
            store.add_corrections(run, "m", configs[run]["correction"], 0.05, decisions)
            store.finish_run(run, "completed")
    return path


def test_a_large_family_is_summarised_flips_first_and_listed_with_all(tmp_path, monkeypatch):
    from dbpa import cli

    db = _large_record(tmp_path / "big.duckdb", 400)
    monkeypatch.setattr(cli.out, "width", 80)
    result = invoke("compare", "a", "b", "--db", str(db))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) < 60
    # what differs, from the stored configs
    assert "settings that differ (a -> b):" in lines
    assert "  k: 20 -> 40" in lines
    assert "  seed: 0 -> 1" in lines
    assert "  correction: holm -> bonferroni" in lines
    assert not any(line.startswith("  model(s)") for line in lines)
    # the flips first, each id whole on one line, then the pairs of decisions counted
    assert "15 decision(s) flipped (--all lists every perturbation):" in lines
    flipped = {int(n) for n in re.findall(rf"{LONG_ID}(\d+)", result.output)}
    assert flipped == set(range(10, 20)) | set(range(395, 400))
    assert all("(flipped)" in line for line in lines if LONG_ID in line)
    counts = {tuple(line.split()[:-1]): line.split()[-1] for line in lines[-8:]}
    assert counts[("changed", "changed")] == "10"
    assert counts[("changed", "no", "change")] == "10"
    assert counts[("no", "change", "changed")] == "5"
    assert counts[("no", "change", "no", "change")] == "375"
    assert "400 perturbation(s) in both runs, 15 whose decision flipped" in text(result)

    listed = invoke("compare", "a", "b", "--db", str(db), "--all")
    assert listed.exit_code == 0, listed.output
    ids = re.findall(rf"{LONG_ID}\d+", listed.output)
    assert ids == [f"{LONG_ID}{i}" for i in range(400)]  # every one, whole, in order

    data = json.loads(invoke("compare", "a", "b", "--db", str(db), "--format", "json").output)
    assert {d["setting"]: (d["a"], d["b"]) for d in data["differences"]} == {
        "k": ("20", "40"),
        "seed": ("0", "1"),
        "correction": ("holm", "bonferroni"),
    }
    invoke("compare", "a", "b", "--db", str(db), "--html", str(tmp_path / "c.html"))
    page = (tmp_path / "c.html").read_text()
    assert "<td>correction</td><td>holm</td><td>bonferroni</td>" in page
    in_page = [int(n) for n in re.findall(rf'<code class="id">{LONG_ID}(\d+)</code>', page)]
    assert in_page[:15] == [*range(10, 20), *range(395, 400)]  # the flips first
    assert sorted(in_page) == list(range(400))


def test_a_small_comparison_at_80_columns_keeps_every_id_whole(tmp_path, monkeypatch):
    from dbpa import cli

    db = _large_record(tmp_path / "small.duckdb", 12)
    monkeypatch.setattr(cli.out, "width", 80)
    result = invoke("compare", "a", "b", "--db", str(db))
    assert result.exit_code == 0, result.output
    ids = re.findall(rf"{LONG_ID}\d+", result.output)
    assert ids == [f"{LONG_ID}{i}" for i in range(12)]
    assert "…" not in result.output


def test_a_running_run_is_compared_with_its_perturbations_pending(tmp_path):
    """Run b still runs: one test stored, one not yet, one whose arm failed."""
    from storage import Store

    db = _large_record(tmp_path / "r.duckdb", 3)
    with Store(db, serve_readers=False) as store:
        store._rows("UPDATE runs SET status = 'running' WHERE run_id = 'b'")
        store._rows("DELETE FROM corrections WHERE run_id = 'b'")
        store._rows("DELETE FROM tests WHERE test_id IN ('b1', 'b2')")
        store.add_arm_failure("b", "p2", "openai/m", "401 bad key")
    data = json.loads(invoke("compare", "a", "b", "--db", str(db), "--format", "json").output)
    assert [r["decision_b"] for r in data["rows"]] == ["pending", "pending", "not tested"]
    assert data["flipped"] == []
