"""The answer parsers of SPEC §5 on adversarial outputs."""

from __future__ import annotations

import pytest

from harness.parsing import MAIN, PARSER_VERSION, SYNONYM, get_parser, is_exact, normalize_exact

MAIN_CASES = [
    ("increase", "increase"),
    ("decrease", "decrease"),
    ("Increase.", "increase"),
    ("DECREASES", "decrease"),
    ('"increase"', "increase"),
    ("\u201cDecrease\u201d", "decrease"),
    ("The volume increases over time.", "increase"),
    ("increase increase increases", "increase"),  # one family, several words
    ("It does not increase.", "increase"),  # negation is not understood (published rule, documented)
    ("increase or decrease", None),  # both families: ambiguous
    ("It increases, then decreases.", None),
    ("increasing", None),  # not a main-vocabulary word
    ("The pitch is decreasing", None),
    ("increased", None),
    ("reincrease", None),  # whole words only
    ("increase_rate", None),  # underscore joins words
    ("rise", None),
    ("", None),
    ("   ", None),
    (None, None),
    ("I cannot tell from this audio.", None),
    ("**Increase**", "increase"),
    ("Answer: decrease!", "decrease"),
    ("non-increase", "increase"),  # a hyphen is a word boundary
]


@pytest.mark.parametrize(("raw", "expected"), MAIN_CASES)
def test_main_parser(raw: str | None, expected: str | None) -> None:
    assert MAIN.parse(raw) == expected


SYNONYM_CASES = [
    ("rise", "increase"),
    ("Falling.", "decrease"),
    ("upwards", "increase"),
    ("It gets slower", "decrease"),
    ("accelerating", "increase"),
    ("decelerates", "decrease"),
    ("declines", "decrease"),
    ("increasing", "increase"),
    ("rise or fall", None),
    ("faster then slower", None),
    ("rose", None),  # not in the published list
    ("up", None),
    (None, None),
]


@pytest.mark.parametrize(("raw", "expected"), SYNONYM_CASES)
def test_synonym_parser(raw: str | None, expected: str | None) -> None:
    assert SYNONYM.parse(raw) == expected


def test_ambiguity_and_families() -> None:
    assert MAIN.is_ambiguous("increase or decrease")
    assert not MAIN.is_ambiguous("increasing or decreasing")  # no main words at all
    assert SYNONYM.is_ambiguous("increasing or decreasing")
    assert MAIN.families("Decrease, decrease") == {"decrease"}


def test_parser_ids_are_versioned_and_resolvable() -> None:
    assert PARSER_VERSION == "1"
    assert MAIN.id == "main-unique-direction-v1"  # equals the published parser id
    assert SYNONYM.id == "synonym-unique-direction-v1"
    assert get_parser("main") is MAIN
    assert get_parser("synonym-unique-direction-v1") is SYNONYM
    with pytest.raises(ValueError, match="did you mean 'synonym'"):
        get_parser("synonim")


@pytest.mark.parametrize(
    ("raw", "exact"),
    [
        ("increase", True),
        ("  Decrease.\n", True),
        ('"increase"', True),
        ("\u2018decrease\u2019", True),
        ("increases", False),
        ("The answer is increase", False),
        ("increase decrease", False),
        ("", False),
        (None, False),
    ],
)
def test_exact_match(raw: str | None, exact: bool) -> None:
    assert is_exact(raw, ("increase", "decrease")) is exact


def test_exact_match_uses_prompt_words() -> None:
    assert is_exact("Rise!", ("rise", "fall"))
    assert not is_exact("increase", ("rise", "fall"))
    assert normalize_exact(" 'Faster'. ") == "faster"
