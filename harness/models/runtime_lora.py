"""What fine-tuning, LoRA adapters and option scoring need from a model that runs through its own runtime
(Kimi-Audio, MiMo-Audio, Step-Audio 2 mini; harness.models.external): the runtime's torch model that PEFT
adapts in place, its prompt (+ answer) encodings, and its next-token text logits.

The paper's own scripts (ynklab/vocalgrad plic/kimi_finetune.py, mimo_finetune.py, stepaudio2_finetune.py and
scripts/run/evaluate_meld_mcq.py) wrap exactly these modules: `KimiAudio.alm`, `MimoAudio.model` (the audio
tokenizer is a separate object) and `StepAudio2.llm` (encoder and adapter included). An adapter is attached
in place (PEFT injects its layers into that module), so the runtime's own generation uses it unchanged.
Option scoring reads the text head's logits after the prompt, as the paper's Table 22 did for Kimi-Audio.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .protocol import ModelError, Prompt


def to_device(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    """The batch's tensors (and lists of tensors) on `device`; other values as they are."""
    import torch

    def move(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.to(device)
        if isinstance(v, list) and v and all(isinstance(x, torch.Tensor) for x in v):
            return [x.to(device) for x in v]
        return v

    return {k: move(v) for k, v in batch.items()}


def weight_placement(weights: Any) -> tuple[Any, Any]:
    """(dtype, device) of a torch module: its own attributes (transformers models), else its first parameter's."""
    dtype, device = getattr(weights, "dtype", None), getattr(weights, "device", None)
    if (dtype is None or device is None) and callable(getattr(weights, "parameters", None)):
        first = next(iter(weights.parameters()), None)
        if first is not None:
            dtype, device = dtype or first.dtype, device or first.device
    return dtype, device


class RuntimeTraining:
    """The TrainableAudioLM side of an external runtime wrapper (mixed into ExternalAudioLM's subclasses).

    Subclasses implement `encode` (one prompt, optionally with its answer, as the runtime's model inputs),
    `text_logits` (the text head's (1, T, V) logits of such a batch through a given model) and
    `choice_token_ids` (one token id per choice, or ModelError).
    """

    supports_training = True  # the fine-tuning hooks of finetune.runtimes (the paper's loss per runtime)
    supports_adapters = True  # PEFT adapters attached in place to the runtime's model
    supports_choices = True  # option scoring by the text head's logits after the prompt
    decoder_path = ""  # the whole wrapped model: the paper's scopes are per runtime (finetune.runtimes)
    lm_head_path = "lm_head"
    audio_stack = None  # no PCLM seam: the runtimes' audio front ends are their own code
    adapter: str | None = None

    # ---- hooks (per runtime) ----------------------------------------------------------------------------
    def encode(self, prompt: Prompt, answer: str | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def text_logits(self, model: Any, batch: dict[str, Any]) -> Any:
        raise NotImplementedError

    def choice_token_ids(self, choices: tuple[str, ...]) -> list[int]:
        raise NotImplementedError

    # ---- TrainableAudioLM ---------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        """The runtime's torch model that LoRA adapts (KimiAudio.alm, MimoAudio.model, StepAudio2.llm)."""
        return self._weights()  # type: ignore[attr-defined]

    @property
    def model_id(self) -> str:
        return self.model_path  # type: ignore[attr-defined]

    @property
    def dtype(self) -> Any:
        return weight_placement(self.model)[0]

    @property
    def family(self) -> str:
        return self.spec.name  # type: ignore[attr-defined]

    def base_revision(self) -> str | None:
        """The commit of the base weights where known (a Hub snapshot), else the pinned revision."""
        return self.commit or self.revision  # type: ignore[attr-defined]

    def weights_device(self) -> Any:
        return weight_placement(self.model)[1]

    def training_inputs(self, prompts: list[Prompt], answers: list[str], *, end_of_turn: bool = True) -> dict[str, Any]:
        """The runtime's encodings of prompt + answer, one per row (the runtimes train one clip per forward)."""
        if not end_of_turn:
            raise ValueError(f"{self.spec.name}: the paper's loss includes the token that ends the answer; "  # type: ignore[attr-defined]
                             "--no-end-of-turn is not available for this runtime")
        device = self.weights_device()
        return {"rows": [to_device(self.encode(p, a), device) for p, a in zip(prompts, answers, strict=True)]}

    # ---- adapters -----------------------------------------------------------------------------------------
    def load_adapter(self, path: str) -> None:
        """Attach a PEFT LoRA adapter (a vocalgrad-finetune adapter folder or Hub id) to the runtime's model, in
        place, as the paper's evaluation did with PeftModel.from_pretrained."""
        try:
            from peft import PeftModel
        except ImportError as err:
            raise ModelError(f"{self.spec.name}: adapters need peft (pip install peft)") from err  # type: ignore[attr-defined]
        PeftModel.from_pretrained(self.model, path).eval()
        self.adapter = path

    # ---- option scoring -----------------------------------------------------------------------------------
    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        """(B, C) log-probabilities of each choice's single token after each prompt (the text head's logits)."""
        import torch

        ids = self.choice_token_ids(choices)
        model, device = self.model, self.weights_device()
        rows = []
        with torch.no_grad():
            for p in prompts:
                logits = self.text_logits(model, to_device(self.encode(p), device))
                rows.append(torch.log_softmax(logits[0, -1].float(), dim=-1)[ids].double().cpu().numpy())
        return np.stack(rows)

    def single_tokens(self, choices: tuple[str, ...], encode: Any) -> list[int]:
        """One token id per choice through `encode(choice) -> ids`; ModelError for a choice of several tokens."""
        out = []
        for c in choices:
            ids = list(encode(c))
            if len(ids) != 1:
                raise ModelError(f"{self.spec.name} tokenizes the choice {c!r} as {len(ids)} tokens; option "  # type: ignore[attr-defined]
                                 "scoring reads one token's logit (use --mode generate)")
            out.append(int(ids[0]))
        return out
