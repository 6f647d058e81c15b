"""The checkout guard's listing: new files anywhere, the tools' caches left out."""

from __future__ import annotations

from tests.support.checkout import files_in


def test_a_file_written_anywhere_is_listed_and_the_tools_caches_are_not(tmp_path):
    (tmp_path / "dbpa").mkdir()
    (tmp_path / "dbpa" / "core.py").write_text("")
    before = files_in(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "persona-test.html").write_text("")
    (tmp_path / "audit.duckdb").write_text("")
    for cache in (".hypothesis", "dbpa/__pycache__", ".venv/lib"):
        (tmp_path / cache).mkdir(parents=True)
        (tmp_path / cache / "entry").write_text("")
    assert before == {"dbpa/core.py"}
    assert files_in(tmp_path) - before == {"reports/persona-test.html", "audit.duckdb"}
