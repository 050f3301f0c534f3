"""README tables are generated from the registries (EvalScope-style), so they can never drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _block(name: str) -> str:
    found = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", README, re.S)
    assert found, f"README has no {name} block"
    return found.group(1)


@pytest.mark.parametrize("name", ["categories", "models"])
def test_readme_tables_equal_the_generated_ones(name: str) -> None:
    if name == "categories":
        from vocalgrad_dataset.card import category_table_markdown as generate
    else:
        from harness.models.registry import models_table_markdown as generate
    assert _block(name) == generate().strip(), f"regenerate the README {name} table from the registry"
