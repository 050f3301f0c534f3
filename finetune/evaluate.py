"""How well an adapter does: answer loss and choice accuracy on clips (validation, fit), and after training the
harness evaluation on every eval config's test split, the cross-category matrix and the model card."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from finetune.data import RowRenderer
from finetune.lora import adapters_disabled
from finetune.objective import AnswerTask, answer_losses, answer_options, keeps_logits
from finetune.record import write_training_record
from finetune.settings import ADAPTER_DIR, EVAL_BASE_DIR, EVAL_DIR, TrainSettings
from harness.models.pclm import pclm_disabled
from harness.models.protocol import TrainableAudioLM
from harness.settings import derive

if TYPE_CHECKING:
    from accelerate import Accelerator


@torch.no_grad()
def evaluate_clips(lm: TrainableAudioLM, renderer: RowRenderer, ids: Sequence[str], prompt: str, *,
                   batch_size: int = 8, end_of_turn: bool = True,
                   accelerator: Accelerator | None = None) -> dict[str, float]:
    """Answer loss and choice accuracy (the harness' `choices` scoring) over clips, shared across processes."""
    task = AnswerTask.of(prompt, renderer.config)
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    mine = list(ids)[rank::world]
    was_training = lm.model.training
    lm.model.eval()
    keep = keeps_logits(lm.model)
    loss_sum, correct = 0.0, 0
    for i in range(0, len(mine), batch_size):
        rows = [renderer.row(cid) for cid in mine[i : i + batch_size]]
        prompts, inputs = task.inputs(lm, rows, end_of_turn=end_of_turn)
        loss_sum += float(answer_losses(lm.model, inputs, keep).sum())
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
    one batched call for the VocalGrad vocabulary, one call per row for rows with their own options (MCQ)."""
    if not any(r.get("options") for r in rows):
        scores = lm.score_choices(prompts, task.vocabulary.choices)
        return sum((s[0] > s[1]) == (r["label"] == "increase") for s, r in zip(scores, rows, strict=True))
    correct = 0
    for p, r in zip(prompts, rows, strict=True):
        opts = answer_options(r, task.vocabulary)
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


def _harness_run(settings: TrainSettings, lm: TrainableAudioLM, out: Path, dir_name: str,
                 adapter: str | None) -> None:
    from harness.runner import EvalSettings, run_eval

    run_eval(derive(
        EvalSettings, settings.model_settings(), configs=settings.eval_configs, out=str(out / dir_name),
        split="test", source=settings.eval_source or settings.source,
        data_dir=settings.eval_data_dir or settings.data_dir, mode=settings.eval_mode, prompt=settings.prompt,
        limit=settings.eval_limit, adapter=adapter,
    ), model=lm)


def _write_matrix_and_card(settings: TrainSettings, out: Path, info: dict[str, Any]) -> None:
    from finetune.card import write_card
    from finetune.report import write_matrix

    rows = {f"{settings.category} ({settings.scope})": out / EVAL_DIR}
    if settings.eval_base:
        rows = {"base": out / EVAL_BASE_DIR, **rows}
    method = "LoRA" if settings.method == "lora" else "PCLM + LoRA"
    info["eval"] = write_matrix(rows, out, title=f"{settings.model}: {method} {settings.scope} on {settings.category}")
    if settings.eval_base:  # A = base, B = adapter: `harness compare OUT/eval_base OUT/eval` prints the same
        info["eval"]["paired_vs_base"] = paired_vs_base(out)
    write_card(out, info, dataset_repo=settings.dataset_repo)
    write_training_record(out, info)


def evaluate_run(settings: TrainSettings, lm: TrainableAudioLM, out: Path, info: dict[str, Any],
                 acc: Accelerator) -> dict[str, Any]:
    """The adapter (and optionally the base model) on the test split of every eval config, via the harness;
    then the matrix and the card. Returns the training record with its `eval` entry added."""
    lm.model.eval()
    _harness_run(settings, lm, out, EVAL_DIR, str((out / ADAPTER_DIR).resolve()))
    if settings.eval_base:
        with adapters_disabled(lm.model), pclm_disabled(lm.model):
            _harness_run(settings, lm, out, EVAL_BASE_DIR, None)
    if acc.is_main_process:
        _write_matrix_and_card(settings, out, info)
    acc.wait_for_everyone()
    return info
