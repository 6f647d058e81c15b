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


@pytest.mark.xdist_group("embedded-model")
def test_a_test_of_a_real_part_is_marked_slow(request: pytest.FixtureRequest):
    """``-m "not slow"`` (the README's quicker command) leaves out the tests of real models,
    servers and browsers by their group or fixture (``tests/conftest.py``), not only those
    marked by hand."""
    assert request.node.get_closest_marker("slow") is not None


def test_a_test_of_no_real_part_is_not_marked_slow(request: pytest.FixtureRequest):
    assert request.node.get_closest_marker("slow") is None
