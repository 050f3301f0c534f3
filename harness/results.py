"""Samples rows and results.json (lm-evaluation-harness shaped): types, schema check, the writers.

Files of a run directory:
- `shards/samples_<config>.rank<R>.jsonl`: what rank R appended, one line per clip (committed once its
  newline is written; a torn last line from a kill is ignored and cut off before appending).
- `samples_<config>.jsonl`: the shards merged by clip id in dataset order (written by rank 0).
- `results.json`: metrics per config, the 9-category aggregate, versions and the run's settings.
"""

# No `from __future__ import annotations`: TypedDict needs real NotRequired[...] to know its required keys.
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import UnionType
from typing import (
    Any,
    NotRequired,
    Required,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from harness.parsing import PARSER_VERSION
from harness.redact import without_url_credentials
from vocalgrad_dataset.fileio import atomic_write_bytes, atomic_write_text, safe_component  # noqa: F401

# 3: the headline group holds the main categories only; its CI is Wilson. 4: lm-eval's shape exactly ("results"
# and "groups" hold only "<metric>,none" keys, "versions" is per task); our summaries moved to "metrics",
# "group_metrics" and "vocalgrad_versions"; "incomplete" says why a run that mostly failed is no result.
RESULTS_SCHEMA_VERSION = "4"
DEFAULT_MAX_ERROR_RATE = 0.1  # a run with a larger share of error rows is incomplete (non-zero exit, refused)
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
    model_args: NotRequired[dict[str, Any]]
    mode: str
    prompt_variant: str
    split: str
    source: NotRequired[str]
    batch_size: int | str  # the size asked for: a number or "auto"
    batch_sizes: NotRequired[list[int]]  # the size the model ended at (after OOM halving), as lm-eval records it
    num_processes: int
    max_new_tokens: NotRequired[int]
    retry_max_new_tokens: NotRequired[int]
    max_error_rate: NotRequired[float]  # a larger share of error rows marks the run incomplete
    limit: NotRequired[int | float | None]  # a count or a fraction; the clips are a stratified sample
    seed: NotRequired[int | None]


class MetricSummary(TypedDict):
    """harness.metrics.summarize() of one config or breakdown cell; None where a value is undefined."""

    n: int
    n_correct: int
    n_parsed: int
    n_unparsed: int
    n_ambiguous: int
    n_error: int
    accuracy: float | None
    accuracy_stderr: float | None
    accuracy_ci_low: float | None  # Wilson 95 %
    accuracy_ci_high: float | None
    n_clusters: int | None  # source clips among the rows; None when rows carry none
    accuracy_cluster_stderr: float | None  # None when rows carry no source clip, or fewer than MIN_CLUSTERS
    accuracy_cluster_ci_low: float | None
    accuracy_cluster_ci_high: float | None
    parsed_accuracy: float | None
    parsed_accuracy_stderr: float | None
    balanced_accuracy: float | None
    balanced_accuracy_stderr: float | None
    macro_f1: float | None
    macro_f1_stderr: float | None  # no closed form: always None
    increase_ratio: float | None
    increase_ratio_stderr: float | None
    increase_ratio_all: float | None
    increase_ratio_all_stderr: float | None
    exact_match_rate: float | None
    exact_match_rate_stderr: float | None
    exact_match_accuracy: float | None
    exact_match_accuracy_stderr: float | None


# Metrics whose larger value is better (lm-eval's higher_is_better); increase_ratio is best at 0.5.
HIGHER_IS_BETTER: dict[str, bool | None] = {
    "accuracy": True, "parsed_accuracy": True, "balanced_accuracy": True, "macro_f1": True,
    "exact_match_rate": True, "exact_match_accuracy": True, "increase_ratio": None, "increase_ratio_all": None,
}
LM_EVAL_FILTER = "none"  # lm-eval keys a metric "<metric>,<filter>"; our answers pass through no filter

# One config's entry of results.json "results" (and of "groups"), exactly as lm-evaluation-harness writes it:
# the task `alias` it prints, then each HIGHER_IS_BETTER metric under "<metric>,none" and "<metric>_stderr,none"
# (stderr "N/A" where undefined, as lm-eval writes it). Counts and CI bounds stay out of it (lm-eval's
# make_table would list them as metrics): they are in "metrics" / "group_metrics", which lm-eval ignores.
TaskResult = TypedDict("TaskResult", {  # type: ignore[misc]
    "alias": str,
    **{f"{m},{LM_EVAL_FILTER}": float | None for m in HIGHER_IS_BETTER},
    **{f"{m}_stderr,{LM_EVAL_FILTER}": float | str for m in HIGHER_IS_BETTER},
})
GroupResult = TypedDict("GroupResult", {  # type: ignore[misc]
    "alias": str, f"accuracy,{LM_EVAL_FILTER}": float | None, f"accuracy_stderr,{LM_EVAL_FILTER}": float | str,
})


def lm_eval_keys(summary: Mapping[str, Any], metrics: Iterable[str] = HIGHER_IS_BETTER) -> dict[str, Any]:
    """The "<metric>,none" and "<metric>_stderr,none" entries of a summary (lm-evaluation-harness's keys)."""
    out: dict[str, Any] = {}
    for m in metrics:
        se = summary.get(f"{m}_stderr")
        out[f"{m},{LM_EVAL_FILTER}"] = summary.get(m)
        out[f"{m}_stderr,{LM_EVAL_FILTER}"] = "N/A" if se is None else se
    return out


class GroupSummary(TypedDict):
    """harness.metrics.category_mean() over the run's main categories (format and variant configs only when
    the run has no main category), plus whether all nine are in it."""

    n_configs: int
    configs: NotRequired[list[str]]
    accuracy: float | None
    accuracy_stderr: NotRequired[float | None]
    accuracy_ci_low: NotRequired[float | None]
    accuracy_ci_high: NotRequired[float | None]
    n_clusters: NotRequired[int | None]
    accuracy_cluster_stderr: NotRequired[float | None]
    complete: bool


class NSamples(TypedDict):
    """Clips of a config in the dataset ("original") and evaluated ("effective"), as lm-eval counts them."""

    original: int
    effective: int


class Environment(TypedDict):
    """Where the run ran: this project's commit, library versions, hardware."""

    git_hash: str | None  # of the vocalgrad checkout; None outside git
    git_dirty: bool | None
    python: str
    platform: str
    cpu: str
    gpu: list[str]  # accelerator names; [] on CPU
    packages: dict[str, str | None]  # torch, transformers, datasets, ... (None: not installed)


class DatasetInfo(TypedDict):
    """Which data the clips came from; the build's manifest hash when the data has one."""

    source: str
    manifest: str | None  # the manifest file the hash is of
    manifest_sha256: str | None


# Functional syntax because lm-evaluation-harness spells two keys "n-samples" and "n-shot".
ResultsJSON = TypedDict(
    "ResultsJSON",
    {
        "results": dict[str, TaskResult],  # config -> lm-eval's "<metric>,none" keys only
        "groups": dict[str, GroupResult],  # "vocalgrad" -> the 9-category mean, lm-eval's keys only
        "metrics": dict[str, MetricSummary],  # config -> every count and metric (what reports read)
        "group_metrics": dict[str, GroupSummary],  # "vocalgrad" -> 9-category mean with CI and completeness
        "breakdowns": dict[str, dict[str, dict[str, MetricSummary]]],  # config -> key -> value -> metrics
        "configs": dict[str, dict[str, Any]],  # config -> task settings (split, parser, n_expected, ...)
        "versions": dict[str, str],  # config -> task version (lm-eval's per-task "versions")
        "vocalgrad_versions": dict[str, str],  # harness, parser, generator, results schema
        "incomplete": str | None,  # why the run is no result (too many error rows), else None
        "n-samples": dict[str, NSamples],
        "n-shot": dict[str, int],  # audio examples in the prompt (4 for few-shot, else 0)
        "higher_is_better": dict[str, dict[str, bool | None]],  # config -> metric -> direction (None: neither)
        "config": RunConfig,
        "limited": bool,  # True when --limit evaluated a stratified sample, not every clip
        "date": str,
        "start_time": NotRequired[str | None],
        "end_time": NotRequired[str | None],
        "total_evaluation_time_seconds": NotRequired[float | None],
        "environment": NotRequired[Environment],
        "dataset": NotRequired[DatasetInfo],
        "model_info": NotRequired[dict[str, Any]],  # model provenance: id, revision, weights sha, dtype, device
        "preflight": NotRequired[dict[str, Any]],  # the high-tier check before the run, or why it was skipped
        "skipped_items": NotRequired[list[dict[str, str]]],  # items that cannot be asked: id, where, reason
        "sample_files": NotRequired[dict[str, str]],  # config -> its samples file (names mapped to safe ones)
    },
)

# Keys that change on every run although the evaluation did not: a rerun differing only here writes nothing.
VOLATILE_KEYS = ("date", "start_time", "end_time", "total_evaluation_time_seconds", "environment")

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema (the subset json_schema_errors checks) of a TypedDict or type hint: one source of truth."""
    if is_typeddict(tp):
        hints = get_type_hints(tp)
        props = {k: json_schema(v) for k, v in hints.items()}
        return {"type": "object", "required": [k for k in hints if k in tp.__required_keys__], "properties": props}
    origin, args = get_origin(tp), get_args(tp)
    if origin in (NotRequired, Required):
        return json_schema(args[0])
    if origin is dict:
        return {"type": "object", "additionalProperties": json_schema(args[1])}
    if origin is list:
        return {"type": "array", "items": json_schema(args[0])}
    if origin in (Union, UnionType):
        simple = [_JSON_TYPES.get(a) for a in args]
        if all(simple):
            return {"type": simple}
        complex_ = [a for a in args if a not in _JSON_TYPES]
        schema = json_schema(complex_[0]) if len(complex_) == 1 else {}
        return {**schema, "type": [schema.get("type"), *filter(None, simple)]} if schema.get("type") else schema
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    return {}  # Any


RESULTS_SCHEMA: dict[str, Any] = json_schema(ResultsJSON)


def json_schema_errors(obj: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    """Check the JSON-schema subset used above (type, required, properties, additionalProperties, items)."""
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
                errors += json_schema_errors(v, sub, f"{where}.{k}")
    if isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for i, v in enumerate(obj):
            errors += json_schema_errors(v, schema["items"], f"{where}[{i}]")
    return errors


def validate_results(obj: Any) -> None:
    """Raise ValueError listing every way obj departs from RESULTS_SCHEMA."""
    errors = json_schema_errors(obj, RESULTS_SCHEMA, "results.json")
    if errors:
        raise ValueError("invalid results.json:\n  " + "\n  ".join(errors))


def versions(generator_version: str | None = None) -> dict[str, str]:
    """Versions stored in results.json."""
    from vocalgrad_dataset.cli.info import package_version

    harness_version = package_version()
    if generator_version is None:
        from vocalgrad_dataset.generate import GENERATOR_VERSION

        generator_version = GENERATOR_VERSION
    return {
        "harness": harness_version,
        "parser": PARSER_VERSION,
        "generator": generator_version,
        "results_schema": RESULTS_SCHEMA_VERSION,
    }


def task_version(generator_version: str | None = None) -> str:
    """A config's version in lm-eval's per-task "versions": what fixes its rows and its scoring (the
    generator that renders the clips and the parser that reads the answers)."""
    v = versions(generator_version)
    return f"{v['generator']}+parser.{v['parser']}"


def error_summary(rows_by_config: Mapping[str, list[Mapping[str, Any]]], max_rate: float,
                  skipped: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """One line counting the error rows and the skipped items (unaskable: results.json `skipped_items`) and
    showing the first, when their share of all items exceeds `max_rate`; else None."""
    rows = [(c, r) for c, rs in rows_by_config.items() for r in rs]
    failed = [(c, r) for c, r in rows if r.get("error")]
    failed += [("skipped", {"benchmark_clip_id": s.get("id"), "error": s.get("reason")}) for s in skipped]
    total = len(rows) + len(skipped)
    if not total or len(failed) / total <= max_rate:
        return None
    config, first = failed[0]
    what = "errors or skipped items" if skipped else "errors"
    return (f"{len(failed)} of {total} rows are {what} ({100 * len(failed) / total:.1f} % > "
            f"{100 * max_rate:g} %); first: {config} {first.get('benchmark_clip_id')}: {first.get('error')}")


def skipped_line(skipped: Sequence[Mapping[str, Any]]) -> str:
    """One line saying how many items were skipped as unaskable and why the first was (results.json lists all)."""
    first = skipped[0]
    return (f"skipped {len(skipped)} item(s) that cannot be asked (first: {first.get('id')}: {first.get('reason')}); "
            "results.json skipped_items lists each with its reason")


def task_metrics(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Config -> MetricSummary of a results.json (schema 4's "metrics"; schema 3 kept them in "results")."""
    return dict(results["metrics"] if "metrics" in results else results["results"])


def group_metrics(results: Mapping[str, Any], name: str = "vocalgrad") -> dict[str, Any]:
    """A group's summary in a results.json (schema 4's "group_metrics"; schema 3's "groups"): the headline
    VocalGrad mean by default, or a kind's own group (multiple choice, lexical conflict; {} when the run has none)."""
    groups = results.get("group_metrics") or results["groups"]
    return dict(groups["vocalgrad"] if name == "vocalgrad" else groups.get(name) or {})


def component_versions(results: Mapping[str, Any]) -> dict[str, str]:
    """harness / parser / generator / results_schema versions of a results.json (any schema)."""
    return dict(results.get("vocalgrad_versions") or results["versions"])


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


def _same_run(old: Any, new: Mapping[str, Any]) -> bool:
    """True when two results differ only in VOLATILE_KEYS (a rerun that evaluated nothing new)."""
    if not isinstance(old, dict):
        return False
    strip = dict.fromkeys(VOLATILE_KEYS)
    return {**old, **strip} == {**new, **strip}


def history_name(date: str) -> str:
    """The timestamped file of one run: results_2026-12-01T11-04-07+00-00.json (lm-eval names them alike)."""
    return "results_" + re.sub(r"[^0-9A-Za-z.+-]", "-", date) + ".json"


def write_results(path: str | Path, results: Mapping[str, Any]) -> bool:
    """Validate and atomically write results.json plus its timestamped copy (the run's history entry).

    A rerun whose results differ from the latest only in VOLATILE_KEYS writes nothing. Returns True when
    the files were (re)written.
    """
    obj = without_url_credentials(_jsonable(dict(results)))  # a base_url's user:password or ?sig= stays out
    validate_results(obj)
    path = Path(path)
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            old = None
        if _same_run(old, obj):
            return False
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    stamped = path.with_name(history_name(str(obj["date"])))
    i = 1
    while stamped.exists():  # two runs within one second keep both entries
        i += 1
        stamped = path.with_name(history_name(f"{obj['date']}-{i}"))
    atomic_write_text(stamped, text)
    atomic_write_text(path, text)
    return True


def read_results(run_dir: str | Path, hint: str = "run `harness eval` first") -> dict[str, Any]:
    """A run directory's results.json; a one-line error naming it when it is missing (with `hint`) or not JSON."""
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results.json in {run_dir} ({hint})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None


def history(run_dir: str | Path) -> list[Path]:
    """The run's timestamped results files, oldest first."""
    return sorted(Path(run_dir).glob("results_*.json"), key=lambda p: (p.stat().st_mtime_ns, p.name))


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
    return Path(out_dir) / "shards" / f"samples_{safe_component(config)}.rank{rank}.jsonl"


def shard_files(out_dir: str | Path, config: str) -> list[Path]:
    """Every shard of a config, whatever world size wrote it, in rank order."""
    found = []
    shard_dir = Path(out_dir) / "shards"
    if shard_dir.is_dir():
        for p in shard_dir.iterdir():
            m = SHARD_RE.match(p.name)
            if m and m["config"] == safe_component(config):
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
    """The merged samples file of a config (its name mapped by safe_component: a task is outside text)."""
    return Path(out_dir) / samples_name(config)


def samples_name(config: str) -> str:
    """The merged samples file name of a config; results.json records it under "sample_files"."""
    return f"samples_{safe_component(config)}.jsonl"


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

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def n_shot(prompt_variant: str) -> int:
    """Labelled audio examples in each prompt: 4 for the few-shot variant (SPEC §5), else 0."""
    from harness.prompts import FEW_SHOT_AUDIOS

    return FEW_SHOT_AUDIOS - 1 if "few-shot" in str(prompt_variant) else 0


def _git(args: list[str]) -> str | None:
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _cpu_name() -> str:
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_smi_names() -> list[str]:
    """GPU names as nvidia-smi lists them; [] without nvidia-smi (CPU machines) or when it fails."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


ENV_PACKAGES = ("torch", "transformers", "datasets", "accelerate", "numpy", "peft", "librosa", "soundfile")


def environment() -> Environment:
    """This project's git commit, library versions, CPU and GPU models (lm-eval's pretty_env_info, as data)."""
    import platform
    import sys
    from importlib.metadata import PackageNotFoundError, version

    packages: dict[str, str | None] = {}
    for name in ENV_PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    gpu: list[str] = []
    torch = sys.modules.get("torch")  # only if already loaded: a report must not import torch for this
    if torch is not None and torch.cuda.is_available():
        gpu = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    elif torch is None:  # a run that never loaded torch (baselines, API models) still names the machine's GPUs
        gpu = _nvidia_smi_names()
    git_hash = _git(["rev-parse", "HEAD"])
    dirty = _git(["status", "--porcelain", "--untracked-files=no"]) if git_hash else None
    return {
        "git_hash": git_hash or None,
        "git_dirty": None if dirty is None else bool(dirty),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "gpu": gpu,
        "packages": packages,
    }


# Files a dataset folder may carry that fix its content; the first one found is hashed.
MANIFEST_FILES = ("manifest.json", "MANIFEST.json", "manifest.tsv", "manifest.csv", "build.json")


def dataset_info(source: Any) -> DatasetInfo:
    """The data a run read, with the sha256 of its build manifest when the source has one."""
    import hashlib

    description = str(getattr(source, "description", source))
    digest = getattr(source, "manifest_sha256", None)
    manifest: str | None = None
    root = getattr(source, "path", None)
    if digest is None and root is not None:
        for name in MANIFEST_FILES:
            file = Path(root) / name
            if file.is_file():
                manifest, digest = str(file), hashlib.sha256(file.read_bytes()).hexdigest()
                break
    return {"source": description, "manifest": manifest, "manifest_sha256": digest}


def kind_groups(rows_by_config: Mapping[str, Any], kinds: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], Any]]:
    """Group name -> (macro summary, kind) for the kinds with a group of their own (MCQ: acc, ala, ala_gap over
    its tasks; conflict: the congruence metrics); reversed controls make a second group of their own."""
    from harness.kinds.base import config_group

    own = {c: config_group(kinds[c], c) for c in rows_by_config if kinds[c].group_metrics is not None}
    out: dict[str, tuple[dict[str, Any], Any]] = {}
    for name in dict.fromkeys(own.values()):
        members = {c: rows for c, rows in rows_by_config.items() if own.get(c) == name}
        kind = next(kinds[c] for c in members)
        out[name] = (kind.group_metrics(members), kind)
    return out


def build_results(
    rows_by_config: Mapping[str, list[Mapping[str, Any]]],
    *,
    run_config: Mapping[str, Any],
    task_configs: Mapping[str, Mapping[str, Any]],
    n_original: Mapping[str, int],
    date: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """results.json content from merged samples rows (the runner and `harness report` share it).

    `extra`: the run facts that samples cannot give (timing, environment, dataset, model_info).
    """
    from datetime import datetime, timezone

    from harness.data import CONFIGS
    from harness.kinds import rows_kind
    from harness.metrics import breakdowns, category_mean

    # The headline is the mean over the nine categories; format and variant configs (pitch-ternary,
    # beep-pitch, ...) have their own entries and stay out of it unless the run has nothing else.
    kinds = {c: rows_kind(c, rows) for c, rows in rows_by_config.items()}
    grid_rows = {c: rows for c, rows in rows_by_config.items() if kinds[c].group == "vocalgrad"}
    main = {c: rows for c, rows in grid_rows.items() if c in CONFIGS} or grid_rows
    group = category_mean(main)
    group["complete"] = set(main) == set(CONFIGS)  # the headline needs all nine categories
    n_samples = {
        c: {"original": int(n_original.get(c, len(rows))), "effective": len(rows)} for c, rows in rows_by_config.items()
    }
    variant = str(run_config.get("prompt_variant", "default"))
    metrics = {c: kinds[c].metrics(rows) for c, rows in rows_by_config.items()}
    own = kind_groups(rows_by_config, kinds)
    out = {
        "results": {c: {"alias": c, **lm_eval_keys(m, [*HIGHER_IS_BETTER, *kinds[c].lm_eval_metrics,
                                                       *m.get("per_class_metrics", ())])}  # classify: per label
                    for c, m in metrics.items()},
        "groups": {"vocalgrad": {"alias": "vocalgrad", **lm_eval_keys(group, ("accuracy",))},
                   **{n: {"alias": n, **lm_eval_keys(g, ("accuracy", *k.lm_eval_metrics))} for n, (g, k) in own.items()}},
        "metrics": metrics,
        "group_metrics": {"vocalgrad": group, **{n: g for n, (g, _) in own.items()}},
        "breakdowns": {c: breakdowns(rows) for c, rows in rows_by_config.items()},
        "configs": {c: dict(task_configs.get(c, {})) for c in rows_by_config},
        "versions": dict.fromkeys(rows_by_config, task_version()),
        "vocalgrad_versions": versions(),
        "n-samples": n_samples,
        "n-shot": {c: n_shot(task_configs.get(c, {}).get("prompt_variant", variant)) for c in rows_by_config},
        "higher_is_better": {c: {**HIGHER_IS_BETTER, **kinds[c].lm_eval_metrics} for c in rows_by_config},
        "config": dict(run_config),
        "sample_files": {c: samples_name(c) for c in rows_by_config},
        # the run sampled its clips (--limit); samples missing from a full run make it incomplete, not limited
        "limited": any(bool(task_configs.get(c, {}).get("limited")) for c in rows_by_config)
        or run_config.get("limit") is not None and any(v["effective"] < v["original"] for v in n_samples.values()),
        "incomplete": error_summary(rows_by_config, float(run_config.get("max_error_rate", DEFAULT_MAX_ERROR_RATE)),
                                    (extra or {}).get("skipped_items") or ()),
        "date": date or datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    out.update({k: v for k, v in (extra or {}).items() if k not in out})
    return out
