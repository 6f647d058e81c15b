"""``record_layout``: the tables and columns the migrations build, for the reference pages."""

from storage import MIGRATIONS, record_layout


def test_the_layout_has_every_column_with_the_migration_that_added_it():
    layout = record_layout()
    columns = {(c.table, c.name): c for c in layout.columns}
    assert columns[("samples", "text")].migration == 1
    assert not columns[("samples", "text")].nullable
    assert columns[("tests", "driver")].migration == 3  # "combined omega" added it
    assert columns[("tests", "driver")].nullable
    assert columns[("arms", "created_at")].default is not None
    assert columns[("samples", "finish_reason")].default is None
    assert layout.primary_keys["samples"] == ("arm_id", "idx")
    assert max(c.migration for c in layout.columns) <= MIGRATIONS[-1][0]
