"""The tree's rules, checked: light command start-up, no private names across modules, one-way imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vocalgrad_dataset", "harness", "probing", "finetune", "listening")
# Which package may import which (DESIGN.md): finetune, probing, listening -> harness -> vocalgrad_dataset.
MAY_IMPORT = {
    "vocalgrad_dataset": {"vocalgrad_dataset"},
    "harness": {"harness", "vocalgrad_dataset"},
    "probing": {"probing", "harness", "vocalgrad_dataset"},
    "finetune": {"finetune", "harness", "vocalgrad_dataset"},
    "listening": {"listening", "harness", "vocalgrad_dataset"},
}


def _sources() -> list[Path]:
    return sorted(p for pkg in (*PACKAGES, "tests", "benchmarks") for p in (ROOT / pkg).rglob("*.py"))


def _project_module(node: ast.ImportFrom, path: Path) -> str | None:
    """The project module an import names (relative imports resolved), or None for third-party ones."""
    if node.level:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)[: -node.level]
        return ".".join([*parts, *(node.module.split(".") if node.module else [])])
    top = (node.module or "").split(".")[0]
    return node.module if top in (*PACKAGES, "tests", "benchmarks") else None


def test_no_module_imports_an_underscore_name_of_another() -> None:
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and _project_module(node, path):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name} from {node.module}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


def test_imports_point_one_way() -> None:
    found = []
    for pkg, allowed in MAY_IMPORT.items():
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [_project_module(node, path) or ""] if isinstance(node, ast.ImportFrom) else [])
                tops = {n.split(".")[0] for n in names} & set(PACKAGES)
                found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {t}" for t in tops - allowed]
    assert found == []


@pytest.mark.parametrize("code", [
    "import sys, harness.cli, vocalgrad_dataset.cli; print('torch' in sys.modules)",
    "import sys, harness.cli as c; c.build_parser(); import harness.models.registry as r; r.list_models(); "
    "print(any(m in sys.modules for m in ('torch', 'transformers', 'librosa', 'numba', 'datasets')))",
    "import sys, harness.report, harness.leaderboard.build, listening.cli, finetune.settings; "
    "print(any(m in sys.modules for m in ('torch', 'transformers', 'librosa', 'numba', 'scipy.stats')))",
])
def test_commands_start_without_the_heavy_stack(code: str) -> None:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
