"""argparse `type=` validators for numbers, shared by every command line of the project.

A bad value then stops the command with argparse's one line, e.g.
`vocalgrad-dataset build: error: argument --clips-per-shard: -1 is not a positive integer`,
instead of being reinterpreted (0 workers = "all"?) or crashing deep inside.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

Number = TypeVar("Number", int, float)


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


def _at_least(read: Callable[[str, str], Number], what: str, bound: int, *, strict: bool, name: str,
              doc: str) -> Callable[[str], Number]:
    """A validator of numbers >= `bound` (> `bound` when `strict`), named `name` for argparse and help()."""
    relation = ">" if strict else ">="

    def parse(text: str) -> Number:
        value = read(text, what)
        if value < bound or (strict and value == bound):
            shown = text if isinstance(value, float) else value  # floats as typed, integers as read
            raise argparse.ArgumentTypeError(f"{shown} is not {what} (must be {relation} {bound})")
        return value

    parse.__name__ = parse.__qualname__ = name
    parse.__doc__ = doc
    return parse


positive_int = _at_least(_int, "a positive integer", 1, strict=False, name="positive_int",
                         doc="An integer >= 1 (counts: --num-proc, --clips-per-shard, --batch-size, --limit, ...).")
nonnegative_int = _at_least(_int, "a non-negative integer", 0, strict=False, name="nonnegative_int",
                            doc="An integer >= 0 (seeds, offsets, worker counts where 0 means 'in this process').")
positive_float = _at_least(_float, "a positive number", 0, strict=True, name="positive_float",
                           doc="A finite float > 0 (learning rates, durations).")
nonnegative_float = _at_least(_float, "a non-negative number", 0, strict=False, name="nonnegative_float",
                              doc="A finite float >= 0 (timeouts, where 0 means 'do not wait').")


def fraction(text: str) -> float:
    """A finite float in (0, 1] (a share of the clips)."""
    value = _float(text, "a fraction in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction in (0, 1]")
    return value


def share(text: str) -> float:
    """A finite float in [0, 1] (a share of rows; 0 allows none)."""
    value = _float(text, "a share in [0, 1]")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a share in [0, 1]")
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
