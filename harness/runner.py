"""The evaluation loop: data-parallel sharding by source clip, batching, retry, resume, merge.

Every rank (accelerate process) reads the clips already present in ANY shard file of the run, then —
after a barrier, so no rank sees another's new rows — takes a deterministic, length-balanced slice of
the remaining source clips and appends one line per clip to its own shard. After a second barrier
rank 0 merges the shards by clip id into `samples_<config>.jsonl` in dataset order. No collective
carries rows: the file system is the channel, which is also what makes resume free.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from harness import results as res
from harness.data import CONFIGS, RowSource, SourceUnit
from harness.item import Item, error_text, sample_row
from harness.kinds import Kind, row_kind, source_kind
from harness.lock import RunLock
from harness.models.protocol import AudioLM
from harness.models.registry import check_capabilities, check_protocol, load_model
from harness.parsing import PARSER_VERSION
from harness.preflight import needs_preflight, run_preflight
from harness.prompts import Variant, build_prompt, get_variant, prepare_variant, row_vocabulary
from harness.redact import public, redact, run_secrets, scrub_row, scrubbed_logging, without_url_credentials
from harness.results import SampleRow
from harness.sampling import check_limit, limited_count, stratified_ids
from harness.settings import (
    AUTO_BATCH_START,
    MODES,
    ModelSettings,
    RowSettings,
    add_model_arguments,
    add_row_arguments,
    configs_type,
    limit_type,
    settings_from_args,
)
from harness.tracking import wandb_args_type
from vocalgrad_dataset import grid
from vocalgrad_dataset.cli.argtypes import nonnegative_int, positive_int, share
from vocalgrad_dataset.progress import progress
from vocalgrad_dataset.tasks import published_name, resolve

# A rank that finishes its slice waits at the barrier for the slowest one; the default collective
# timeouts (10-30 min) would kill long runs. If a rank crashes, the launcher tears the group down.
BARRIER_TIMEOUT = timedelta(hours=12)
log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(kw_only=True)
class EvalSettings(ModelSettings, RowSettings):
    """Everything that defines a run (recorded in results.json "config"): the model and row source of the
    shared settings layer, plus what is asked and how answers are read."""

    model: str = field(kw_only=False)
    configs: list[str] = field(kw_only=False)
    out: str = field(kw_only=False)
    mode: str = "generate"
    prompt: str = "default"
    limit: int | float | None = None  # N clips or a fraction of each config: a stratified sample
    seed: int = 1234  # the --limit sample, the random baseline and models that sample answers
    max_new_tokens: int = 128  # SPEC §5 published budget
    retry_max_new_tokens: int = 256  # one retry when the first answer is unparsed
    data_workers: int = 0  # processes generating/decoding rows ahead of the model (0: in this process)
    frontend_workers: int = 1  # threads preparing prompts and model inputs ahead of the model (0: serial)
    preflight: bool = True  # ask a few high-tier clips first; stop when most answers are unusable
    max_error_rate: float = res.DEFAULT_MAX_ERROR_RATE  # more error rows than this share: incomplete, exit non-zero
    wandb_args: dict[str, Any] | None = None  # --wandb-args: log the finished run to W&B (harness.tracking)


class Dist:
    """The few things the runner needs from accelerate (a single process when not launched)."""

    def __init__(self) -> None:
        import torch
        from accelerate import PartialState

        launched = int(os.environ.get("WORLD_SIZE", "1"))
        # `accelerate launch --multi_gpu` on a machine without CUDA starts N processes but, unless told
        # cpu=True, accelerate gives each a world of one: they would all write rank 0. Use gloo instead.
        self._state = PartialState(cpu=launched > 1 and not torch.cuda.is_available(), timeout=BARRIER_TIMEOUT)
        self.rank = self._state.process_index
        self.world_size = self._state.num_processes
        self.device = str(self._state.device)
        if self.world_size != launched:
            raise RuntimeError(
                f"launched as {launched} processes but accelerate formed a group of {self.world_size}; "
                "check the launcher's backend settings"
            )

    def barrier(self) -> None:
        self._state.wait_for_everyone()

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def assign_units(units: Sequence[SourceUnit], world_size: int) -> list[list[int]]:
    """Unit indices per rank: longest first to the least-loaded rank (ties: lower rank), then sorted."""
    loads = [0.0] * world_size
    slices: list[list[int]] = [[] for _ in range(world_size)]
    for i in sorted(range(len(units)), key=lambda i: (-units[i].duration_sec, i)):
        r = min(range(world_size), key=lambda r: (loads[r], r))
        loads[r] += units[i].duration_sec
        slices[r].append(i)
    return [sorted(s) for s in slices]


def limit_units(units: Sequence[SourceUnit], limit: int | float | None, seed: int = 1234) -> list[SourceUnit]:
    """The units cut to a stratified sample of `limit` clips (a count or a fraction; harness.sampling)."""
    n = sum(len(u.clip_ids) for u in units)
    k = limited_count(n, limit)
    if k >= n:
        return list(units)
    keep = stratified_ids([(u.key, u.clip_ids) for u in units], k, seed)
    out = []
    for u in units:
        ids = tuple(cid for cid in u.clip_ids if cid in keep)
        if ids:
            out.append(SourceUnit(u.key, u.duration_sec * len(ids) / len(u.clip_ids), ids))
    return out


def runner_batch_size(settings: EvalSettings, model: AudioLM) -> int:
    """Rows per model call: the number asked for, or for "auto" the start the model's OOM back-off halves."""
    if settings.batch_size != "auto":
        return int(settings.batch_size)
    model.auto_batch(AUTO_BATCH_START)  # again for a model passed in ready-made or reused across runs
    return AUTO_BATCH_START


def apply_seed(model: AudioLM, settings: EvalSettings) -> None:
    """Seed Python, NumPy and torch, and hand the seed to the model (unless --model-arg seed pins its own)."""
    import random
    import sys

    random.seed(settings.seed)
    np.random.seed(settings.seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(settings.seed)
    if "seed" not in settings.model_args:
        model.set_seed(settings.seed)


def _base_row(item: Item, variant: Variant, settings: EvalSettings) -> SampleRow:
    """A samples row's fixed fields, in the file's key order (the answer fields are filled from the item)."""
    row, vocab = item.row, item.vocab
    assert vocab is not None  # prepare() sets it, also for a row whose prompt failed
    return {
        "benchmark_clip_id": row["benchmark_clip_id"],
        "category": row["category"],
        "gold": row["label"],
        "pred": None,
        "raw": None,
        "parsed": False,
        "margin": None,
        "prompt": item.prompt.text if item.prompt is not None else "",
        "prompt_variant": variant.name,
        "answer_words": list(vocab.choices),
        "parser": vocab.parser.id,
        **{k: row.get(k) for k in row_kind(row).sample_fields},  # the kind's breakdown and scoring keys
        "error": None,
        "retried": False,
        "model": settings.model,
        "mode": settings.mode,
    }


def prepare(item: Item | dict[str, Any], variant: Variant) -> Item:
    """The item of a row with its prompt and vocabulary built (a row process may have done it); never raises
    for a bad row: its error is kept and it is not sent to the model."""
    item = item if isinstance(item, Item) else Item(item)
    if not item.prepared:
        try:
            item.prompt, item.vocab = build_prompt(item.row, variant)
        except Exception as err:
            item.error, item.vocab = error_text(err), row_vocabulary(item.row, variant)
    return item


def prepare_batch(model: AudioLM, rows: Sequence[Item | dict[str, Any]], variant: Variant,
                  settings: EvalSettings) -> list[Item]:
    """The CPU front end of one batch (template, then the model's own CPU work: resampling, features), which
    the runner runs in a background thread ahead of the model; never raises for a bad row."""
    items = [prepare(r, variant) for r in rows]
    live = [it for it in items if it.live]
    if live:
        try:
            for it, prompt in zip(live, model.prepare_prompts([it.prompt for it in live]), strict=True):
                it.prompt = prompt
        except Exception as err:  # noqa: BLE001 - the model call then meets (and isolates) the failure itself
            log.debug("prepare_prompts failed (%r); the model call prepares the batch", err)
    return items


def evaluate_batch(model: AudioLM, rows: Sequence[Item | dict[str, Any]], variant: Variant,
                   settings: EvalSettings, prepared: list[Item] | None = None) -> list[SampleRow]:
    """Samples rows for one batch of benchmark rows (never raises for model errors); `prepared`: the batch's
    front end already run (prepare_batch), else it runs here."""
    items = prepared or prepare_batch(model, rows, variant, settings)
    # The model's *_items calls isolate failures per item (AudioLM contract): one bad clip, one error row.
    if settings.mode == "choices":
        score_items(model, [it for it in items if it.live])
    else:
        generate_items(model, [it for it in items if it.live], settings)
    return [sample_row(it, _base_row(it, variant, settings)) for it in items]


def score_items(model: AudioLM, items: list[Item]) -> None:
    """One scoring call per answer vocabulary (a config's words, or the letters of items with as many options)."""
    for choices in dict.fromkeys(it.vocab.choices for it in items if it.vocab is not None):
        part = [it for it in items if it.vocab is not None and it.vocab.choices == choices]
        for it, scores in zip(part, model.score_items([it.prompt for it in part], choices), strict=True):
            it.responses.append(scores)


def generate_items(model: AudioLM, items: list[Item], settings: EvalSettings) -> None:
    """Generate an answer per item, and once more with the larger budget for those left unparsed."""
    for it, text in zip(items, model.generate_items([it.prompt for it in items], max_new_tokens=settings.max_new_tokens),
                        strict=True):
        it.responses.append(text)
    retry = [it for it in items if it.live and it.unparsed]
    if retry and settings.retry_max_new_tokens:
        again = model.generate_items([it.prompt for it in retry], max_new_tokens=settings.retry_max_new_tokens)
        for it, text in zip(retry, again, strict=True):
            it.responses.append(text)


class RowFrontEnd:
    """The per-row front end row processes (RowPool) run (picklable): the prompt, then the model's per-clip CPU
    work (clip_front_end: resampling, per-clip features), as a prepared Item. A row it fails on comes back
    unprepared, so the main process builds it again and records the error as the serial path does."""

    def __init__(self, variant: Variant, clip_front_end: Any) -> None:
        # by name: variants hold lambdas, which do not pickle; every variant but few-shot resolves from its name
        self.variant, self.clip_front_end = variant.name, clip_front_end

    def __call__(self, row: dict[str, Any]) -> Item:
        try:
            prompt, vocab = build_prompt(row, get_variant(self.variant))
            if self.clip_front_end is not None:
                prompt = self.clip_front_end(prompt)
        except Exception:  # noqa: BLE001 - rebuilt (and turned into an error row) in the main process
            return Item(row)
        return Item(row, prompt, vocab)


def row_front_end(model: AudioLM, variant: Variant) -> RowFrontEnd | None:
    """What row processes may run ahead for this model and variant; None where it cannot travel to
    another process (few-shot variants carry their train pool)."""
    if variant.base == "few-shot":
        return None
    return RowFrontEnd(variant, model.clip_front_end())


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for it in items:
        batch.append(it)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _my_units(units: Sequence[SourceUnit], done: set[str], dist: Dist) -> list[SourceUnit]:
    """This rank's share of the units' clips not yet done."""
    pending = [
        SourceUnit(u.key, u.duration_sec * len(left) / len(u.clip_ids), tuple(left))
        for u in units
        if (left := [cid for cid in u.clip_ids if cid not in done])
    ]  # weighted by what is left, so a resumed run is balanced too
    return [pending[i] for i in assign_units(pending, dist.world_size)[dist.rank]]


def expected_units(source: RowSource, config: str, settings: EvalSettings, dist: Dist) -> list[SourceUnit]:
    """What run_config will most likely ask for on this rank (a hint for the row pool: read-only, no
    barrier; if the shards change before run_config reads them, the pool's guess is dropped)."""
    units = limit_units(source.units(config), settings.limit, settings.seed)
    return _my_units(units, set(res.read_shards(Path(settings.out), config)), dist)


def run_config(model: AudioLM, source: RowSource, config: str, settings: EvalSettings, dist: Dist,
               variant: Variant, batch_size: int | None = None, pool: Any = None,
               then: Sequence[Any] = ()) -> dict[str, Any]:
    """Evaluate one config on this rank, then (rank 0) merge the shards. Returns the task settings. `pool`:
    the run's RowPool (rows built by its processes); `then`: its tasks for the next config, started ahead."""
    out_dir = Path(settings.out)
    batch_size = batch_size or runner_batch_size(settings, model)
    all_units = source.units(config)
    units = limit_units(all_units, settings.limit, settings.seed)
    order = [cid for u in units for cid in u.clip_ids]
    done_rows = res.read_shards(out_dir, config)
    _check_resumable(done_rows.values(), settings, variant, out_dir)
    done = set(done_rows)
    dist.barrier()  # everyone has read the shards before anyone appends
    mine = _my_units(units, done, dist)
    todo = {cid for u in mine for cid in u.clip_ids}
    if todo:
        bar = progress(total=len(todo), desc=f"[rank {dist.rank}] {config}", unit="clip", position=dist.rank,
                   dynamic_ncols=True, leave=True)
        # the bar closes (ending its line) also when an error propagates, so the message starts a line
        with bar, res.ShardWriter(res.shard_path(out_dir, config, dist.rank)) as writer:
            from harness.prefetch import run_ahead

            if pool is not None:  # the run's row processes, in the tasks' (the serial path's) order
                produced = pool.rows(source, pool.tasks(config, mine), row_front_end(model, variant), then)
            else:
                produced = source.rows(config, mine)
            rows = (r for r in produced if (r.row if isinstance(r, Item) else r)["benchmark_clip_id"] in todo)
            secrets = run_secrets(settings.model_args)  # also keys read from the environment
            # The next batches' front end runs in a thread while the model answers this one (same order).
            ahead = run_ahead(_batches(rows, batch_size), lambda b: prepare_batch(model, b, variant, settings),
                              settings.frontend_workers)
            for batch, prepared in ahead:
                samples = evaluate_batch(model, batch, variant, settings, prepared)
                writer.write_batch([scrub_row(r, secrets) for r in samples])
                bar.update(len(batch))
    dist.barrier()  # every shard is complete before the merge
    if dist.is_main:
        full = {cid: i for i, cid in enumerate(cid for u in all_units for cid in u.clip_ids)}
        merge_config(out_dir, config, order, doc_ids=full,
                     budgets=(settings.max_new_tokens, settings.retry_max_new_tokens))
    dist.barrier()
    kind = source_kind(source, config)
    vocab = None if kind.prompt is not None else variant.vocabulary(config)
    return {
        "task": config,
        "kind": kind.name,
        "published_category": published_name(config) if kind.group == "vocalgrad" else config,
        "split": settings.split,
        "source": getattr(source, "config_description", lambda _c: source.description)(config),
        "prompt_variant": variant.name,
        "parser": vocab.parser.id if vocab is not None else kind.parser_id,
        "answer_words": list(vocab.choices) if vocab is not None else [],  # MCQ: each item's letters
        "n_expected": len(order),
        "n_original": sum(len(u.clip_ids) for u in all_units),
        "limited": len(order) < sum(len(u.clip_ids) for u in all_units),
        "ids_sha256": grid.ids_sha256(order),
    }


def run_configs(names: Sequence[str], source: RowSource) -> list[str]:
    """Canonical config names; a source that names its own configs (mapped MCQ tasks) resolves them itself,
    and the default (the nine categories) then stands for all of its tasks."""
    named = getattr(source, "config_names", None)
    if named is not None:
        return named(None if list(names) == list(CONFIGS) else names)
    return [resolve(c) for c in names]


def check_variant(variant: Variant, config: str, kind: Kind) -> None:
    """Refuse a prompt variant that does not fit a config's kind."""
    if kind.prompt is not None:
        kind.accepts(variant.name, config)
    else:
        variant.vocabulary(config)


def check_answers(model: AudioLM, configs: Sequence[str], source: RowSource) -> None:
    """Refuse, before any row, a baseline that only answers the VocalGrad grid's words (always-increase,
    signal-oracle: `grid_only`) on a config whose items bring their own options (multiple choice,
    classification), where every row would fail alike."""
    if not getattr(model, "grid_only", False):
        return
    for c in configs:
        kind = source_kind(source, c)
        if kind.prompt is not None:
            raise ValueError(f"model {model.name!r} answers only the VocalGrad grid (increase/decrease, yes/no); "
                             f"{c!r} is a {kind.name} task whose items bring their own options: use random, "
                             "mcq-signal-oracle (VoxParadox-lite) or a real model")


RUN_SETTINGS = "run_settings.json"  # the resume key of a run directory, written by its first run


def _where(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else None


def resume_key(settings: EvalSettings, variant: Variant, source: RowSource) -> dict[str, Any]:
    """Every setting that can change an answer; a run directory only resumes under the same key.

    Left out on purpose: batch size, processes, data and front-end workers and --limit (which clips, not their answers),
    and secret model args (a rotated API key changes no answer and must not reach the file).
    """
    kind, _, where = source.description.partition(":")
    generated = kind == "generate"
    if generated:
        from vocalgrad_dataset.generate import GENERATOR_VERSION
    return without_url_credentials({  # a URL's user:password or ?sig= changes no answer and stays off the disk
        "model": settings.model,
        "model_args": public(settings.model_kwargs()),  # --adapter / --dtype count like their --model-arg
        "mode": settings.mode,
        "prompt_variant": variant.name,
        "max_new_tokens": settings.max_new_tokens if settings.mode == "generate" else None,
        "retry_max_new_tokens": settings.retry_max_new_tokens if settings.mode == "generate" else None,
        "parser_version": PARSER_VERSION,
        "split": settings.split,
        "source": source.description if generated else f"{kind}:{_where(where)}",
        "data_dir": _where(settings.data_dir) if generated else None,
        "generator_version": GENERATOR_VERSION if generated else None,
        "seed": settings.seed,  # the random baseline's and sampling models' answers
        "kind": settings.kind,  # a mapped dataset: the kind it is read as, and which columns hold its fields
        "columns": settings.columns,
        # the bytes of a mapped file: corrected answers or added items make another run, never a silent resume
        "data_fingerprint": getattr(source, "fingerprint", None),
    })


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    """'name: X before, Y now' for every leaf where two resume keys differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new), key=str)
                for d in _differences(old.get(k), new.get(k), f"{where}.{k}" if where else str(k))]
    return [] if old == new else [f"{where or 'settings'}: {json.dumps(old)} before, {json.dumps(new)} now"]


def check_resume_key(out_dir: Path, key: dict[str, Any]) -> bool:
    """Refuse (naming each differing setting) when `out_dir` was evaluated under another key.

    Returns True when the directory has no key recorded yet (a new run, or one from before keys existed), or
    one that no answer was stored under (the key is then written anew).
    """
    path = out_dir / RUN_SETTINGS
    if not path.is_file():
        return True
    try:
        old = json.loads(path.read_text(encoding="utf-8"))["resume_key"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise ValueError(f"{path}: corrupt run settings record; delete it only if you know every row in "
                         f"{out_dir} came from this command") from None
    diff = _differences(old, json.loads(json.dumps(key, default=str)))
    if diff and not _holds_answers(out_dir):  # e.g. a first run that failed on a wrong --source: nothing to keep
        return True
    if diff:
        raise ValueError(f"{out_dir} holds answers made with other settings, so it cannot be resumed with these "
                         f"({'; '.join(diff)}); use another --out")
    return False


def _holds_answers(out_dir: Path) -> bool:
    """Whether any shard or merged samples file of the directory holds a byte (an answer to protect)."""
    files = [*(out_dir / "shards").glob("samples_*.jsonl"), *out_dir.glob("samples_*.jsonl")]
    return any(f.stat().st_size for f in files if f.is_file())


def _check_resumable(rows: Iterable[dict[str, Any]], settings: EvalSettings, variant: Variant,
                     out_dir: Path) -> None:
    """Refuse to resume a directory whose rows came from another model, mode or prompt (SPEC §8)."""
    want = (settings.model, settings.mode, variant.name)
    for r in rows:
        got = (r.get("model"), r.get("mode"), r.get("prompt_variant"))
        if got != want:
            raise ValueError(
                f"{out_dir} holds rows of model/mode/prompt {got}, not {want}; use another --out"
            )


def merge_config(out_dir: str | Path, config: str, order: Sequence[str], *, doc_ids: Mapping[str, int] | None = None,
                 budgets: tuple[int, int] = (128, 256)) -> Path:
    """Write samples_<config>.jsonl: the shard rows in dataset order (unchanged bytes if nothing new), each with
    lm-eval's per-sample keys (harness.lm_eval_samples; `doc_ids`: each clip's index in the config's full order,
    default its place in `order`; `budgets`: the run's first and retry token budgets)."""
    from harness.lm_eval_samples import with_lm_eval_fields

    rows = res.read_shards(out_dir, config)
    missing = [cid for cid in order if cid not in rows]
    if missing:
        raise RuntimeError(f"{config}: {len(missing)} clips missing from the shards (first: {missing[0]})")
    path = res.samples_path(out_dir, config)
    ids = doc_ids if doc_ids is not None else {cid: i for i, cid in enumerate(order)}
    text = "".join(res.dumps_row(with_lm_eval_fields(rows[cid], ids[cid], budgets)) + "\n" for cid in order)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        res.atomic_write_text(path, text)
    return path


def run_eval(settings: EvalSettings, model: AudioLM | None = None, source: RowSource | None = None,
             dist: Dist | None = None, pool: Any = None) -> dict[str, Any] | None:
    """Run (or resume) an evaluation; rank 0 writes results.json and returns its content. With
    --data-workers N, rows come from a RowPool of N processes started here, before the model loads (or
    from `pool`, one the caller started and closes)."""
    if pool is None and settings.data_workers > 0:
        from harness.prefetch import RowPool

        with RowPool(settings.data_workers) as own:
            return run_eval(settings, model, source, dist, own)
    dist = dist or Dist()
    variant = get_variant(settings.prompt)
    source = source or settings.open_rows(settings.configs)  # no --source: the configs' own (claims, beep)
    configs = run_configs(settings.configs, source)
    for c in configs:
        check_variant(variant, c, source_kind(source, c))  # fail now, not after hours
    check_limit(settings.limit)
    if settings.wandb_args is not None:  # fail before the run, not after it
        from harness.tracking import require_wandb

        require_wandb()
    if settings.batch_size != "auto" and (not isinstance(settings.batch_size, int) or settings.batch_size < 1):
        raise ValueError(f"batch size must be a number >= 1 or 'auto', got {settings.batch_size!r}")
    out_dir = Path(settings.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Locked before the model loads (a refused rerun fails in seconds) and before any shard is read (a live
    # earlier run's pending clips would be evaluated twice); held until results.json is written.
    with RunLock(out_dir, dist), scrubbed_logging(run_secrets(settings.model_args)):
        key = resume_key(settings, variant, source)
        new = check_resume_key(out_dir, key)  # a mismatching directory fails before minutes of model loading
        if settings.mode not in MODES:
            raise ValueError(f"unknown mode {settings.mode!r}; expected one of {MODES}")
        if model is None:
            model = load_model(settings)  # checks the protocol itself
        else:
            check_protocol(model, settings.model)
        check_capabilities(model, ["choices"] if settings.mode == "choices" else [])
        check_answers(model, configs, source)
        variant = prepare_variant(variant, settings, model)  # few-shot: multi-audio check, train examples
        apply_seed(model, settings)
        batch_size = runner_batch_size(settings, model)
        resumed = any(f.stat().st_size for c in configs for f in res.shard_files(out_dir, c))  # no parse needed
        skip = needs_preflight(model, settings, resumed=resumed)
        secrets = run_secrets(settings.model_args)  # an answer echoing a key reaches no message or record
        checked = {"skipped": skip} if skip else run_preflight(
            lambda rows: [scrub_row(r, secrets) for r in evaluate_batch(model, rows, variant, settings)], source,
            configs[0]).record()
        dist.barrier()  # every rank has read the record before rank 0 writes it
        if new and dist.is_main:  # only once the model is up and answers: a failed start leaves the directory reusable
            res.atomic_write_text(out_dir / RUN_SETTINGS, json.dumps({"resume_key": key}, indent=1) + "\n")
        start = time.time()
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        tasks = {}
        for i, c in enumerate(configs):
            nxt = configs[i + 1] if i + 1 < len(configs) else None
            then = pool.tasks(nxt, expected_units(source, nxt, settings, dist)) if pool and nxt else ()
            tasks[c] = run_config(model, source, c, settings, dist, variant, batch_size, pool, then)
        if not dist.is_main:
            return None
        return _write_results(settings, source, variant, dist, out_dir, tasks, start,
                              model=model, batch_size=batch_size, started=started, preflight=checked)


def _write_results(settings: EvalSettings, source: RowSource, variant: Variant, dist: Dist, out_dir: Path,
                   tasks: dict[str, dict[str, Any]], start: float, *, model: AudioLM, batch_size: int,
                   started: str, preflight: dict[str, Any]) -> dict[str, Any]:
    """results.json from the merged samples (rank 0)."""
    rows = {c: res.read_jsonl(res.samples_path(out_dir, c)) for c in tasks}
    run_config_ = {
        "model": settings.model,
        "model_args": redact(settings.model_kwargs()),  # secrets never reach a file
        "mode": settings.mode,
        "prompt_variant": variant.name,
        "split": settings.split,
        "source": run_source(source, list(tasks)),
        "batch_size": settings.batch_size,
        # lm-eval's record of what "auto" found: the size the model's OOM back-off ended at
        "batch_sizes": [int(model.batch_size) if settings.batch_size == "auto" else batch_size],
        "num_processes": dist.world_size,
        "max_new_tokens": settings.max_new_tokens,
        "retry_max_new_tokens": settings.retry_max_new_tokens,
        "limit": settings.limit,
        "seed": settings.seed,
        "max_error_rate": settings.max_error_rate,
    }
    extra = {
        "start_time": started,
        "end_time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "total_evaluation_time_seconds": round(time.time() - start, 3),
        "environment": res.environment(),
        "dataset": res.dataset_info(source),
        "model_info": scrub_row(model_info(model, settings), run_secrets(settings.model_args)),
        "preflight": preflight,
        "skipped_items": list(getattr(source, "skipped", [])),  # unaskable items: id and reason, never guessed
    }
    out = res.build_results(rows, run_config=run_config_, task_configs=tasks,
                            n_original={c: t["n_original"] for c, t in tasks.items()}, extra=extra)
    res.write_results(out_dir / "results.json", out)
    print(f"wrote {out_dir / 'results.json'} ({time.time() - start:.1f} s)")
    if extra["skipped_items"]:
        print(res.skipped_line(extra["skipped_items"]))
    if settings.wandb_args is not None:
        from harness.tracking import log_run

        log_run(out, out_dir, settings.wandb_args, source=source, secrets=run_secrets(settings.model_args))
    if out["incomplete"]:
        raise RunIncomplete(f"{out_dir}: incomplete run, {out['incomplete']} (--max-error-rate "
                            f"{settings.max_error_rate:g}; results.json marks it incomplete)", out)
    return out


class RunIncomplete(ValueError):
    """A run whose share of error rows exceeds --max-error-rate: written, marked incomplete, exit non-zero."""

    def __init__(self, message: str, results: dict[str, Any]) -> None:
        super().__init__(message)
        self.results = results


def summary_table(results: dict[str, Any]) -> str:
    """The per-config table `harness eval` prints at the end, as lm-eval prints its results table."""
    from harness.tables import interval, markdown_table, pct

    rows = [[c, pct(m["accuracy"]), interval(m), str(m["n"]), str(m["n_unparsed"]), str(m["n_error"])]
            for c, m in res.task_metrics(results).items()]
    group = res.group_metrics(results)
    if len(rows) > 1 and group.get("n_configs"):
        rows.append(["mean of the categories" + ("" if group.get("complete") else " (not all nine)"),
                     pct(group["accuracy"]), interval(group), "", "", ""])
    for name, g in (results.get("group_metrics") or {}).items():  # a kind's own macro (reversed controls apart)
        if name != "vocalgrad" and g.get("accuracy") is not None:
            rows.append([f"macro mean: {name} ({g.get('n_configs')} configs)", pct(g["accuracy"]), interval(g), "", "", ""])
    return markdown_table(["config", "accuracy %", "95% CI", "n", "unparsed", "errors"], rows)


def run_source(source: RowSource, configs: Sequence[str]) -> str:
    """Where the run's rows came from: the configs' sources, each once, in order (a VoxParadox-lite-only
    run says its items, not the generator it never used)."""
    describe = getattr(source, "config_description", None)
    if describe is None:
        return source.description
    return ",".join(dict.fromkeys(describe(c) for c in configs))


def model_info(model: AudioLM, settings: EvalSettings) -> dict[str, Any]:
    """results.json "model_info": the run's model name and the wrapper's provenance (id, revision, weights sha,
    dtype, device)."""
    return {"name": settings.model, **dict(model.provenance())}


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `harness eval` and `accelerate launch harness/eval.py` (fields of EvalSettings)."""
    add_model_arguments(p)
    add_row_arguments(p)
    g = p.add_argument_group("run")
    g.add_argument("--configs", "--tasks", dest="configs", type=configs_type, default=list(CONFIGS),
                   help="comma-separated configs, e.g. volume,noise or pitch-ternary (--tasks: lm-eval's "
                        "spelling; default: all nine)")
    g.add_argument("--out", required=True, help="run directory (resumed if it exists)")
    g.add_argument("--mode", choices=MODES, default="generate",
                   help="generate: the paper's protocol (free answer, parsed); choices: score the answer words "
                        "(default: %(default)s)")
    g.add_argument("--prompt", default="default",
                   help="prompt variant (SPEC §5), e.g. swap_order+audio_ref (default: %(default)s)")
    g.add_argument("--data-workers", type=nonnegative_int, default=0,
                   help="processes that generate/decode rows ahead of the model (default: 0, in this process)")
    g.add_argument("--frontend-workers", type=nonnegative_int, default=1,
                   help="threads that prepare the next batches' CPU front end (template, resampling, features) "
                        "while the model answers the current one; answers are unchanged (default: %(default)s; "
                        "0: all in the model's thread)")
    g.add_argument("--limit", type=limit_type, default=None,
                   help="N clips (or a fraction 0 < f < 1) of each config, a sample stratified over source clip, "
                        "tier, curve and direction; reports and results.json say the run was limited")
    g.add_argument("--seed", type=nonnegative_int, default=1234,
                   help="seed of the --limit sample, the random baseline and models that sample (default: %(default)s)")
    g.add_argument("--no-preflight", dest="preflight", action="store_false",
                   help="skip the check that asks 8 high-tier clips first and stops when most answers are "
                        "unparsed or refusals (the usual sign of a wrong template, adapter or audio input)")
    g.add_argument("--max-error-rate", type=share, default=res.DEFAULT_MAX_ERROR_RATE,
                   help="largest share of error rows (model or input failures) a run may have; above it the run "
                        "is written but marked incomplete and the command exits non-zero (default: %(default)s)")
    g.add_argument("--max-new-tokens", type=positive_int, default=128, help="(default: %(default)s)")
    g.add_argument("--retry-max-new-tokens", type=nonnegative_int, default=256,
                   help="budget of the one retry of an unparsed answer; 0 disables it (default: %(default)s)")
    g.add_argument("--wandb-args", type=wandb_args_type, default=None, metavar="K=V,...",
                   help="log the finished run to Weights & Biases (extra `wandb`), lm-eval's --wandb_args: "
                        "project=...,name=...[,audio_per_config=N] go to wandb.init; WANDB_MODE=offline keeps it local")


def eval_settings_from_args(ns: argparse.Namespace) -> EvalSettings:
    """EvalSettings from parsed `harness eval` arguments."""
    return settings_from_args(EvalSettings, ns)
