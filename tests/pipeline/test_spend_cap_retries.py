"""A spend cap reached fails a scheduled tick once: the flow's retries treat it as terminal."""

from __future__ import annotations

import pytest

from dbpa.llm import SpendCapReached, TransientModelError
from flows import _retries


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (SpendCapReached(0.5, 0.4, missing=3), False),
        (TransientModelError("m", "HTTP 503"), True),
    ],
)
def test_a_reached_cap_is_not_retried(monkeypatch, error, retried):
    cancelled: list[bool] = []
    monkeypatch.setattr(_retries, "_no_more_retries", lambda: cancelled.append(True))
    with pytest.raises(type(error)), _retries.retried_unless_permanent():
        raise error
    assert cancelled == ([] if retried else [True])


def test_the_ticks_line_says_which_key_to_raise():
    line = str(SpendCapReached(0.5, 0.4, missing=3))
    assert "3 output(s) still missing" in line
    assert "max_cost_usd=0.9 in the config" in line
