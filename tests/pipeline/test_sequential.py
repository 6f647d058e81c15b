"""Sequential audits through the flow against the scripted provider: rounds of sampling,
tests that stop early, the record of where and why, resumption."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dbpa.config import parse_config
from dbpa.stats import correct
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

K_MAX = 16
SEQUENTIAL = {"first": 8, "looks": 2, "futility": 0.2}
"""Looks at 8 and 16 outputs per arm; weights 0.3 and 0.7."""


def _config(provider: ScriptedServer, **overrides):
    settings = {"k": K_MAX, "n_permutations": 999, "sequential": SEQUENTIAL} | overrides
    return parse_config(make_config(provider, **settings))


def _record(db, run_id):
    with Store(db, read_only=True) as store:
        return store.results(run_id), store.sequential_looks(run_id), store.run(run_id)


def test_obvious_changes_stop_at_the_first_look_and_save_model_calls(one_answer_provider, tmp_path):
    """Each arm repeats one text (see ``ONE_ANSWER_EACH``): the targets' first-look p-values
    are the smallest B allows, the controls' are 1."""
    provider = one_answer_provider
    db = tmp_path / "a.duckdb"
    outcome = audit(config=_config(provider), db=str(db))
    results, looks, run = _record(db, outcome.run_id)
    by_id = results.set_index("perturbation_id")
    # the comedian and the child answer nothing like the original: stopped as changed at 8
    for target in ("persona-comedian", "persona-child"):
        assert by_id.loc[target, "stop_reason"] == "changed"
        assert by_id.loc[target, "stopped_at"] == 8
        assert by_id.loc[target, "reject"]
    # the controls answer exactly as the original: p = 1 at the first look, futile
    for control in ("persona-doctor", "persona-nurse"):
        assert (by_id.loc[control, "stop_reason"], by_id.loc[control, "stopped_at"]) == (
            "futile",
            8,
        )
    for pid, row in by_id.iterrows():  # the family row points at the test it stopped at
        assert row.k_a == row.k_b == row.stopped_at, pid
    # the first block's 12870 splits are enumerated once (4 / (0.3 x 0.05/4) = 1067 paths
    # needed): of them only the observed split and its mirror reach a target's statistic, so
    # its look p-value and stage-wise p-value are 2/12870; a control's arms are identical to
    # the original's, every path ties, its look p-value is 1 and it stops as futile (p = 1)
    for target in ("persona-comedian", "persona-child"):
        assert by_id.loc[target, "p_value"] == pytest.approx(2 / 12870)
    assert (by_id.loc[["persona-doctor", "persona-nurse"], "p_value"] == 1).all()
    assert len(looks) == 4
    for r in looks.itertuples():
        assert r.k == 8
        assert r.p_value == pytest.approx(1 if r.perturbation_id.endswith(("doctor", "nurse"))
                                          else 2 / 12870)  # fmt: skip
    # every look is an ordinary stored test with the config's B
    with Store(db, read_only=True) as store:
        tests = store.tests(sorted(looks.test_id), nulls=False)
    assert set(tests.n_permutations) == {999}
    adjusted = correct(results.p_value.to_numpy(), method="holm", alpha=0.05).adjusted
    assert results.adjusted_p.to_numpy() == pytest.approx(adjusted)
    # model calls: one per output; the targets' arms stopped at 8 instead of 16
    stops = dict(zip(results.perturbed_arm, results.stopped_at, strict=True))
    original = max(stops.values())
    assert provider.counts.by_endpoint["/v1/chat/completions"] == original + sum(stops.values())
    assert run["outputs_used"] == original + sum(stops.values())
    assert run["outputs_fixed"] == 5 * K_MAX


def test_a_rerun_asks_for_nothing_and_reaches_the_same_stops(provider, tmp_path):
    db = tmp_path / "a.duckdb"
    first = audit(config=_config(provider), db=str(db))
    calls = provider.counts.total
    second = audit(config=_config(provider), db=str(db))
    assert provider.counts.total == calls
    columns = ["perturbation_id", "p_value", "adjusted_p", "stopped_at", "stop_reason", "test_id"]
    a, looks_a, _ = _record(db, first.run_id)
    b, looks_b, _ = _record(db, second.run_id)
    pd.testing.assert_frame_equal(a[columns], b[columns])
    pd.testing.assert_frame_equal(looks_a, looks_b)


def test_without_the_switch_the_record_has_no_stops(provider, tmp_path):
    db = tmp_path / "a.duckdb"
    outcome = audit(config=parse_config(make_config(provider)), db=str(db))
    results, looks, run = _record(db, outcome.run_id)
    assert results.stop_reason.isna().all()
    assert results.stopped_at.isna().all()
    assert looks.empty
    assert pd.isna(run["outputs_used"])


def test_the_results_table_says_where_each_test_stopped(provider, tmp_path, capsys):
    from dbpa.cli._record import print_results

    db = tmp_path / "a.duckdb"
    outcome = audit(config=_config(provider), db=str(db))
    capsys.readouterr()
    results = print_results(db, outcome.run_id)
    shown = capsys.readouterr().out
    assert "stopped" in shown
    for r in results.itertuples():
        line = next(x for x in shown.splitlines() if r.perturbation_id in x)
        want = f"{r.stopped_at}" if r.stop_reason == "k_max" else f"{r.stopped_at} {r.stop_reason}"
        assert want in line
    used = int(results.stopped_at.max() + results.stopped_at.sum())
    saved = round(100 * (1 - used / (5 * K_MAX)))
    assert (
        f"sequential: {used} outputs sampled against {5 * K_MAX} at a fixed k={K_MAX}: "
        f"{saved}% fewer model calls" in shown
    )


def test_every_report_says_where_each_test_stopped_and_what_it_saved(provider, tmp_path):
    import json

    db = tmp_path / "a.duckdb"
    outcome = audit(config=_config(provider), db=str(db))
    results, _, run = _record(db, outcome.run_id)
    html = Path(outcome.reports["html"]).read_text()
    md = Path(outcome.reports["md"]).read_text()
    report = json.loads(Path(outcome.reports["json"]).read_text())
    saved = round(100 * (1 - run["outputs_used"] / run["outputs_fixed"]))
    for text in (html, md):
        assert f"{saved}% fewer model calls" in text
    assert report["sequential"]["outputs"] == run["outputs_used"]
    assert report["sequential"]["fixed_outputs"] == 5 * K_MAX
    rows = {r["perturbation_id"]: r for f in report["families"] for r in f["results"]}
    for r in results.itertuples():
        stop = rows[r.perturbation_id]["stop"]
        assert (stop["at"], stop["reason"]) == (r.stopped_at, r.stop_reason)
        text = (
            f"ran to k={r.stopped_at}"
            if r.stop_reason == "k_max"
            else (f"stopped at k={r.stopped_at}: {r.stop_reason}")
        )
        assert text in html
        assert text in md


def test_the_progress_counts_what_the_design_asks_and_the_arms_that_finished_early(
    one_answer_provider, tmp_path
):
    """The targets stop at the first look, the controls (no futility stops) go on to the
    second: two looks whatever the server's port."""
    from dbpa import progress

    db = tmp_path / "a.duckdb"
    updates: list[progress.Progress] = []
    config = _config(one_answer_provider, sequential=SEQUENTIAL | {"futility": False})
    with progress.listen(updates.append):
        outcome = audit(config=config, db=str(db))
    results, looks, run = _record(db, outcome.run_id)
    last = {u.phase: u for u in updates}
    assert (last["sample"].done, last["sample"].total) == (run["outputs_used"],) * 2
    stops = dict(zip(results.perturbed_arm, results.stopped_at, strict=True))
    early = sum(k < K_MAX for k in stops.values()) + (max(stops.values()) < K_MAX)
    assert (last["early"].done, last["early"].total) == (early, 5)
    # the embed and test bars count every look (the last look alone was all they showed):
    # each look tests its open perturbations and embeds their arms and the original's
    per_look = looks.groupby("look").size()
    assert (last["test"].done, last["test"].total) == (len(looks),) * 2
    assert (last["embed"].done, last["embed"].total) == (int((per_look + 1).sum()),) * 2
    assert list(per_look) == [4, 2]


def test_with_an_equivalence_margin_no_test_stops_for_futility(
    one_answer_provider, tmp_path, caplog
):
    """A control that cannot become changed may still become equivalent: it samples to k max.
    Each arm repeats one text, so the targets cross at the first look whatever the port; and
    arms of one text each bound no distance (the tilted guard), so even a margin of 5 (above
    every energy distance between unit vectors) shows nothing: each look's equivalence
    p-value is 1, and so is their combination."""
    provider = one_answer_provider
    db = tmp_path / "a.duckdb"
    config = _config(provider, equivalence={"margin": 5.0})
    with caplog.at_level("INFO"):
        outcome = audit(config=config, db=str(db))
    assert "sequential: no futility stops with an equivalence margin" in caplog.text
    results, _, _ = _record(db, outcome.run_id)
    by_id = results.set_index("perturbation_id")
    assert set(by_id.stop_reason) <= {"changed", "k_max"}
    assert (by_id.loc[by_id.stop_reason == "k_max", "stopped_at"] == K_MAX).all()
    targets = by_id.loc[["persona-comedian", "persona-child"]]
    assert (targets.stop_reason == "changed").all()
    assert (targets.stopped_at == 8).all()
    assert (targets.decision == "changed").all()
    controls = by_id.drop(index=["persona-comedian", "persona-child"])
    assert (controls.stop_reason == "k_max").all()
    assert (controls.decision == "inconclusive").all()
    assert (by_id.equivalence_p == 1.0).all()


def test_replicate_arms_follow_the_original(one_answer_provider, tmp_path):
    """The margin is calibrated at the original arm's final k: its replicates are sampled to
    that k, never further. Two targets, both obvious at the first look."""
    db = tmp_path / "a.duckdb"
    targets = {"kind": "personas", "values": ["comedian", "child"]}
    config = _config(one_answer_provider, perturbations=[targets], equivalence={"replicates": 2})
    outcome = audit(config=config, db=str(db))
    results, _, run = _record(db, outcome.run_id)
    assert (results.stop_reason == "changed").all()
    assert (results.stopped_at == 8).all()
    # the original, its 2 replicates and the 2 perturbed arms: 8 outputs each
    assert one_answer_provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 8
    assert (run["outputs_used"], run["outputs_fixed"]) == (5 * 8, 5 * K_MAX)
    assert (results.margin_source == "replicates").all()


def test_the_results_read_during_the_run_show_the_stops_of_the_looks_taken(
    one_answer_provider, tmp_path
):
    """Read by ``dbpa results`` from another process (the live reader) as the second look
    starts: the targets stopped as changed at 8 (their final decision already: below the
    lone threshold), the controls (identical to the original, no futility stops) pending."""
    import json
    import subprocess
    import sys

    from dbpa import progress

    db = tmp_path / "a.duckdb"
    read: list[list[dict]] = []
    as_json = ("--format", "json")

    def after_the_first_look(update: progress.Progress) -> None:
        if update.phase == "early" and update.done and not read:  # set after each look
            shown = subprocess.run(
                [sys.executable, "-m", "dbpa.cli", "results", "latest", "--db", str(db), *as_json],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert shown.returncode == 0, shown.stderr
            read.append(json.loads(shown.stdout))

    config = _config(one_answer_provider, sequential=SEQUENTIAL | {"futility": False})
    with progress.listen(after_the_first_look):
        outcome = audit(config=config, db=str(db))
    (live,) = read
    during = {
        r["perturbation_id"]: (r["decision"], r["stopped_at"], r["stop_reason"]) for r in live
    }
    assert during == {
        "persona-doctor": ("pending", None, None),
        "persona-nurse": ("pending", None, None),
        "persona-comedian": ("changed", 8, "changed"),
        "persona-child": ("changed", 8, "changed"),
    }
    assert all(r["k_a"] == 8 and r["adjusted_p"] is None for r in live)  # the look's tests
    results, _, _ = _record(db, outcome.run_id)
    final = {r.perturbation_id: (r.reject, r.stopped_at) for r in results.itertuples()}
    assert final == {
        "persona-doctor": (False, K_MAX),
        "persona-nurse": (False, K_MAX),
        "persona-comedian": (True, 8),
        "persona-child": (True, 8),
    }
