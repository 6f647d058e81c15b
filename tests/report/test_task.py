"""The report task: three files, the run's report path, and two artifacts in the Prefect UI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort

import storage
from tasks.report import artifact_key, write_reports
from tests.report.conftest import PERSONAS, build_run


@pytest.mark.parametrize(
    ("audit", "key"),
    [
        ("personas", "personas-results"),
        ("CVD_risk.v2", "cvd-risk-v2-results"),
        ("--Weird  Name--", "weird-name-results"),
        ("___", "audit-results"),
    ],
)
def test_artifact_keys_are_lower_case_letters_digits_and_dashes(audit, key):
    assert artifact_key(audit, "results") == key


def test_write_reports_inside_a_flow(prefect_harness, tmp_path):
    # An audit name of its own: the session's Prefect server holds other tests' artifacts.
    labelled_run = build_run(tmp_path / "audit.duckdb", audit="inside", cases=PERSONAS)

    @flow
    def audit_end() -> dict[str, str]:
        with storage.Store(labelled_run.db) as store:
            storage.register(store)
            try:
                out = str(tmp_path / "out")
                return write_reports(str(labelled_run.db), labelled_run.run_id, out)
            finally:
                storage.unregister(store)

    paths = audit_end()
    assert set(paths) == {"html", "md", "json"}
    for fmt, path in paths.items():
        assert path == str((tmp_path / "out" / f"{labelled_run.run_id}.{fmt}").resolve())
    report = json.loads(Path(paths["json"]).read_text())
    assert report["run"]["run_id"] == labelled_run.run_id
    with storage.Store(labelled_run.db, read_only=True) as store:
        assert store.run(labelled_run.run_id)["report_path"] == paths["html"]

    with get_client(sync_client=True) as client:
        table, summary = (
            client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
            for key in ("inside-results", "inside-summary")
        )
    assert len(table) == 1
    assert len(summary) == 1
    rows = json.loads(table[0].data)
    assert len(rows) == len(labelled_run.records)
    assert {(r["model"], r["perturbation"]) for r in rows} == set(labelled_run.records)
    assert "changed the output distribution" in summary[0].data
    assert paths["html"] in summary[0].data


def _versions(key: str) -> list:
    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
        )


def test_the_report_key_links_to_the_viewer_or_says_how_to_open_the_report(
    prefect_harness, tmp_path
):
    """No dead file:// link: without a viewer the key says how to open the report; with one,
    it links to it; the same outcome published again adds no version of any key."""
    from dbpa.report import RecordViewer

    built = build_run(tmp_path / "audit.duckdb", audit="linked", cases=PERSONAS)

    @flow
    def report_flow(publish: bool = True) -> dict[str, str]:
        with storage.Store(built.db) as store:
            storage.register(store)
            try:
                return write_reports(str(built.db), built.run_id, str(tmp_path / "out"), publish)
            finally:
                storage.unregister(store)

    paths = report_flow()
    (how,) = _versions("linked-report")
    assert how.type == "markdown"
    assert "](file:" not in how.data  # no dead link
    assert f"dbpa view --db {built.db.resolve()}" in how.data
    assert f"/runs/{built.run_id}" in how.data
    assert paths["html"] in how.data
    viewer = RecordViewer(built.db, lambda: storage.Store(built.db, read_only=True))
    with viewer.running():
        report_flow()
        report_flow()
    link = _versions("linked-report")
    assert len(link) == 2  # the link once a viewer serves the record, not again
    assert f"]({viewer.url}/runs/{built.run_id})" in link[0].data
    for key in ("linked-results", "linked-summary"):
        assert len(_versions(key)) == 1, key


def test_a_changed_outcome_adds_a_version_of_each_key(prefect_harness, tmp_path):
    first = build_run(tmp_path / "a.duckdb", audit="changing", cases=PERSONAS)
    second = build_run(tmp_path / "b.duckdb", audit="changing", cases=PERSONAS[:2])

    @flow
    def report_flow(built) -> None:
        with storage.Store(built.db) as store:
            storage.register(store)
            try:
                write_reports(str(built.db), built.run_id, str(tmp_path / "out"))
            finally:
                storage.unregister(store)

    report_flow(first)
    report_flow(first)
    report_flow(second)
    for key in ("changing-results", "changing-summary", "changing-report"):
        assert len(_versions(key)) == 2, key
    assert "(results " in _versions("changing-results")[0].description
