"""Markdown tables and percentage cells: the one formatting of every report, paper table and card."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def pct(x: Any, digits: int = 1) -> str:
    """A fraction as a percentage cell ("53.1"); "—" for a missing value (None or NaN)."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable as plain text too)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
