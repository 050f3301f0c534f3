"""The docs tables are generated from the registries (EvalScope-style), so they can never drift from the code.

The blocks live in the docs pages the README moved to (docs/*.md) and in the generated docs/reference/ pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))


def _block(name: str) -> str:
    found = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", DOCS, re.S)
    assert found, f"docs/*.md have no {name} block"
    return found.group(1)


@pytest.mark.parametrize("name", ["categories", "models"])
def test_readme_tables_equal_the_generated_ones(name: str) -> None:
    if name == "categories":
        from vocalgrad_dataset.build.card import category_table_markdown as generate
    else:
        from harness.models.registry import models_table_markdown as generate
    assert _block(name) == generate().strip(), f"regenerate the docs {name} table from the registry"


def test_generated_reference_pages_are_current() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True,
                          text=True, env={**__import__("os").environ, "COLUMNS": "100"})  # fmt: skip
    assert done.returncode == 0, done.stderr
