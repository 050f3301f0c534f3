"""Samples rows and results.json (lm-evaluation-harness shaped): types, schema check, the writers.

Files of a run directory:
- `shards/samples_<config>.rank<R>.jsonl`: what rank R appended, one line per clip (committed once its
  newline is written; a torn last line from a kill is ignored and cut off before appending).
- `samples_<config>.jsonl`: the shards merged by clip id in dataset order (written by rank 0).
- `results.json`: metrics per config, the 9-category aggregate, versions and the run's settings.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from harness.parsing import PARSER_VERSION
from vocalgrad_dataset.fileio import atomic_write_bytes, atomic_write_text  # noqa: F401  (re-exported)

RESULTS_SCHEMA_VERSION = "1"
SHARD_RE = re.compile(r"^samples_(?P<config>.+)\.rank(?P<rank>\d+)\.jsonl$")


class SampleRow(TypedDict):
    """One evaluated clip as stored in samples files."""

    benchmark_clip_id: str
    category: str
    gold: str  # "increase" / "decrease"
    pred: str | None  # parsed answer; None when unparsed or error
    raw: str | None  # the model's final output (after the retry, if any)
    parsed: bool
    margin: float | None  # choices mode: logp(increase word) − logp(decrease word)
    prompt: str  # prompt text with <audio> placeholders
    prompt_variant: str
    answer_words: list[str]  # [increase word, decrease word]
    parser: str  # parser id, e.g. "main-unique-direction-v1"
    tier: str
    curve: str
    direction: str
    source_clip_id: str
    error: str | None
    retried: bool  # generate mode: the 128-token answer was unparsed and a 256-token retry ran
    model: str
    mode: str  # "generate" / "choices"


class RunConfig(TypedDict):
    """Settings of the run (results.json "config")."""

    model: str
    model_args: dict[str, Any]
    mode: str
    prompt_variant: str
    split: str
    source: str
    batch_size: int
    num_processes: int
    max_new_tokens: int
    retry_max_new_tokens: int
    limit: int | None


# Functional syntax because lm-evaluation-harness spells one key "n-samples".
ResultsJSON = TypedDict(
    "ResultsJSON",
    {
        "results": dict[str, dict[str, Any]],  # config -> metrics (accuracy, accuracy_stderr, ...)
        "groups": dict[str, dict[str, Any]],  # "vocalgrad" -> 9-category mean
        "breakdowns": dict[str, dict[str, dict[str, dict[str, Any]]]],  # config -> key -> value -> metrics
        "configs": dict[str, dict[str, Any]],  # config -> task settings (split, parser, n_expected, ...)
        "versions": dict[str, str],
        "n-samples": dict[str, dict[str, int]],  # config -> {"original", "effective"}
        "config": RunConfig,
        "date": str,
    },
)


_NUM = {"type": ["number", "null"]}
RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["results", "groups", "breakdowns", "configs", "versions", "n-samples", "config", "date"],
    "properties": {
        "results": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["accuracy", "accuracy_stderr", "n", "n_parsed", "n_error", "parsed_accuracy",
                             "balanced_accuracy", "increase_ratio", "exact_match_rate", "exact_match_accuracy"],
                "properties": {"accuracy": _NUM, "accuracy_stderr": _NUM, "n": {"type": "integer"}},
            },
        },
        "groups": {"type": "object"},
        "breakdowns": {"type": "object"},
        "configs": {"type": "object"},
        "versions": {"type": "object", "required": ["harness", "parser", "generator", "results_schema"]},
        "n-samples": {
            "type": "object",
            "additionalProperties": {"type": "object", "required": ["original", "effective"]},
        },
        "config": {
            "type": "object",
            "required": ["model", "mode", "prompt_variant", "split", "batch_size", "num_processes"],
            "properties": {"batch_size": {"type": "integer"}, "num_processes": {"type": "integer"}},
        },
        "date": {"type": "string"},
    },
}


def _schema_errors(obj: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    """Check the JSON-schema subset used above (type, required, properties, additionalProperties)."""
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        py = {"object": dict, "string": str, "integer": int, "number": (int, float), "null": type(None),
              "array": list, "boolean": bool}
        ok = any(isinstance(obj, py[t]) and not (t in ("integer", "number") and isinstance(obj, bool))
                 for t in allowed)
        if not ok:
            return [f"{where}: expected {'/'.join(allowed)}, got {type(obj).__name__}"]
    errors: list[str] = []
    if isinstance(obj, dict):
        errors += [f"{where}: missing {k!r}" for k in schema.get("required", []) if k not in obj]
        props = schema.get("properties", {})
        for k, v in obj.items():
            sub = props.get(k, schema.get("additionalProperties"))
            if isinstance(sub, Mapping):
                errors += _schema_errors(v, sub, f"{where}.{k}")
    return errors


def validate_results(obj: Any) -> None:
    """Raise ValueError listing every way obj departs from RESULTS_SCHEMA."""
    errors = _schema_errors(obj, RESULTS_SCHEMA, "results.json")
    if errors:
        raise ValueError("invalid results.json:\n  " + "\n  ".join(errors))


def versions(generator_version: str | None = None) -> dict[str, str]:
    """Versions stored in results.json."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        harness_version = version("vocalgrad")
    except PackageNotFoundError:
        harness_version = "0.1.0+src"
    if generator_version is None:
        from vocalgrad_dataset.generate import GENERATOR_VERSION

        generator_version = GENERATOR_VERSION
    return {
        "harness": harness_version,
        "parser": PARSER_VERSION,
        "generator": generator_version,
        "results_schema": RESULTS_SCHEMA_VERSION,
    }


def _jsonable(obj: Any) -> Any:
    """NaN/inf -> None so files stay strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def dumps_row(row: Mapping[str, Any]) -> str:
    """One samples line (deterministic: key order as built, no whitespace variance)."""
    return json.dumps(_jsonable(dict(row)), ensure_ascii=False, allow_nan=False)


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Atomically write rows as JSON lines."""
    atomic_write_text(path, "".join(dumps_row(r) + "\n" for r in rows))


def write_results(path: str | Path, results: Mapping[str, Any]) -> bool:
    """Validate and atomically write results.json; leave the file untouched when only the date differs.

    Returns True when the file was (re)written.
    """
    obj = _jsonable(dict(results))
    validate_results(obj)
    path = Path(path)
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            old = None
        if isinstance(old, dict) and {**old, "date": None} == {**obj, "date": None}:
            return False
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return True


def read_jsonl(path: str | Path, *, tolerate_torn_tail: bool = True, require: str | None = None) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file; a last line without its newline (a killed writer) is ignored.

    With `require`, every row must be an object holding that field (an error names the file and line).
    """
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    if tolerate_torn_tail:
        lines = lines[:-1]  # the piece after the last newline is empty or torn
    elif lines and lines[-1] == b"":
        lines = lines[:-1]
    rows = []
    for i, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{i}: corrupt JSON line ({err})") from None
            if require and (not isinstance(rows[-1], dict) or rows[-1].get(require) in (None, "")):
                raise ValueError(f"{path}:{i}: line without a {require!r}")
    return rows


def repair_jsonl(path: str | Path) -> int:
    """Cut a torn last line so appends start on a fresh line; returns the bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep < len(data):
        with open(path, "r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
    return len(data) - keep


def shard_path(out_dir: str | Path, config: str, rank: int) -> Path:
    """Where a rank appends its rows of a config."""
    return Path(out_dir) / "shards" / f"samples_{config}.rank{rank}.jsonl"


def shard_files(out_dir: str | Path, config: str) -> list[Path]:
    """Every shard of a config, whatever world size wrote it, in rank order."""
    found = []
    shard_dir = Path(out_dir) / "shards"
    if shard_dir.is_dir():
        for p in shard_dir.iterdir():
            m = SHARD_RE.match(p.name)
            if m and m["config"] == config:
                found.append((int(m["rank"]), p))
    return [p for _, p in sorted(found)]


def read_shards(out_dir: str | Path, config: str) -> dict[str, dict[str, Any]]:
    """clip id -> row over all shards (first occurrence wins, in rank then line order)."""
    rows: dict[str, dict[str, Any]] = {}
    for p in shard_files(out_dir, config):
        for r in read_jsonl(p, require="benchmark_clip_id"):
            rows.setdefault(r["benchmark_clip_id"], r)
    return rows


def samples_path(out_dir: str | Path, config: str) -> Path:
    """The merged samples file of a config."""
    return Path(out_dir) / f"samples_{config}.jsonl"


class ShardWriter:
    """Appends rows to one shard; every batch is flushed and fsynced before the next starts."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write_batch(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self._fh.write("".join(dumps_row(r) + "\n" for r in rows))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_results(
    rows_by_config: Mapping[str, list[Mapping[str, Any]]],
    *,
    run_config: Mapping[str, Any],
    task_configs: Mapping[str, Mapping[str, Any]],
    n_original: Mapping[str, int],
    date: str | None = None,
) -> dict[str, Any]:
    """results.json content from merged samples rows (the runner and `harness report` share it)."""
    from datetime import datetime, timezone

    from harness.data import CONFIGS
    from harness.metrics import breakdowns, category_mean, summarize

    group = category_mean(rows_by_config)
    group["complete"] = set(rows_by_config) == set(CONFIGS)  # the headline needs all nine categories
    return {
        "results": {c: summarize(rows) for c, rows in rows_by_config.items()},
        "groups": {"vocalgrad": group},
        "breakdowns": {c: breakdowns(rows) for c, rows in rows_by_config.items()},
        "configs": {c: dict(task_configs.get(c, {})) for c in rows_by_config},
        "versions": versions(),
        "n-samples": {
            c: {"original": int(n_original.get(c, len(rows))), "effective": len(rows)}
            for c, rows in rows_by_config.items()
        },
        "config": dict(run_config),
        "date": date or datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
