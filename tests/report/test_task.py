"""The report task: three files, the run's report path, and two artifacts in the Prefect UI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort
from prefect.testing.utilities import prefect_test_harness

import storage
from tasks.report import artifact_key, write_reports
from tests.report.conftest import PERSONAS, build_run


@pytest.fixture(scope="module")
def prefect_api():
    with prefect_test_harness():
        yield


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


def test_write_reports_inside_a_flow(prefect_api, tmp_path):
    labelled_run = build_run(tmp_path / "audit.duckdb", cases=PERSONAS)

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
            for key in ("personas-results", "personas-summary")
        )
    assert len(table) == 1
    assert len(summary) == 1
    rows = json.loads(table[0].data)
    assert len(rows) == len(labelled_run.records)
    assert {(r["model"], r["perturbation"]) for r in rows} == set(labelled_run.records)
    assert "changed the output distribution" in summary[0].data
    assert paths["html"] in summary[0].data


def _link(key: str) -> str:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
        )
    return found[0].data  # the newest version


def test_the_link_artifact_points_to_the_viewer_while_one_serves_the_record(prefect_api, tmp_path):
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
    assert f"]({Path(paths['html']).as_uri()})" in _link("linked-report")
    viewer = RecordViewer(built.db, lambda: storage.Store(built.db, read_only=True))
    with viewer.running():
        report_flow()
        assert f"]({viewer.url}/runs/{built.run_id})" in _link("linked-report")
