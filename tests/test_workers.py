"""The suite's own layout on its workers."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("layout-probe")
def test_a_tests_xdist_group_is_in_its_node_id(request: pytest.FixtureRequest):
    """Under ``--dist loadgroup`` (the README's command) pytest-xdist sends the tests of one
    ``xdist_group`` to one worker by the group's name in their node ids; pytest 9.2 ignores
    that name, and every group (one Prefect server, one embedded model, one module's pilots)
    was spread over all the workers. pyproject.toml pins pytest below 9.2."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not a worker of --dist loadgroup")
    assert request.node.nodeid.endswith("@layout-probe")
