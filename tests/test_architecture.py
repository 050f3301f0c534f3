"""The tree's rules, checked: light command start-up, no private names across modules, one-way imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vocalgrad_dataset", "harness", "probing", "finetune", "listening")
# Which package may import which (docs/extending.md): finetune, probing, listening -> harness -> vocalgrad_dataset.
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


def _test_modules_named(node: ast.AST) -> list[str]:
    """The test modules (tests.test_*) an import or a "module:Name" string (a model loaded by name) names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        names = [node.value.split(":", 1)[0]] if ":" in node.value else []
    else:
        names = []
    return [n for n in names if n.startswith("tests.test_")]


def test_no_module_imports_a_test_module() -> None:
    # shared fixtures live in tests/helpers/ or tests/conftest.py: a test module is never another's library
    found = []
    for path in _sources():
        own = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found += [f"{path.relative_to(ROOT)}:{node.lineno} names {name}" for name in _test_modules_named(node)
                      if name != own]
    assert found == [], "move what they share to tests/helpers/"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Project module -> project modules it imports anywhere (top level, in functions, under TYPE_CHECKING)."""
    modules = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}

    def owner(name: str) -> str | None:  # the module a dotted name lives in ("harness.data.CONFIGS" -> harness.data)
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (base := _project_module(node, path)):
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            # a package's __init__ is not a dependency of its own modules
            graph[mod] |= {o for n in names if (o := owner(n)) and o != mod and not mod.startswith(o + ".")}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += graph.get(node, ())
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that reach each other (strongly connected, more than one module), sorted."""
    reach = {m: _reachable(graph, m) for m in graph}
    groups = {frozenset({m, *(n for n in reach[m] if m in reach[n])}) for m in graph if m in reach[m]}
    return sorted(sorted(g) for g in groups)


def test_no_import_cycles() -> None:
    # Lazy and type-only imports count too: a circle hidden in a function is still a circle of concepts.
    assert _cycles(_import_graph()) == []


def test_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


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


# A kind's name may be written only where the kind is defined (harness/kinds/) or declared (the YAML files):
# everywhere else the code asks the kind (harness.kinds.task_kind / row_kind / result_kind). "direction" is
# also the grid's row field (a condition's up / down), so only its use as a kind could be told apart: the
# registry below names it, and its module is the only place that registers it.
KIND_DEFINITIONS = ROOT / "harness" / "kinds"


def _kind_names() -> set[str]:
    from harness.kinds import KINDS

    return set(KINDS) - {"direction"}


def kind_literals(paths: list[Path], names: set[str], root: Path = ROOT) -> list[str]:
    """`file:line: 'name'` for every string constant equal to a kind's name in `paths`."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_no_kind_name_is_written_outside_the_kinds_package() -> None:
    names = _kind_names()
    assert {"mcq", "classify", "conflict", "yesno", "ternary"} <= names
    paths = [p for pkg in (*PACKAGES, "scripts", "benchmarks") for p in (ROOT / pkg).rglob("*.py")
             if KIND_DEFINITIONS not in p.parents]
    assert kind_literals(paths, names) == []


def test_the_kind_literal_check_finds_a_planted_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('"""Says mcq in prose."""\n\ndef is_mcq(row):\n    return row.get("kind") == "mcq"\n',
                       encoding="utf-8")
    assert kind_literals([planted], {"mcq"}, tmp_path) == ["planted.py:4: 'mcq'"]
