"""Task configs as data: every config the dataset and the harness know is declared in a YAML file.

One file per task or family under vocalgrad_dataset/data/tasks/ (lm-eval's TaskConfig idea): `task` (a name,
or a pattern with `{category}` that makes one config per category), `kind` (what the harness asks and how it
scores: direction, yesno, ternary, mcq, ...; harness/tasks.py), `family` (which builder makes the rows),
`format` and `source` for the VocalGrad family, `categories` to narrow a pattern, `params` for the kind or
builder (an MCQ task's builder, question, labels, ...) and `description`. `include: other.yaml` first takes
that file's fields, then this file's override them. A new task is a new file here (and, for a new kind, an
entry in harness/tasks.py). Only PyYAML's safe_load reads the files: they hold data, never code.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from vocalgrad_dataset.generate import ConfigSpec, config_names, parse_config, registry_key

TASKS_DIR = Path(__file__).parent / "data" / "tasks"
FIELDS: tuple[str, ...] = ("include", "task", "family", "kind", "format", "categories", "source", "params",
                           "description")
CATEGORY = "{category}"
DEFAULT_KIND = "direction"


class TaskError(ValueError):
    """A mistake in a task declaration: one line naming the file and the field."""


@dataclass(frozen=True)
class TaskDecl:
    """One task file, its include merged in."""

    file: str
    task: str  # a config name, or a pattern with {category}
    family: str  # "vocalgrad" (the generator's configs) or a builder family such as "voxparadox"
    kind: str
    format: str | None = None
    categories: tuple[str, ...] | None = None  # None: every category
    source: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def is_pattern(self) -> bool:
        return CATEGORY in self.task


class TaskConfig(str):
    """One resolved config: its canonical name (the object *is* that name, so it goes wherever a config name
    goes: dict keys, file names, JSON), its declaration, and (VocalGrad family) the generator spec.

    A name is resolved once, at the CLI or library boundary (`resolve`); everything after receives this
    object, and `generate.parse_config` / `task_config` return what it already holds instead of parsing
    the name again (lm-eval's TaskConfig, passed as an object)."""

    decl: TaskDecl
    spec: ConfigSpec | None

    def __new__(cls, name: str, decl: TaskDecl, spec: ConfigSpec | None = None) -> TaskConfig:
        obj = super().__new__(cls, name)
        obj.decl, obj.spec = decl, spec
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled by name, resolved again on the other side: a spec holds its category's lambdas (segment
        # kernels), which pickle cannot carry into build workers, DataLoader workers or accelerate ranks.
        return (resolve, (str(self),))

    def __repr__(self) -> str:
        return str.__repr__(self)  # messages quote a config as its name: 'voxparadox-pitch'

    @property
    def name(self) -> TaskConfig:
        """The canonical name (this object: callers that take `.name` keep the resolution)."""
        return self

    @property
    def kind(self) -> str:
        return self.decl.kind

    @property
    def family(self) -> str:
        return self.decl.family

    @property
    def params(self) -> Mapping[str, Any]:
        return self.decl.params

    @property
    def rows(self) -> str:
        """How its rows are made without a build: "generate" (the generator, per source clip) or "items"
        (VoxParadox-lite items, built in memory from the vendored bases)."""
        return "generate" if self.family == "vocalgrad" else "items"

    @property
    def source(self) -> str | None:
        """The corpus its rows are generated from when none is named (beep, claims, else vctk); None for items."""
        if self.spec is None:
            return None
        return self.spec.source or self.spec.default_source or "vctk"


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error on one line, with its position."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        return f"{err.problem or err.context} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(err).split())


def read_yaml_mapping(path: Path, fields: Sequence[str], what: str, error: type[Exception]) -> dict[str, Any]:
    """The top-level mapping of a declaration file (a task file, a paper suite): `error` with one line naming
    the file when it cannot be read, is not YAML or not a mapping, or has a field not in `fields`."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise error(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        raise error(f"{path}: not valid YAML: {yaml_problem(err)}") from None
    if not isinstance(doc, dict):
        raise error(f"{path}: expected a mapping of {what} fields, got {type(doc).__name__}")
    for name in doc:
        if name not in fields:
            close = difflib.get_close_matches(str(name), list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise error(f"{path}: {name}: unknown field{hint} (fields: {', '.join(fields)})")
    return doc


def _read(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path, FIELDS, "task file", TaskError)


def _merged(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A file's fields over those of the file it includes."""
    doc = _read(path)
    include = doc.pop("include", None)
    if include is None:
        return doc
    if not isinstance(include, str) or not include.strip():
        raise TaskError(f"{path}: include: expected a task file name, got {include!r}")
    target = path.parent / include
    if target.resolve() in (*seen, path.resolve()):
        raise TaskError(f"{path}: include: {include!r} includes itself")
    return {**_merged(target, (*seen, path.resolve())), **doc}


def _text(path: Path, doc: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = doc.get(name)
    if value is None:
        if required:
            raise TaskError(f"{path}: {name}: missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{path}: {name}: expected text, got {value!r}")
    return value


def read_task_file(path: str | Path) -> TaskDecl:
    """One task declaration, validated (TaskError names the file and the field)."""
    path = Path(path)
    doc = _merged(path)
    categories = doc.get("categories")
    if categories is not None and (not isinstance(categories, list) or not all(isinstance(c, str) for c in categories)):
        raise TaskError(f"{path}: categories: expected a list of category names, got {categories!r}")
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise TaskError(f"{path}: params: expected a mapping, got {params!r}")
    decl = TaskDecl(
        file=str(path), task=_text(path, doc, "task", required=True) or "",
        family=_text(path, doc, "family", required=True) or "", kind=_text(path, doc, "kind") or DEFAULT_KIND,
        format=_text(path, doc, "format"), categories=tuple(categories) if categories is not None else None,
        source=_text(path, doc, "source"), params=params, description=_text(path, doc, "description") or "",
    )  # fmt: skip
    if decl.family == "vocalgrad" and (decl.format is None or not decl.is_pattern):
        raise TaskError(f"{path}: a vocalgrad family task needs a format and a {CATEGORY} pattern")
    if decl.family != "vocalgrad" and decl.is_pattern:
        raise TaskError(f"{path}: task: {CATEGORY} patterns are for the vocalgrad family (one file per {decl.family} task)")
    return decl


@lru_cache(maxsize=1)
def declarations() -> tuple[TaskDecl, ...]:
    """Every shipped task declaration, in file-name order (files starting with "_" are only included)."""
    return tuple(read_task_file(p) for p in sorted(TASKS_DIR.glob("*.yaml")) if not p.name.startswith("_"))


def declared_names() -> list[str]:
    """Every config name the declarations make: the VocalGrad configs (config_names order), then the others."""
    others = [d.task for d in declarations() if not d.is_pattern]
    return [*config_names(), *others]


def _vocalgrad_decl(spec: ConfigSpec) -> TaskDecl | None:
    for d in declarations():
        if d.family != "vocalgrad" or d.format != spec.format or d.source != spec.source:
            continue
        if d.categories is None or spec.category.name in d.categories:
            return d
    return None


_RESOLVED: dict[tuple[str, tuple[int, ...]], TaskConfig] = {}  # (name, registry_key()) -> its resolution


def resolve(name: str) -> TaskConfig:
    """The one resolution step: a config name or alias (`voice_pitch`, `speaking_speed-ternary`) to its
    TaskConfig; a TaskConfig is returned as it is. Unknown names get "did you mean" over every declared name,
    the list `vocalgrad-dataset list --configs` prints. A name is parsed once per process (memoised; a
    plugin category registered later makes new names, so the key holds the registered categories)."""
    if isinstance(name, TaskConfig):
        return name
    key = (str(name), registry_key())
    found = _RESOLVED.get(key)
    if found is None:
        found = _RESOLVED[key] = _resolve(str(name))
    return found


def _resolve(name: str) -> TaskConfig:
    for d in declarations():
        if not d.is_pattern and d.task == name:
            return TaskConfig(name, d)
    try:
        spec = parse_config(name)
    except ValueError as err:
        if name in config_names() or "unknown VocalGrad config" not in str(err):
            raise
        close = difflib.get_close_matches(name, declared_names(), n=2)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown config {name!r}{hint} (see `vocalgrad-dataset list --configs`)") from None
    decl = _vocalgrad_decl(spec)
    if decl is None:
        raise ValueError(f"config {spec.name!r} has no task declaration under {TASKS_DIR}")
    return TaskConfig(spec.name, decl, spec)


def expand(name: str) -> list[TaskConfig]:
    """The resolved configs a name stands for: `all`, `all-<format>` and `beep-all` expand (each spec parsed
    once, by expand_config), anything else is `resolve(name)`."""
    if name in ("all", "beep-all") or str(name).startswith("all-"):
        from vocalgrad_dataset.generate import expand_config

        out = []
        for spec in expand_config(str(name)):
            decl = _vocalgrad_decl(spec)
            if decl is None:
                raise ValueError(f"config {spec.name!r} has no task declaration under {TASKS_DIR}")
            out.append(TaskConfig(spec.name, decl, spec))
        return out
    return [resolve(name)]


def task_config(name: str) -> TaskConfig:
    """The declared config a name stands for (`resolve`; kept for the modules that call it by this name)."""
    return resolve(name)


def is_vocalgrad(name: str) -> bool:
    """True when a config is one of the generator's (VocalGrad family) configs."""
    return task_config(name).family == "vocalgrad"
