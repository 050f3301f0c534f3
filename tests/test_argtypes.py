"""The lower-bounded number validators: each bound is inclusive or strict as its name says, and a refusal is
argparse's one line with the exact wording the command lines show."""

from __future__ import annotations

import argparse

import pytest

from vocalgrad_dataset.cli import argtypes


@pytest.mark.parametrize(("fn", "text", "value"), [
    (argtypes.positive_int, "1", 1), (argtypes.positive_int, " 7", 7), (argtypes.nonnegative_int, "0", 0),
    (argtypes.nonnegative_int, "+0", 0), (argtypes.positive_float, "1e-300", 1e-300),
    (argtypes.nonnegative_float, "0", 0.0), (argtypes.nonnegative_float, "2.5", 2.5),
])  # fmt: skip
def test_the_bound_itself_and_values_above_it_pass(fn, text: str, value: float) -> None:
    got = fn(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("fn", "text", "message"), [
    (argtypes.positive_int, "0", "0 is not a positive integer (must be >= 1)"),
    (argtypes.positive_int, " -3", "-3 is not a positive integer (must be >= 1)"),  # integers as read
    (argtypes.positive_int, "1.0", "'1.0' is not a positive integer"),
    (argtypes.nonnegative_int, "-1", "-1 is not a non-negative integer (must be >= 0)"),
    (argtypes.nonnegative_int, "x", "'x' is not a non-negative integer"),
    (argtypes.positive_float, "0", "0 is not a positive number (must be > 0)"),  # strict: 0 itself is refused
    (argtypes.positive_float, "-0.0", "-0.0 is not a positive number (must be > 0)"),  # floats as typed
    (argtypes.positive_float, "nan", "'nan' is not a positive number"),
    (argtypes.nonnegative_float, "-1e-9", "-1e-9 is not a non-negative number (must be >= 0)"),
    (argtypes.nonnegative_float, "inf", "'inf' is not a non-negative number"),
])  # fmt: skip
def test_refusals_say_what_was_wanted(fn, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as err:
        fn(text)
    assert str(err.value) == message


def test_validators_keep_their_names_for_argparse() -> None:
    parser = argparse.ArgumentParser(prog="p", exit_on_error=False)
    parser.add_argument("--n", type=argtypes.positive_int)
    with pytest.raises(argparse.ArgumentError, match="argument --n: 0 is not a positive integer"):
        parser.parse_args(["--n", "0"])
    assert [f.__name__ for f in (argtypes.positive_int, argtypes.nonnegative_int, argtypes.positive_float,
                                 argtypes.nonnegative_float)] == ["positive_int", "nonnegative_int", "positive_float",
                                                                  "nonnegative_float"]
