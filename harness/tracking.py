"""`harness eval --wandb-args project=...,name=...`: the finished run logged to Weights & Biases (optional extra
`wandb`), as lm-evaluation-harness's `--wandb_args` logs one (lm_eval/loggers/wandb_logger.py).

What is logged: the run's config (results.json "config" and "model_info", secrets redacted) as the W&B config;
every numeric "<metric>,none" of results.json "results" and "groups" as `<task>/<metric>` (lm-eval's names, so
the run summary holds them) plus our per-config "metrics" block (counts, CIs) under the same `<task>/` prefix; the
results as lm-eval's table (Tasks, Version, Filter, num_fewshot, Metric, Value, Stderr); and one table of samples
per config (clip, gold, answer, parsed answer, prompt) with the clip's audio for the first `audio_per_config`
rows (default 16; `--wandb-args audio_per_config=0` logs none).

Every `--wandb-args` key but `audio_per_config` goes to `wandb.init` (project, name, entity, group, tags, mode,
dir, ...). Nothing secret is logged: the config is redacted, every logged text is scrubbed of the run's secrets
(harness.redact.run_secrets), W&B's system metadata (which holds the command line) and console capture are
off, and the command line is scrubbed while the W&B run is open. `WANDB_MODE=offline` keeps everything on the
machine.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.models.protocol import MissingDependency
from harness.redact import redact, scrub, scrub_row
from harness.results import LM_EVAL_FILTER, read_jsonl, samples_path

AUDIO_PER_CONFIG = 16
SAMPLE_COLUMNS = ("benchmark_clip_id", "category", "gold", "pred", "raw", "parsed", "error", "prompt")


def parse_wandb_args(text: str) -> dict[str, Any]:
    """lm-eval's "K1=V1,K2=V2" (values read as JSON where they parse, e.g. tags=["a","b"])."""
    from harness.settings import parse_model_arg

    return dict(parse_model_arg(text))


def wandb_args_type(text: str) -> dict[str, Any]:
    """argparse type of --wandb-args: a malformed pair is argparse's one-line error."""
    import argparse

    try:
        return parse_wandb_args(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def require_wandb() -> Any:
    """The wandb module; MissingDependency naming the extra when it is not installed."""
    try:
        import wandb
    except ImportError:
        raise MissingDependency("--wandb-args needs Weights & Biases: pip install -e '.[wandb]'") from None
    return wandb


@contextlib.contextmanager
def scrubbed_argv(secrets: Sequence[str]) -> Iterator[None]:
    """sys.argv without the secrets while the block runs (W&B reads the command line for its records)."""
    saved = list(sys.argv)
    sys.argv[:] = [scrub(a, secrets) for a in saved]
    try:
        yield
    finally:
        sys.argv[:] = saved


def metric_items(results: Mapping[str, Any]) -> dict[str, Any]:
    """`<task>/<metric>` -> value for every numeric "<metric>,none" of results and groups (lm-eval's keys),
    then our per-config metrics block where it adds a name."""
    out: dict[str, Any] = {}
    suffix = f",{LM_EVAL_FILTER}"
    for block in ("results", "groups"):
        for task, entry in (results.get(block) or {}).items():
            out.update({f"{task}/{k.removesuffix(suffix)}": v for k, v in entry.items() if _number(v)})
    for task, entry in (results.get("metrics") or {}).items():
        out.update({f"{task}/{k}": v for k, v in entry.items() if _number(v) and f"{task}/{k}" not in out})
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def results_rows(results: Mapping[str, Any]) -> list[list[Any]]:
    """lm-eval's W&B results table rows: task, version, filter, n-shot, metric, value, stderr."""
    rows = []
    for task, entry in (results.get("results") or {}).items():
        for key, value in entry.items():
            metric, _, filt = key.partition(",")
            if metric == "alias" or metric.endswith("_stderr"):
                continue
            se = entry.get(f"{metric}_stderr,{filt}")
            se_text = "" if se is None else se if isinstance(se, str) else f"{se:.4f}"
            rows.append([task, str((results.get("versions") or {}).get(task)), filt,
                         (results.get("n-shot") or {}).get(task), metric, str(value), se_text])
    return rows


def _audio_by_clip(source: Any, config: str, clip_ids: Iterable[str]) -> dict[str, Any]:
    """clip id -> (array, rate) for the wanted clips, read from the run's row source (only their units)."""
    wanted = set(clip_ids)
    if source is None or not wanted:
        return {}
    units = [u for u in source.units(config) if wanted.intersection(u.clip_ids)]
    return {r["benchmark_clip_id"]: (r["audio"]["array"], r["audio"]["sampling_rate"])
            for r in source.rows(config, units) if r["benchmark_clip_id"] in wanted}


def samples_table(wandb: Any, rows: Sequence[Mapping[str, Any]], audio: Mapping[str, Any],
                  secrets: Sequence[str]) -> Any:
    """One W&B table of a config's samples, the clip's audio where it was read."""
    table = wandb.Table(columns=[*SAMPLE_COLUMNS, "audio"])
    for row in rows:
        clean = scrub_row({k: row.get(k) for k in SAMPLE_COLUMNS}, secrets)
        clip = audio.get(row["benchmark_clip_id"])
        table.add_data(*clean.values(), wandb.Audio(clip[0], sample_rate=clip[1]) if clip else None)
    return table


def log_run(results: Mapping[str, Any], out_dir: str | Path, wandb_args: Mapping[str, Any], *, source: Any = None,
            secrets: Sequence[str] = ()) -> None:
    """Log a finished run (results.json content and its samples files in `out_dir`) to W&B; see the module."""
    wandb = require_wandb()
    args = dict(wandb_args)
    per_config = int(args.pop("audio_per_config", AUDIO_PER_CONFIG))
    config = scrub_row({"config": redact(results.get("config") or {}), "model_info": results.get("model_info")},
                       secrets)
    settings = wandb.Settings(x_disable_meta=True, console="off", save_code=False, disable_git=True)
    with scrubbed_argv(secrets):
        run = wandb.init(**{"job_type": "eval", **args}, config=config, settings=settings)
        try:
            run.log(metric_items(results))
            run.log({"evaluation/eval_results": wandb.Table(
                columns=["Tasks", "Version", "Filter", "num_fewshot", "Metric", "Value", "Stderr"],
                data=results_rows(results))})
            for task in results.get("results") or {}:
                rows = read_jsonl(samples_path(out_dir, task))
                audio = _audio_by_clip(source, task, [r["benchmark_clip_id"] for r in rows[:per_config]])
                run.log({f"samples/{task}": samples_table(wandb, rows, audio, secrets)})
        finally:
            run.finish()
