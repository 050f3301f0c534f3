"""How well an adapter does: answer loss and choice accuracy on clips (validation, fit), and after training the
harness evaluation on every eval config's test split, the cross-category matrix and the model card."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from finetune.data import Renderer
from finetune.lora import adapters_disabled
from finetune.objective import AnswerTask, answer_losses, keeps_logits
from finetune.record import write_training_record
from finetune.runtimes import runtime_losses
from finetune.settings import ADAPTER_DIR, EVAL_BASE_DIR, EVAL_DIR, EVAL_ITEMS_DIR, TrainSettings
from harness.data import CONFIGS
from harness.models.pclm import pclm_disabled
from harness.models.protocol import TrainableAudioLM
from harness.settings import derive
from vocalgrad_dataset.tasks import is_vocalgrad

if TYPE_CHECKING:
    from accelerate import Accelerator


@torch.no_grad()
def evaluate_clips(lm: TrainableAudioLM, renderer: Renderer, ids: Sequence[str], prompt: str, *,
                   batch_size: int = 8, end_of_turn: bool = True,
                   accelerator: Accelerator | None = None, kind: str | None = None) -> dict[str, float]:
    """Answer loss and choice accuracy (the harness' `choices` scoring) over clips, shared across processes
    (`kind`: rows of a dataset mapped onto that kind)."""
    task = AnswerTask.of(prompt, renderer.config, kind)
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    mine = list(ids)[rank::world]
    was_training = lm.model.training
    lm.model.eval()
    keep = keeps_logits(lm.model)
    loss_sum, correct = 0.0, 0
    for i in range(0, len(mine), batch_size):
        rows = [renderer.row(cid) for cid in mine[i : i + batch_size]]
        prompts, inputs = task.inputs(lm, rows, end_of_turn=end_of_turn)
        loss_sum += float((runtime_losses(lm) or answer_losses)(lm.model, inputs, keep).sum())
        correct += _correct_choices(lm, task, prompts, rows)
    lm.model.train(was_training)
    totals = torch.tensor([loss_sum, float(correct), float(len(mine))], dtype=torch.float64)
    if accelerator is not None and world > 1:
        totals = accelerator.reduce(totals.to(accelerator.device), reduction="sum").cpu()
    n = float(totals[2])
    return {"n": int(n), "loss": float(totals[0]) / n if n else float("nan"),
            "accuracy": float(totals[1]) / n if n else float("nan")}


def _correct_choices(lm: TrainableAudioLM, task: AnswerTask, prompts: list[Any], rows: list[Any]) -> int:
    """How many rows score their true answer highest among their options (the harness' `choices` scoring):
    one batched call for the VocalGrad vocabulary, one call per row for rows with their own options (MCQ: their
    letters, as the harness scores them)."""
    if task.vocabulary is not None and not any(r.get("options") for r in rows):
        scores = lm.score_choices(prompts, task.vocabulary.choices)
        return sum((s[0] > s[1]) == (r["label"] == "increase") for s, r in zip(scores, rows, strict=True))
    correct = 0
    for p, r in zip(prompts, rows, strict=True):
        opts = task.options(r)
        choices = (opts.answer, *opts.wrong)
        correct += int(lm.score_choices([p], choices)[0].argmax() == 0)
    return correct


def paired_vs_base(out: Path) -> dict[str, dict[str, Any]]:
    """The exact McNemar test of the adapter against the base model per config, paired by clip (harness compare)."""
    from dataclasses import asdict

    from harness.metrics import mcnemar
    from harness.report import load_samples

    base, tuned = load_samples(out / EVAL_BASE_DIR), load_samples(out / EVAL_DIR)
    return {c: asdict(mcnemar(base[c], tuned[c])) for c in tuned if c in base}


def build_eval_items(settings: TrainSettings, out: Path) -> str | None:
    """The test items of multiple-choice item eval configs, built (once; a finished split is kept) into
    OUT/eval_items by the dataset's own builder, as `vocalgrad-dataset build` would: the whole split, checked
    against its frozen ids and hashes, or with --eval-limit N its first N items in build order (a seeded
    shuffle, so a random sample, built without the rest). None for the generator's configs, which the
    harness generates itself."""
    configs = settings.eval_configs or []
    if settings.kind or all(is_vocalgrad(c) for c in configs):  # a mapped --dataset has its own test split
        return None
    from vocalgrad_dataset.voxparadox.export import build_voxparadox

    for config in configs:
        build_voxparadox(config, ["test"], out / EVAL_ITEMS_DIR, limit=settings.eval_limit)
    return str(out / EVAL_ITEMS_DIR)


def _harness_run(settings: TrainSettings, lm: TrainableAudioLM, out: Path, dir_name: str,
                 adapter: str | None, dataset: str | None) -> None:
    from harness.runner import EvalSettings, run_eval

    # built items are already the --eval-limit sample; the generator's configs are sampled by the harness
    where = ({"dataset": dataset, "source": None, "data_dir": None, "limit": None} if dataset is not None else
             {"source": settings.eval_source or settings.source, "data_dir": settings.eval_data_dir or settings.data_dir,
              "limit": settings.eval_limit})
    if settings.kind:  # the mapped --dataset's test split, read by the same mapping
        where = {"dataset": settings.dataset, "kind": settings.kind, "columns": settings.columns, "source": None,
                 "data_dir": None, "limit": settings.eval_limit}
    run_eval(derive(
        EvalSettings, settings.model_settings(), configs=settings.eval_configs, out=str(out / dir_name),
        split="test", mode=settings.eval_mode, prompt=settings.prompt, adapter=adapter, **where,
    ), model=lm)


def kind_metrics(run_dir: Path, kind: str | None = None) -> dict[str, dict[str, Any]]:
    """Per config of a harness run whose kind has metrics of its own (MCQ: acc, ala, ala_gap; conflict:
    claim-following, ...): each metric with its 95 % interval, and the number of items (`kind`: every config's,
    the tasks of a mapped dataset)."""
    import json

    from harness.kinds import get_kind, task_kind
    from harness.results import task_metrics

    results = task_metrics(json.loads((run_dir / "results.json").read_text(encoding="utf-8")))
    out: dict[str, dict[str, Any]] = {}
    for config, summary in results.items():
        names = (get_kind(kind) if kind else task_kind(config)).lm_eval_metrics
        if names:
            out[config] = {"n": summary.get("n"), **{f"{m}{suffix}": summary.get(f"{m}{suffix}") for m in names
                                                     for suffix in ("", "_ci_low", "_ci_high")}}
    return out


def _write_matrix_and_card(settings: TrainSettings, out: Path, info: dict[str, Any]) -> None:
    from finetune.card import write_card
    from finetune.report import write_matrix

    rows = {f"{settings.category} ({settings.scope})": out / EVAL_DIR}
    if settings.eval_base:
        rows = {"base": out / EVAL_BASE_DIR, **rows}
    from finetune.card import method_words

    method = method_words(info)  # e.g. "LoRA", "PCLM + DPO (full LLM)"
    if not settings.kind and any(c in CONFIGS for c in settings.eval_configs or []):  # the nine categories' columns
        info["eval"] = write_matrix(rows, out, title=f"{settings.model}: {method} {settings.scope} on {settings.category}")
    else:
        info["eval"] = {"columns": [], "rows": {}}
    by_kind = {label: kind_metrics(d, settings.kind) for label, d in rows.items()}
    if any(by_kind.values()):  # GT accuracy and ALA (MCQ), claim-following (conflict), per config
        info["eval"]["kind_metrics"] = by_kind
    if settings.eval_base:  # A = base, B = adapter: `harness compare OUT/eval_base OUT/eval` prints the same
        info["eval"]["paired_vs_base"] = paired_vs_base(out)
    write_card(out, info, dataset_repo=settings.dataset_repo)
    write_training_record(out, info)


def evaluate_run(settings: TrainSettings, lm: TrainableAudioLM, out: Path, info: dict[str, Any],
                 acc: Accelerator) -> dict[str, Any]:
    """The adapter (and optionally the base model) on the test split of every eval config, via the harness;
    then the matrix and the card. Returns the training record with its `eval` entry added."""
    lm.model.eval()
    dataset = build_eval_items(settings, out) if acc.is_main_process else None
    acc.wait_for_everyone()
    if not acc.is_main_process and not settings.kind and not all(is_vocalgrad(c) for c in settings.eval_configs or []):
        dataset = str(out / EVAL_ITEMS_DIR)  # the main process built them
    _harness_run(settings, lm, out, EVAL_DIR, str((out / ADAPTER_DIR).resolve()), dataset)
    if settings.eval_base:
        with adapters_disabled(lm.model), pclm_disabled(lm.model):
            _harness_run(settings, lm, out, EVAL_BASE_DIR, None, dataset)
    if acc.is_main_process:
        _write_matrix_and_card(settings, out, info)
    acc.wait_for_everyone()
    return info
