"""Step-Audio 2 mini's fine-tuning loss, as the paper's plic/stepaudio2_finetune.py compute_stepaudio2_text_loss
computes it.

The assistant turn is "<|BOT|>assistant\\n{label}<|EOT|>"; the loss is the cross-entropy of logits[:, :-1]
against input_ids[:, 1:] over the positions at or after the prompt's length (the label's tokens and <|EOT|>),
inside the vocabulary, not padding. all_linear adapts every linear layer of StepAudio2.llm, its audio encoder
and adapter included.
"""

from __future__ import annotations

from typing import Any

import torch

from finetune.runtimes.base import RuntimeTrainer, masked_mean_ce


class StepTrainer(RuntimeTrainer):
    """Step-Audio 2 mini: cross-entropy over the answer's positions."""

    name = "step-audio-2-mini"
    source = "ynklab/vocalgrad plic/stepaudio2_finetune.py compute_stepaudio2_text_loss"

    def row_loss(self, lm: Any, model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        logits = lm.text_logits(model, batch).float()
        labels = batch["input_ids"].long()
        shift_logits, shift_labels = logits[:, :-1, :], labels[:, 1:]
        vocab = shift_logits.shape[-1]
        positions = torch.arange(1, labels.shape[1], device=labels.device).unsqueeze(0)
        mask = (positions >= int(batch["prompt_token_count"])) & (shift_labels >= 0) & (shift_labels < vocab)
        mask &= shift_labels != lm.pad_token_id
        return masked_mean_ce(shift_logits, shift_labels.clamp(min=0, max=vocab - 1), mask)


TRAINER = StepTrainer()
