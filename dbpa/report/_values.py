"""Values read back from DuckDB through pandas, with its missing markers as None."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

__all__ = ["as_bool", "as_float", "as_int", "as_iso", "as_json", "as_str", "missing_as_none"]


def missing_as_none(v: Any) -> Any:
    """A stored value with pandas' missing markers (NaN, NaT, NA) as None."""
    if v is None or v is pd.NaT or v is pd.NA:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def as_float(v: Any) -> float | None:
    """A stored number as float, or None."""
    v = missing_as_none(v)
    return None if v is None else float(v)


def as_int(v: Any) -> int | None:
    """A stored number as int, or None."""
    v = missing_as_none(v)
    return None if v is None else int(v)


def as_bool(v: Any) -> bool | None:
    """A stored flag as bool, or None."""
    v = missing_as_none(v)
    return None if v is None else bool(v)


def as_str(v: Any) -> str | None:
    """A stored text as str, or None."""
    v = missing_as_none(v)
    return None if v is None else str(v)


def as_json(v: Any) -> Any:
    """A JSON column (stored as text) as Python data; {} when absent."""
    v = missing_as_none(v)
    if v is None:
        return {}
    return json.loads(v) if isinstance(v, str) else v


def as_iso(v: Any) -> str | None:
    """A stored timestamp as ISO 8601 to the second, or None."""
    v = missing_as_none(v)
    return None if v is None else pd.Timestamp(v).isoformat(timespec="seconds")
