"""What a run is trained to do: answer a row's prompt with its true answer, scored by the cross-entropy of the
answer's tokens (and the end-of-turn token) only (`--objective ce`), or prefer the true answer to a wrong one
by DPO (`--objective dpo`, Rafailov et al. 2023; VoxParadox's recipe: beta 0.1, a random wrong option).

Rows of any task kind plug in through `answer_options`: VocalGrad rows answer with their label's word (the other
word is the wrong one); rows that carry `options` and `answer` (lexical conflict) answer with `answer`, every
other option is wrong, and an incongruent conflict row's `claim` (the option the transcript asserts) is the
natural rejected answer (`--dpo-rejected claim`). Multiple-choice rows (VoxParadox-lite) are asked
with lettered options (harness.mcq) and answer with the true option's letter, the word the harness scores in
`choices` mode and its option parser reads; their adversarial label's letter is the `claim`.
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from finetune.lora import adapters_disabled
from harness.data import BenchRow
from harness.kinds import AnswerOptions as KindAnswers
from harness.kinds import get_kind, row_kind, task_kind
from harness.kinds.base import word_answers
from harness.models.pclm import prompt_without_answer
from harness.models.protocol import Prompt, TrainableAudioLM
from harness.prompts import Variant, Vocabulary, build_prompt, get_variant


@dataclass(frozen=True)
class AnswerTask:
    """One category under one prompt variant: each row's prompt and the word its label is answered with
    (`vocabulary` is None for a config whose rows carry their own lettered options: multiple choice)."""

    variant: Variant
    vocabulary: Vocabulary | None

    @classmethod
    def of(cls, prompt: str, category: str, kind: str | None = None) -> AnswerTask:
        """The task of `category`'s rows asked with prompt variant `prompt` (several comma-separated configs: each
        row answered as its own config's, RowTasks); `kind`: the tasks of a mapped dataset (--kind), whose rows
        carry their own question and options."""
        configs = [c.strip() for c in category.split(",") if c.strip()]
        if len(configs) > 1:
            return RowTasks(get_variant(prompt), None, {c: cls.of(prompt, c, kind) for c in configs})
        variant = get_variant(prompt)
        if kind is not None:
            mapped = get_kind(kind)
            if mapped.prompt is None:
                raise ValueError(f"--kind {kind}: its rows do not carry their own question and options")
            mapped.accepts(variant.name, category)
            return cls(variant, None)
        kind = task_kind(category)
        if kind.prompt is not None:  # answers per row (MCQ): only check the kind takes the variant
            kind.accepts(variant.name, category)
            return cls(variant, None)
        return cls(variant, variant.vocabulary(category))

    def options(self, row: Mapping[str, Any]) -> AnswerOptions:
        """The row's answer options under this task."""
        return answer_options(row, self.vocabulary)

    def prompts(self, rows: Sequence[BenchRow]) -> list[Prompt]:
        """The rows' prompts under this variant."""
        return [build_prompt(r, self.variant)[0] for r in rows]

    def inputs(self, lm: TrainableAudioLM, rows: Sequence[BenchRow], *,
               end_of_turn: bool) -> tuple[list[Prompt], dict[str, Any]]:
        """(the rows' prompts, model inputs for prompt + answer with labels on the answer's tokens only)."""
        prompts = self.prompts(rows)
        answers = [self.options(r).answer for r in rows]
        return prompts, lm.training_inputs(prompts, answers, end_of_turn=end_of_turn)

    def pair_inputs(self, lm: TrainableAudioLM, rows: Sequence[BenchRow], *, end_of_turn: bool, rejected: str,
                    seed: int) -> dict[str, Any]:
        """Model inputs of 2B rows: every prompt with its chosen answer, then every prompt with its rejected one."""
        prompts = self.prompts(rows)
        pairs = [self.options(r).pair(rejected, seed=seed, key=r["benchmark_clip_id"]) for r in rows]
        answers = [c for c, _ in pairs] + [r for _, r in pairs]
        return lm.training_inputs(prompts + prompts, answers, end_of_turn=end_of_turn)


@dataclass(frozen=True)
class RowTasks(AnswerTask):
    """Rows of several configs (a mixture): each row answered as its own config's task (by its `category`)."""

    tasks: Mapping[str, AnswerTask] = field(default_factory=dict)

    def options(self, row: Mapping[str, Any]) -> AnswerOptions:
        task = self.tasks.get(str(row.get("category")))
        if task is None:
            raise ValueError(f"{row.get('benchmark_clip_id', '?')}: config {row.get('category')!r} is not one of "
                             f"{sorted(self.tasks)}")
        return task.options(row)


REJECTED = ("random", "adversarial", "claim")


@dataclass(frozen=True)
class AnswerOptions(KindAnswers):
    """A row's true answer, its wrong options and the option the transcript claims (harness.kinds.AnswerOptions),
    with DPO's pairing."""

    def pair(self, rejected: str, *, seed: int, key: str) -> tuple[str, str]:
        """(chosen, rejected): the claim when asked for and present, else a wrong option drawn from (seed, key)."""
        # adversarial (an MCQ item's y_adv) and claim (a conflict row's) are both the option the transcript asserts
        if rejected in ("claim", "adversarial") and self.claim is not None:
            return self.answer, self.claim
        if not self.wrong:
            raise ValueError(f"{key}: no wrong answer option to reject")
        rng = np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])
        return self.answer, self.wrong[int(rng.integers(len(self.wrong)))]


def answer_options(row: Mapping[str, Any], vocabulary: Vocabulary | None) -> AnswerOptions:
    """The row's answer options as its kind reads them (a multiple-choice item's letters, a grid row's words)."""
    kind = row_kind(row) if row.get("kind") or row.get("category") else None  # a bare row: the grid's reading
    answers = kind.answers if kind is not None else word_answers
    if answers is None:
        raise ValueError(f"{row.get('benchmark_clip_id', '?')}: the {kind.name} kind names no answer options")
    found = answers(row, vocabulary)
    return AnswerOptions(found.answer, found.wrong, found.claim)


def keeps_logits(model: torch.nn.Module) -> bool:
    """Whether the model's forward takes `logits_to_keep` (then no (T, V) logits are built for the prompt)."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def _answer_token_nll(model: torch.nn.Module, inputs: dict[str, torch.Tensor],
                      keep_logits: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """((B, n) negative log-likelihood of each answer token, (B, n) mask of the real ones) for rows whose last
    n positions hold their answers (labels != -100 there)."""
    labels = inputs["labels"]
    n = int((labels != -100).sum(-1).max())
    kwargs = {k: v for k, v in inputs.items() if k != "labels"}
    if keep_logits:
        kwargs["logits_to_keep"] = n + 1  # only the positions that predict the answer: no (T, V) logits
    with prompt_without_answer(model, labels):  # a PCLM weighs layers by the prompt, never by the answer
        logits = model(**kwargs, use_cache=False).logits[:, -(n + 1) : -1].float()
    target = labels[:, -n:]
    nll = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=-100, reduction="none")
    return nll, (target != -100).float()


def answer_losses(model: torch.nn.Module, inputs: dict[str, torch.Tensor], keep_logits: bool) -> torch.Tensor:
    """(B,) mean cross-entropy over each row's answer tokens (labels != -100; they end every row)."""
    nll, mask = _answer_token_nll(model, inputs, keep_logits)
    return (nll * mask).sum(-1) / mask.sum(-1)


def sequence_logps(model: torch.nn.Module, inputs: dict[str, torch.Tensor], keep_logits: bool) -> torch.Tensor:
    """(B,) summed log-probability of each row's answer tokens (what DPO compares, as TRL sums them)."""
    nll, mask = _answer_token_nll(model, inputs, keep_logits)
    return -(nll * mask).sum(-1)


def dpo_losses(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
               reference_rejected: torch.Tensor, beta: float) -> torch.Tensor:
    """(B,) DPO sigmoid losses -log sigma(beta * ((pi_c - ref_c) - (pi_r - ref_r))) from summed log-probs."""
    margin = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)
    return -F.logsigmoid(beta * margin)


def pair_dpo_losses(train_model: torch.nn.Module, reference_model: torch.nn.Module, inputs: dict[str, torch.Tensor],
                    keep_logits: bool, beta: float,
                    reference_context: Callable[[], AbstractContextManager[Any]] | None = None) -> torch.Tensor:
    """(B,) DPO losses of B (chosen, rejected) pairs laid out as 2B rows (chosen first). The reference is the same
    model with its LoRA switched off (no second copy in memory), or inside `reference_context()` (PCLM's stage-2
    snapshot swapped in), under no_grad."""
    # The reference first: a snapshot swapped into the trained tensors in place must not touch tensors the
    # policy's graph has saved for its backward pass.
    context = reference_context() if reference_context is not None else adapters_disabled(reference_model)
    with torch.no_grad(), context:
        reference = sequence_logps(reference_model, inputs, keep_logits)
    policy = sequence_logps(train_model, inputs, keep_logits)
    b = policy.shape[0] // 2
    return dpo_losses(policy[:b], policy[b:], reference[:b], reference[b:], beta)

