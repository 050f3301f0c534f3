"""Config identity: every config name the dataset and the harness know comes from a YAML declaration.

One file per task or family under vocalgrad_dataset/data/tasks/ (lm-eval's TaskConfig idea; installed
packages add folders through the `vocalgrad.tasks` entry point): `task` (a name, or a pattern with
`{category}` that makes one config per category: `all` stands for the nine), `kind` (what the harness asks and
how it scores: harness/kinds/), `family` (which builder makes the rows), for the VocalGrad family its
`recipe` (the generator's rows: which clips, which labels; vocalgrad_dataset.grid.Recipe), `question` and
`answers` (the prompt stored in each row), `source` (a bound source), `categories` to narrow a pattern,
`order` (listing order), `params` for a builder (a VoxParadox-lite task, ...) and `description`.
`include: other.yaml` first takes that file's fields, then this file's override them. A name is resolved once,
at the CLI or library boundary (`resolve`), into a frozen TaskConfig. Only PyYAML's safe_load reads the
files: they hold data, never code.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from vocalgrad_dataset.categories import CATEGORY_NAMES, Category, get_category
from vocalgrad_dataset.categories.base import REGISTRY as CATEGORY_REGISTRY
from vocalgrad_dataset.categories.base import load_plugin_categories
from vocalgrad_dataset.grid import Recipe
from vocalgrad_dataset.prompt import answer_line

TASKS_DIR = Path(__file__).parent / "data" / "tasks"
FIELDS: tuple[str, ...] = ("include", "task", "family", "kind", "recipe", "question", "answers", "order",
                           "categories", "source", "params", "description")
RECIPE_FIELDS: tuple[str, ...] = ("name", "labels", "augmented", "sources", "changed", "unchanged", "claims",
                                  "reverse")
CATEGORY = "{category}"
EVERY = "all"  # in place of {category}: the nine published categories
CLAIMS_SOURCE = "claims"  # the default source of a recipe with claims (the lexical-conflict carriers)


class TaskError(ValueError):
    """A mistake in a task declaration: one line naming the file and the field."""


@dataclass(frozen=True)
class TaskDecl:
    """One task file, its include merged in."""

    file: str
    task: str  # a config name, or a pattern with {category}
    family: str  # "vocalgrad" (the generator's configs) or a builder family such as "voxparadox"
    kind: str
    recipe: Recipe | None = None  # the VocalGrad family's rows
    question: str | None = None  # with {attribute}; the prompt stored in each row, with `answers`
    answers: tuple[str, ...] = ()
    order: int = 100
    categories: tuple[str, ...] | None = None  # None: every category
    source: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def is_pattern(self) -> bool:
        return CATEGORY in self.task

    def name_for(self, category: str) -> str:
        """The config name of one category ("beep-{category}" -> "beep-pitch")."""
        return self.task.replace(CATEGORY, category)

    def pattern_categories(self) -> list[str]:
        """The categories a pattern makes configs for: its own list, else every registered (plugins too)."""
        if self.categories is not None:
            return list(self.categories)
        load_plugin_categories()
        return [*CATEGORY_NAMES, *(c for c in CATEGORY_REGISTRY if c not in CATEGORY_NAMES)]


@dataclass(frozen=True)
class ConfigSpec:
    """A VocalGrad-family config as the generator needs it: its category, recipe, question and source."""

    name: str  # canonical: "pitch", "beep-pitch", "volume-ternary"
    category: Category
    recipe: Recipe
    question: str
    answers: tuple[str, ...]
    source: str | None = None  # a bound source: beep configs come from the beep source only
    default_source: str | None = None  # used when none is given (claims recipes: the claims carriers)

    @property
    def labels(self) -> tuple[str, ...]:
        """ClassLabel names of the config's `label` column."""
        return self.recipe.labels

    @property
    def format(self) -> str:
        """The recipe's name (the listing's "format" column)."""
        return self.recipe.name

    def prompt(self, attribute: str | None = None) -> str:
        """The prompt stored in each row: the question, a blank line, the answer instruction."""
        return f"{self.question.format(attribute=attribute or self.category.attribute)}\n\n{answer_line(*self.answers)}"


class TaskConfig(str):
    """One resolved config: its canonical name (the object *is* that name, so it goes wherever a config name
    goes: dict keys, file names, JSON), its declaration, and (VocalGrad family) the generator spec.

    A name is resolved once, at the CLI or library boundary (`resolve`); everything after receives this
    object, and `config_spec` / `resolve` return what it already holds instead of parsing
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
    check_fields(doc, fields, f"{path}: ", error)
    return doc


def check_fields(doc: Mapping[str, Any], fields: Sequence[str], where: str, error: type[Exception]) -> None:
    """`error` naming the first key of `doc` not in `fields`, with "did you mean"."""
    for name in doc:
        if name not in fields:
            close = difflib.get_close_matches(str(name), list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise error(f"{where}{name}: unknown field{hint} (fields: {', '.join(fields)})")


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


def _texts(path: Path, value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise TaskError(f"{path}: {name}: expected a list of words, got {value!r}")
    return tuple(value)


def read_recipe(path: Path, value: Any) -> Recipe:
    """A declaration's `recipe:` mapping as a Recipe (TaskError names the file and the field)."""
    if not isinstance(value, dict):
        raise TaskError(f"{path}: recipe: expected a mapping, got {value!r}")
    check_fields(value, RECIPE_FIELDS, f"{path}: recipe: ", TaskError)
    flags = {k: value[k] for k in ("augmented", "sources", "claims", "reverse") if k in value}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise TaskError(f"{path}: recipe: {', '.join(flags)}: expected true or false")
    recipe = Recipe(name=_text(path, value, "name", required=True) or "", labels=_texts(path, value.get("labels"),
                    "recipe: labels"), changed=_text(path, value, "changed"), unchanged=_text(path, value, "unchanged"),
                    **flags)  # fmt: skip
    used = {w for w in (recipe.changed, recipe.unchanged) if w is not None}
    if not used <= set(recipe.labels) or (recipe.sources and recipe.unchanged is None):
        raise TaskError(f"{path}: recipe: changed / unchanged must be among its labels {list(recipe.labels)} "
                        "(unchanged is required with sources: true)")
    return recipe


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
    if not isinstance(doc.get("order", 100), int):
        raise TaskError(f"{path}: order: expected a whole number, got {doc['order']!r}")
    decl = TaskDecl(
        file=str(path), task=_text(path, doc, "task", required=True) or "",
        family=_text(path, doc, "family", required=True) or "", kind=_text(path, doc, "kind", required=True) or "",
        recipe=read_recipe(path, doc["recipe"]) if "recipe" in doc else None, question=_text(path, doc, "question"),
        answers=_texts(path, doc["answers"], "answers") if "answers" in doc else (), order=doc.get("order", 100),
        categories=tuple(categories) if categories is not None else None,
        source=_text(path, doc, "source"), params=params, description=_text(path, doc, "description") or "",
    )  # fmt: skip
    _check_family(path, decl)
    return decl


def _check_family(path: Path, decl: TaskDecl) -> None:
    if decl.family == "vocalgrad" and (decl.recipe is None or decl.question is None or not decl.answers
                                       or not decl.is_pattern):
        raise TaskError(f"{path}: a vocalgrad family task needs a recipe, a question, answers and a {CATEGORY} pattern")
    if decl.family != "vocalgrad" and decl.is_pattern:
        raise TaskError(f"{path}: task: {CATEGORY} patterns are for the vocalgrad family (one file per {decl.family} task)")


def task_dirs() -> list[Path]:
    """Where declarations live: ours, then each installed `vocalgrad.tasks` entry point's folder."""
    from vocalgrad_dataset.plugins import entry_point_objects

    return [TASKS_DIR, *(Path(obj() if callable(obj) else obj) for _name, obj in entry_point_objects("vocalgrad.tasks"))]


@lru_cache(maxsize=1)
def declarations() -> tuple[TaskDecl, ...]:
    """Every task declaration in listing order (`order`, then file name; files starting with "_" are only
    included)."""
    files = [p for d in task_dirs() for p in sorted(d.glob("*.yaml")) if not p.name.startswith("_")]
    decls = [read_task_file(p) for p in files]
    return tuple(sorted(decls, key=lambda d: d.order))


def config_names() -> list[str]:
    """Every single (non-expanding) config name of the VocalGrad family: each pattern over its categories."""
    return [d.name_for(c) for d in declarations() if d.is_pattern for c in d.pattern_categories()]


def declared_names() -> list[str]:
    """Every config name the declarations make: the VocalGrad configs, then the others."""
    return [*config_names(), *(d.task for d in declarations() if not d.is_pattern)]


def registry_key() -> tuple[int, ...]:
    """Which categories are registered (a plugin category makes new config names): the memo key of a resolution.
    Cheap on purpose (it is asked on every resolution, per row on some paths): plugins load where names are
    listed (`pattern_categories`) or a category is missed (`get_category`), not here."""
    return tuple(map(id, CATEGORY_REGISTRY.values()))


_RESOLVED: dict[tuple[str, tuple[int, ...]], TaskConfig] = {}  # (name, registry_key()) -> its resolution


def resolve(name: str) -> TaskConfig:
    """The one resolution step: a config name or alias (`voice_pitch`, `speaking_speed-ternary`) to its
    TaskConfig; a TaskConfig is returned as it is. Unknown names get "did you mean" over every declared name,
    the list `vocalgrad-dataset list --configs` prints. A name is resolved once per process (memoised; a
    plugin category registered later makes new names, so the key holds the registered categories)."""
    if isinstance(name, TaskConfig):
        return name
    key = (str(name), registry_key())
    found = _RESOLVED.get(key)
    if found is None:  # a name read back from a file (a build folder, a samples row) is resolved once too
        found = _RESOLVED[key] = _resolve(str(name))
        _RESOLVED.setdefault((str(found), key[1]), found)  # an alias resolves its canonical name as well
    return found


def _spec(decl: TaskDecl, category: Category) -> TaskConfig:
    """The resolved config of one pattern declaration and one category."""
    assert decl.recipe is not None and decl.question is not None  # _check_family
    name = decl.name_for(category.name)
    spec = ConfigSpec(name, category, decl.recipe, decl.question, decl.answers, decl.source,
                      CLAIMS_SOURCE if decl.recipe.claims else None)
    return TaskConfig(name, decl, spec)


def _pattern_match(decl: TaskDecl, name: str) -> Category | None:
    """The category a pattern declaration makes `name` for (its own or a published alias), else None."""
    before, _, after = decl.task.partition(CATEGORY)
    if not (name.startswith(before) and name.endswith(after) and len(name) > len(before) + len(after)):
        return None
    try:
        category = get_category(name[len(before) : len(name) - len(after)])
    except KeyError:
        return None
    if decl.categories is not None and category.name not in decl.categories:
        raise ValueError(f"config {name!r}: {decl.task!r} covers {', '.join(decl.categories)} only, "
                         f"not {category.name!r} ({decl.file})")
    return category


def _resolve(name: str) -> TaskConfig:
    for d in declarations():
        if not d.is_pattern and d.task == name:
            return TaskConfig(name, d)
    for d in declarations():
        if d.is_pattern and (category := _pattern_match(d, name)) is not None:
            return _spec(d, category)
    if name in expanding_names():
        raise ValueError(f"{name!r} names several configs ({', '.join(map(str, expand(name)))}); name one")
    close = difflib.get_close_matches(name, [*declared_names(), *expanding_names()], n=2)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"unknown config {name!r}{hint} (see `vocalgrad-dataset list --configs`)")


def expanding_names() -> list[str]:
    """The names that stand for several configs: each pattern with `all` for its categories."""
    return [d.name_for(EVERY) for d in declarations() if d.is_pattern]


def expand(name: str) -> list[TaskConfig]:
    """The resolved configs a name stands for: a pattern with `all` in place of {category} (`all`,
    `all-ternary`, `beep-all`) is one per category (the nine, or the pattern's own list); anything else is
    `resolve(name)`."""
    for d in declarations():
        if d.is_pattern and d.name_for(EVERY) == str(name):
            return [_spec(d, get_category(c)) for c in (d.categories or CATEGORY_NAMES)]
    return [resolve(name)]


def config_spec(name: str) -> ConfigSpec:
    """The generator's spec of a VocalGrad-family config (one line naming the family otherwise)."""
    config = resolve(name)
    if config.spec is None:
        raise ValueError(f"config {str(config)!r} is a {config.family} config (its rows are built items), "
                         "not one of the generator's")
    return config.spec


def published_name(config: str) -> str:
    """A VocalGrad config under its category's published long name, with the variant marked ("pitch" ->
    "voice_pitch", "volume-ternary" -> "volume-ternary", "beep-pitch" -> "beep-voice_pitch")."""
    resolved = resolve(config)
    return resolved.decl.name_for(config_spec(resolved).category.release_name)


def expand_specs(name: str) -> list[ConfigSpec]:
    """The specs of the VocalGrad configs a name stands for (`all`, `all-ternary`, `beep-all`, or one)."""
    return [config_spec(c) for c in expand(name)]




def is_vocalgrad(name: str) -> bool:
    """True when a config is one of the generator's (VocalGrad family) configs."""
    return resolve(name).family == "vocalgrad"
