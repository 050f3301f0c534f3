"""The paper suite as data: its runs and tables, read from YAML and validated.

The shipped declaration is harness/paper/suite.yaml; `vocalgrad-paper --suite FILE` reads one of one's own
(same shape; `include: default` or `include: other.yaml` first takes that suite's runs and tables). A
mistake is one line naming the file, the entry and the field (SuiteError, a ValueError): an unknown field,
prompt variant, config, source or table kind (with "did you mean"), a duplicate run name, table key or file
name, a table reading a run or group that does not exist, or runs that do not fit the table's kind.
Only PyYAML's safe_load reads the file: a suite file holds data, never code.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.paper.declared import EXTERNAL_CONFIGS, Suite, SuiteRun, SuiteTable
from harness.paper.tables import TABLE_KINDS, TableKind
from harness.prompts import FEW_SHOT_AUDIOS, Variant, get_variant
from vocalgrad_dataset.sources import SOURCE_NAMES
from vocalgrad_dataset.tasks import EVERY, config_spec, expand, read_yaml_mapping

DEFAULT_SUITE = Path(__file__).with_name("suite.yaml")
CATEGORY = "{category}"  # in a configs pattern: each of the nine categories, in Table 2 order
SUITE_FIELDS: tuple[str, ...] = ("include", "runs", "tables")
RUN_FIELDS: tuple[str, ...] = ("name", "prompt", "configs", "group", "source", "audios_per_query", "trained")
TABLE_FIELDS: tuple[str, ...] = ("key", "filename", "title", "kind", "runs", "labels", "note", "heading")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+:-]*")  # run, group and table names: a directory, no commas
INDEX_FILE = "README.md"  # tables/README.md lists the tables


class SuiteError(ValueError):
    """A mistake in a suite declaration: one line naming the file, the entry and the field."""


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """"; did you mean 'x'?" for the closest choice, or ""."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


# ---- one entry of a declaration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One item of a suite file's runs: or tables: list, for reading its fields with one-line errors."""

    file: str
    section: str  # "runs" or "tables"
    index: int
    raw: Mapping[str, Any]

    @property
    def label(self) -> str:
        """"run 'main'" / "table '2'", or "runs[3]" while the entry has no usable name."""
        ident = self.raw.get("name" if self.section == "runs" else "key")
        if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident):
            return f"{self.section[:-1]} {str(ident)!r}"
        return f"{self.section}[{self.index}]"

    def error(self, name: str, message: str) -> SuiteError:
        return SuiteError(f"{self.file}: {self.label}: {name}: {message}")

    def check_fields(self, allowed: Sequence[str]) -> None:
        for name in self.raw:
            if name not in allowed:
                hint = did_you_mean(str(name), allowed)
                raise self.error(str(name), f"unknown field{hint} (fields: {', '.join(allowed)})")

    def text(self, name: str, *, required: bool = True) -> str | None:
        """A text field (a number is read as its text, for table keys such as 2)."""
        value = self.raw.get(name)
        if value is None:
            if required:
                raise self.error(name, "missing")
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
            raise self.error(name, f"expected text, got {value!r}")
        return str(value)

    def identifier(self, name: str, *, required: bool = True) -> str | None:
        """A name field: letters, digits and _ . + : - (it names a directory or a --only choice)."""
        value = self.text(name, required=required)
        if value is not None and not NAME.fullmatch(value):
            raise self.error(name, f"{value!r}: use letters, digits and _ . + : - only, starting with a letter or digit")
        return value

    def texts(self, name: str) -> list[str]:
        """A list of text items (absent: empty)."""
        value = self.raw.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(name, f"expected a list of names, got {value!r}")
        return value

    def text_mapping(self, name: str) -> dict[str, str]:
        """A mapping of text to text (absent: empty)."""
        value = self.raw.get(name, {})
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self.error(name, f"expected a mapping of run names to labels, got {value!r}")
        return value


# ---- reading the files ---------------------------------------------------------------------------------


def read_declaration(path: Path) -> dict[str, Any]:
    """The top-level mapping of a suite file (runs:, tables:, include:)."""
    return read_yaml_mapping(path, SUITE_FIELDS, "suite file", SuiteError)


def section_entries(path: Path, doc: Mapping[str, Any], section: str) -> list[Entry]:
    """The items of a runs: or tables: list."""
    items = doc.get(section) or []
    if not isinstance(items, list):
        raise SuiteError(f"{path}: {section}: expected a list of entries, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise SuiteError(f"{path}: {section}[{i}]: expected a mapping of fields, got {item!r}")
    return [Entry(str(path), section, i, item) for i, item in enumerate(items)]


def include_path(path: Path, include: Any) -> Path:
    """The suite an `include:` names: "default" (the shipped suite) or a file relative to this one."""
    if not isinstance(include, str) or not include.strip():
        raise SuiteError(f"{path}: include: expected 'default' or a suite file, got {include!r}")
    return DEFAULT_SUITE if include == "default" else path.parent / include


def collect_entries(path: Path, seen: tuple[Path, ...] = ()) -> tuple[list[Entry], list[Entry]]:
    """Run and table entries of a suite file, those of its include first."""
    doc = read_declaration(path)
    runs: list[Entry] = []
    tables: list[Entry] = []
    if doc.get("include") is not None:
        target = include_path(path, doc["include"])
        if target.resolve() in (*seen, path.resolve()):
            raise SuiteError(f"{path}: include: {doc['include']!r} includes itself")
        runs, tables = collect_entries(target, (*seen, path.resolve()))
    return runs + section_entries(path, doc, "runs"), tables + section_entries(path, doc, "tables")


# ---- runs ----------------------------------------------------------------------------------------------




def run_configs(entry: Entry) -> tuple[str, ...]:
    """A run's configs: a list of canonical config names, or a {category} pattern expanded in Table 2 order."""
    value = entry.raw.get("configs")
    if isinstance(value, str) and CATEGORY in value:  # the declarations' one expander: the nine in Table 2 order
        try:
            configs = [str(c) for c in expand(value.replace(CATEGORY, EVERY))]
        except ValueError as err:
            raise entry.error("configs", str(err)) from None
    elif isinstance(value, list) and value and all(isinstance(c, str) for c in value):
        configs = list(value)
    else:
        got = "nothing" if value is None else repr(value)
        raise entry.error("configs", f'expected a list of configs or a pattern such as "{{category}}-yesno", got {got}')
    for config in configs:
        if config in EXTERNAL_CONFIGS:  # a mapped dataset's task (MELD, Table 22), not a generated config
            continue
        try:
            canonical = config_spec(config).name
        except ValueError as err:
            raise entry.error("configs", str(err)) from None
        if canonical != config:
            raise entry.error("configs", f"write {canonical!r}, not {config!r}")
        if configs.count(config) > 1:
            raise entry.error("configs", f"{config!r} is listed twice")
    return tuple(configs)


def run_variant(entry: Entry, prompt: str, configs: Sequence[str]) -> Variant:
    """The run's prompt variant, checked against every config (format configs fix their question)."""
    try:
        variant = get_variant(prompt)
        for config in configs:
            if config not in EXTERNAL_CONFIGS:
                variant.vocabulary(config)
    except ValueError as err:
        raise entry.error("prompt", str(err)) from None
    return variant


def run_source(entry: Entry, configs: Sequence[str]) -> str | None:
    """The run's own source (None: the suite's), checked against configs bound to a source (beep-*)."""
    source = entry.text("source", required=False)
    if source is not None and source not in SOURCE_NAMES and ":" not in source:
        raise entry.error("source", f"unknown source {source!r}{did_you_mean(source, SOURCE_NAMES)} "
                                    f"(sources: {', '.join(SOURCE_NAMES)} or package.module:Factory)")
    for config in (c for c in configs if c not in EXTERNAL_CONFIGS):
        bound = config_spec(config).source
        if bound not in (None, source):
            raise entry.error("source", f"config {config!r} is generated from the {bound} source only: give source: {bound}")
    return source


def audios_per_query(entry: Entry, variant: Variant) -> int:
    """Clips in one prompt: FEW_SHOT_AUDIOS for a few-shot prompt, else 1 (a declared value must agree)."""
    derived = FEW_SHOT_AUDIOS if variant.base == "few-shot" else 1
    value = entry.raw.get("audios_per_query", derived)
    if type(value) is not int or value != derived:
        raise entry.error("audios_per_query", f"prompt {variant.name!r} puts {derived} clip(s) in one query, not {value!r}")
    return derived


def parse_run(entry: Entry) -> SuiteRun:
    """One validated run entry."""
    entry.check_fields(RUN_FIELDS)
    name = entry.identifier("name") or ""
    prompt = entry.text("prompt") or ""
    configs = run_configs(entry)
    variant = run_variant(entry, prompt, configs)
    source = run_source(entry, configs)
    group = entry.identifier("group", required=False) or name
    return SuiteRun(name, prompt, configs, group, source=source, audios_per_query=audios_per_query(entry, variant),
                    trained=run_trained(entry, configs))


def run_trained(entry: Entry, configs: tuple[str, ...]) -> str | None:
    """The category the evaluated adapter was trained on (one of the run's configs), or None."""
    trained = entry.text("trained", required=False)
    if trained is not None and trained not in configs:
        raise entry.error("trained", f"{trained!r} is not one of the run's configs")
    return trained


def parse_runs(entries: Sequence[Entry]) -> tuple[SuiteRun, ...]:
    """Every run, names and directories unique, no name standing for another run's group."""
    runs: dict[str, SuiteRun] = {}
    where: dict[str, Entry] = {}
    for entry in entries:
        run = parse_run(entry)
        same_dir = next((r for r in runs.values() if r.dirname == run.dirname), None)
        if same_dir is not None:
            first = where[same_dir.name]
            what = "duplicate run name" if same_dir.name == run.name else f"the directory of run {same_dir.name!r}"
            raise entry.error("name", f"{what} (first in {first.file}, {first.section}[{first.index}])")
        runs[run.name], where[run.name] = run, entry
    for run in runs.values():
        members = [r.name for r in runs.values() if r.group == run.name]
        if members and members != [run.name]:
            raise where[run.name].error("name", f"{run.name!r} is also the group of {', '.join(map(repr, members))}")
    return tuple(runs.values())


# ---- tables --------------------------------------------------------------------------------------------


def table_kind_of(entry: Entry) -> TableKind:
    kind = entry.text("kind") or ""
    if kind not in TABLE_KINDS:
        raise entry.error("kind", f"unknown table kind {kind!r}{did_you_mean(kind, list(TABLE_KINDS))} "
                                  f"(kinds: {', '.join(TABLE_KINDS)})")
    return TABLE_KINDS[kind]


def table_filename(entry: Entry) -> str:
    """A plain Markdown file name under tables/ (not the index, README.md)."""
    name = entry.text("filename") or ""
    if Path(name).name != name or not name.endswith(".md") or name.startswith(".") or name == INDEX_FILE:
        raise entry.error("filename", f"{name!r}: expected a file name ending .md (no folders; not {INDEX_FILE})")
    return name


def table_runs(entry: Entry, suite_runs: Sequence[SuiteRun]) -> list[SuiteRun]:
    """The runs a table reads: each name a run, or a group standing for its runs in suite order."""
    by_name = {r.name: r for r in suite_runs}
    groups = list(dict.fromkeys(r.group for r in suite_runs))
    out: list[SuiteRun] = []
    for name in entry.texts("runs"):
        if name not in by_name and name not in groups:
            hint = did_you_mean(name, [*by_name, *groups])
            raise entry.error("runs", f"no run or group {name!r} in the suite{hint}")
        chosen = [by_name[name]] if name in by_name else [r for r in suite_runs if r.group == name]
        twice = next((r.name for r in chosen if r in out), None)
        if twice is not None:
            raise entry.error("runs", f"run {twice!r} is read twice")
        out += chosen
    return out


def table_labels(entry: Entry, runs: Sequence[SuiteRun]) -> dict[str, str]:
    labels = entry.text_mapping("labels")
    names = [r.name for r in runs]
    for name in labels:
        if name not in names:
            raise entry.error("labels", f"{name!r} is not a run this table reads{did_you_mean(name, names)}")
    return labels


def parse_table(entry: Entry, suite_runs: Sequence[SuiteRun]) -> SuiteTable:
    """One validated table entry."""
    entry.check_fields(TABLE_FIELDS)
    key = entry.identifier("key") or ""
    filename = table_filename(entry)
    title = entry.text("title") or ""
    kind = table_kind_of(entry)
    runs = table_runs(entry, suite_runs)
    problem = kind.problem(runs)
    if problem is not None:
        raise entry.error("runs", problem)
    labels = table_labels(entry, runs)
    return SuiteTable(key, filename, title, kind.name, tuple(r.name for r in runs), labels,
                      note=(entry.text("note", required=False) or "").strip(),
                      heading=entry.text("heading", required=False) or "")


def parse_tables(entries: Sequence[Entry], runs: Sequence[SuiteRun]) -> tuple[SuiteTable, ...]:
    """Every table, keys and file names unique."""
    tables: list[SuiteTable] = []
    for entry in entries:
        table = parse_table(entry, runs)
        if any(t.key == table.key for t in tables):
            raise entry.error("key", f"duplicate table key {table.key!r}")
        clash = next((t.key for t in tables if t.filename == table.filename), None)
        if clash is not None:
            raise entry.error("filename", f"{table.filename!r} is also the file of table {clash!r}")
        tables.append(table)
    return tuple(tables)


def with_tables(runs: Sequence[SuiteRun], tables: Sequence[SuiteTable]) -> tuple[SuiteRun, ...]:
    """The runs with the keys of the tables that read them."""
    return tuple(replace(r, tables=tuple(t.key for t in tables if r.name in t.runs)) for r in runs)


# ---- loading -------------------------------------------------------------------------------------------


def read_suite(path: str | Path) -> Suite:
    """A suite file, validated (SuiteError names the file, the entry and the field)."""
    run_entries, table_entries = collect_entries(Path(path))
    runs = parse_runs(run_entries)
    tables = parse_tables(table_entries, runs)
    return Suite(str(path), with_tables(runs, tables), tables)


@lru_cache(maxsize=1)
def default_suite() -> Suite:
    """The paper's appendix suite (harness/paper/suite.yaml)."""
    return read_suite(DEFAULT_SUITE)


def load_suite(path: str | Path | None = None) -> Suite:
    """The suite a file declares, or the paper's (None)."""
    return default_suite() if path is None else read_suite(path)


def suite_runs() -> list[SuiteRun]:
    """Every run of the paper's suite, in execution order."""
    return list(default_suite().runs)

