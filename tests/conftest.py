"""Session-wide fixtures shared by the test packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest_plugins = ["tests.support.providers", "tests.support.cli_process"]


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A temporary Prefect server for the session, with task results in a temp dir."""
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    results = tmp_path_factory.mktemp("prefect-results")
    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings({PREFECT_LOCAL_STORAGE_PATH: results}),
    ):
        yield
