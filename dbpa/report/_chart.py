"""A figure of the report as an image to inline, and what every figure shares: the colours
and labels cut short."""

from __future__ import annotations

from dataclasses import dataclass

BLUE, ORANGE, GREY, RED, INK = "#3b6ea5", "#e08a3c", "#a9b1bb", "#c0392b", "#222222"


@dataclass(frozen=True)
class Chart:
    """An image as a data URI (PNG or SVG), and the width in CSS pixels to show it at."""

    uri: str
    width: int


def shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
