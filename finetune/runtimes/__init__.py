"""Fine-tuning Kimi-Audio, MiMo-Audio and Step-Audio 2 mini through their own runtimes (harness.models.external):
per runtime, the paper's LoRA scopes and its loss (kimi, mimo, step); base holds what they share and the
registry that finetune.lora and the loop ask. Transformers families never reach this package's hooks."""

from finetune.runtimes.base import RuntimeLora, runtime_lora, runtime_losses, runtime_trainer

__all__ = ["RuntimeLora", "runtime_lora", "runtime_losses", "runtime_trainer"]
