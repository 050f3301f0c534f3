"""`harness leaderboard submit RUN_DIR --model-name NAME --out SUB.json`: a submission from a harness run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.data import CONFIGS
from harness.leaderboard.schema import SUBMISSION_SCHEMA_VERSION
from harness.redact import redact, without_url_credentials
from harness.results import dumps_row, read_jsonl, read_results, samples_path, validate_results
from vocalgrad_dataset.fileio import atomic_write_text


def samples_sha256(rows: Sequence[dict[str, Any]]) -> str:
    """sha256 of rows serialised exactly as the harness writes samples JSON lines."""
    return hashlib.sha256("".join(dumps_row(r) + "\n" for r in rows).encode("utf-8")).hexdigest()


def _precision(model_args: dict[str, Any], registry_name: str, model_info: dict[str, Any] | None = None) -> str:
    """The weights dtype a run used: what the loaded model reported (results.json model_info), else the one
    asked for, else what the wrapper picks on its own."""
    if (model_info or {}).get("dtype"):
        return str(model_info["dtype"]).removeprefix("torch.")
    if model_args.get("dtype"):
        return str(model_args["dtype"]).removeprefix("torch.")
    try:
        from harness.models.registry import registry

        kind = registry()[registry_name].kind
    except KeyError:
        return "unknown"
    return {"baseline": "n/a", "api": "n/a (API)"}.get(kind, "auto (bfloat16 on GPU, float32 on CPU)")


def make_submission(run_dir: str | Path, *, model_name: str, params: int | None = None,
                    precision: str | None = None, revision: str | None = None, adapter: str | None = None,
                    notes: str | None = None) -> dict[str, Any]:
    """A submission dict from a run directory (results.json + samples_<config>.jsonl); metadata from the run
    unless given (prompt variant and scoring mode always come from the run itself)."""
    run = Path(run_dir)
    results = read_results(run)
    validate_results(results)
    if not model_name.strip():
        raise ValueError("--model-name must not be empty")
    # A run written before model args were redacted may still hold a key: it must not travel further.
    results["config"]["model_args"] = redact(results["config"].get("model_args") or {})
    cfg = results["config"]
    model_args = cfg["model_args"]
    configs = [c for c in CONFIGS if c in results["results"]] + sorted(set(results["results"]) - set(CONFIGS))
    samples = {}
    for c in configs:
        file = samples_path(run, c)
        if not file.is_file():
            raise FileNotFoundError(f"results.json lists {c} but {file} is missing")
        samples[c] = read_jsonl(file, tolerate_torn_tail=False)
    return {
        "schema_version": SUBMISSION_SCHEMA_VERSION,
        "model": {
            "name": model_name.strip(),
            "registry_name": cfg["model"],
            "params": params,
            "precision": precision or _precision(model_args, cfg["model"], results.get("model_info")),
            "revision": revision or model_args.get("revision"),
            "adapter": adapter or model_args.get("adapter"),
            "prompt_variant": cfg["prompt_variant"],
            "scoring_mode": cfg["mode"],
            "notes": notes,
        },
        "results": without_url_credentials(results),  # a URL's user:password or ?sig= is never published
        "samples": samples,
        "samples_sha256": {c: samples_sha256(rows) for c, rows in samples.items()},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def write_submission(submission: dict[str, Any], path: str | Path) -> Path:
    """Write a submission as compact JSON (atomic)."""
    atomic_write_text(path, json.dumps(submission, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n")
    return Path(path)
