"""argparse `type=` validators for numbers, shared by every command line of the project.

A bad value then stops the command with argparse's one line, e.g.
`vocalgrad-dataset build: error: argument --clips-per-shard: -1 is not a positive integer`,
instead of being reinterpreted (0 workers = "all"?) or crashing deep inside.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def _float(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts: --num-proc, --clips-per-shard, --batch-size, --limit, ...)."""
    value = _int(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer (must be >= 1)")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (seeds, offsets, worker counts where 0 means 'in this process')."""
    value = _int(text, "a non-negative integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a non-negative integer (must be >= 0)")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0 (learning rates, durations)."""
    value = _float(text, "a positive number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number (must be > 0)")
    return value


def nonnegative_float(text: str) -> float:
    """A finite float >= 0 (timeouts, where 0 means 'do not wait')."""
    value = _float(text, "a non-negative number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a non-negative number (must be >= 0)")
    return value


def fraction(text: str) -> float:
    """A finite float in (0, 1] (a share of the clips)."""
    value = _float(text, "a fraction in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction in (0, 1]")
    return value


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An integer in [lo, hi]."""

    def parse(text: str) -> int:
        value = _int(text, f"an integer in [{lo}, {hi}]")
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is not in [{lo}, {hi}]")
        return value

    parse.__name__ = f"int_range({lo}, {hi})"
    return parse
