"""What LoRA is trained to do: answer a row's prompt with its label's word, scored by the cross-entropy of the
answer's tokens (and the end-of-turn token) only."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from harness.data import BenchRow
from harness.models.protocol import Prompt, TrainableAudioLM
from harness.prompts import Variant, Vocabulary, build_prompt, get_variant


@dataclass(frozen=True)
class AnswerTask:
    """One category under one prompt variant: each row's prompt and the word its label is answered with."""

    variant: Variant
    vocabulary: Vocabulary

    @classmethod
    def of(cls, prompt: str, category: str) -> AnswerTask:
        """The task of `category`'s rows asked with prompt variant `prompt`."""
        variant = get_variant(prompt)
        return cls(variant, variant.vocabulary(category))

    def inputs(self, lm: TrainableAudioLM, rows: Sequence[BenchRow], *,
               end_of_turn: bool) -> tuple[list[Prompt], dict[str, Any]]:
        """(the rows' prompts, model inputs for prompt + answer with labels on the answer's tokens only)."""
        vocab = self.vocabulary
        prompts = [build_prompt(r, self.variant)[0] for r in rows]
        answers = [vocab.increase if r["label"] == "increase" else vocab.decrease for r in rows]
        return prompts, lm.training_inputs(prompts, answers, end_of_turn=end_of_turn)


def keeps_logits(model: torch.nn.Module) -> bool:
    """Whether the model's forward takes `logits_to_keep` (then no (T, V) logits are built for the prompt)."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def answer_losses(model: torch.nn.Module, inputs: dict[str, torch.Tensor], keep_logits: bool) -> torch.Tensor:
    """(B,) mean cross-entropy over each row's answer tokens (labels != -100; they end every row)."""
    labels = inputs["labels"]
    n = int((labels != -100).sum(-1).max())
    kwargs = {k: v for k, v in inputs.items() if k != "labels"}
    if keep_logits:
        kwargs["logits_to_keep"] = n + 1  # only the positions that predict the answer: no (T, V) logits
    logits = model(**kwargs, use_cache=False).logits[:, -(n + 1) : -1].float()
    target = labels[:, -n:]
    ce = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=-100, reduction="none")
    mask = (target != -100).float()
    return (ce * mask).sum(-1) / mask.sum(-1)
