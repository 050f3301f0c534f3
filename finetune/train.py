"""`vocalgrad-finetune`: LoRA fine-tuning on one VocalGrad category (SPEC §6), then evaluation on all nine and
optional Hub push.

    vocalgrad-finetune --model qwen2-audio-7b-instruct --category volume --scope all_linear \
        --source vctk --data-dir VCTK-Corpus --out runs/lora-volume [--push-to-hub ORG/NAME]
    accelerate launch finetune/train.py ...     (the same arguments, on every process accelerate starts)
    python -m finetune.train ...                (or `accelerate launch -m finetune.train ...`)

This module only orchestrates: finetune.settings (what a run is, the command line), finetune.loop (the
training loop), finetune.lora, finetune.evaluate and finetune.hub do the work. It imports them inside the
functions: run as a script, Python puts finetune/ first on sys.path, where data.py, settings.py, ... would
shadow same-named top-level modules, so nothing of the project may load before `_run_as_script` has put
the repository root there instead (and `--help` never imports torch).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import argparse

    from accelerate import Accelerator

    from finetune.data import TrainingData
    from finetune.settings import TrainSettings
    from harness.models.protocol import TrainableAudioLM


def make_accelerator() -> Accelerator:
    """This process's Accelerator; `accelerate launch` without CUDA still forms one gloo group, not N worlds
    of one (as the eval runner does)."""
    import torch
    from accelerate import Accelerator

    launched = int(os.environ.get("WORLD_SIZE", "1"))
    return Accelerator(cpu=launched > 1 and not torch.cuda.is_available())


def load_base(settings: TrainSettings) -> TrainableAudioLM:
    """The wrapped base model, refused unless it is trainable (TrainableAudioLM, a prompt+answer template)."""
    from harness.models.protocol import TrainableAudioLM
    from harness.models.registry import load_model

    return cast(TrainableAudioLM, load_model(settings.model_settings(), require=["training"]))


def _finished_record(settings: TrainSettings, out: Path) -> dict[str, Any] | None:
    """The record of a finished run in `out` (None if unfinished); a run directory holding other settings,
    finished or checkpointed, is refused here, before minutes of model loading."""
    from finetune import checkpoint
    from finetune.record import read_training_record
    from finetune.settings import check_resumable

    info = read_training_record(out)
    if info is not None:
        check_resumable(info["settings_fingerprint"], settings, out)
    elif (ckpt := checkpoint.latest(out)) is not None:
        check_resumable(checkpoint.read_state(ckpt)["fingerprint"], settings, out)
    return info


def _train_or_reload(settings: TrainSettings, lm: TrainableAudioLM, acc: Accelerator, out: Path,
                     todo: dict[str, Any] | TrainingData) -> dict[str, Any]:
    """Train (or resume) on `todo`'s data; when `todo` is a finished run's record, attach its adapter to the
    base model instead. Returns the training record."""
    from finetune.loop import run_training
    from finetune.settings import ADAPTER_DIR

    if isinstance(todo, dict):
        info = todo
        lm.load_adapter(str(out / ADAPTER_DIR))
    else:
        info = run_training(settings, lm, acc, out, todo)
    if acc.is_main_process:
        print(f"adapter: {out / ADAPTER_DIR}  (final training loss {info['final_loss']:.4f}, "
              f"validation accuracy {info['validation'].get('accuracy', float('nan')):.3f})")
    return info


def train(settings: TrainSettings, lm: TrainableAudioLM | None = None) -> dict[str, Any]:
    """Train (or resume, or skip when done), then evaluate, write the card and push; returns training.json."""
    from finetune import hub
    from finetune.evaluate import evaluate_run
    from finetune.mixture import run_data
    from vocalgrad_dataset.progress import quiet_third_party

    quiet_third_party(settings.verbose)
    settings.check()
    out = Path(settings.out)
    acc = make_accelerator()
    if settings.publishes:
        hub.require_token()  # fail now, not after hours of training
    finished = _finished_record(settings, out)
    # The data before the model: a bad source fails before minutes of loading.
    todo = finished if finished is not None else run_data(settings)
    if lm is None:
        lm = load_base(settings)
    info = _train_or_reload(settings, lm, acc, out, todo)
    if not settings.skip_eval:
        info = evaluate_run(settings, lm, out, info, acc)
    if acc.is_main_process and settings.publishes:
        hub.publish_run(out, model_repo=settings.push_to_hub, results_repo=settings.results_repo,
                        private=settings.hub_private, dataset_repo=settings.dataset_repo)
    acc.wait_for_everyone()
    return info


def build_parser() -> argparse.ArgumentParser:
    """The `vocalgrad-finetune` argument parser (defined in finetune.settings, which imports no torch)."""
    from finetune.settings import build_parser as settings_parser

    return settings_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """The `vocalgrad-finetune` command (also `python -m finetune.train`, `accelerate launch finetune/train.py`)."""
    from finetune.settings import settings_from_argv
    from vocalgrad_dataset.cli.info import path_error

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["push"]:  # retry the Hub push of a finished run alone (finetune.hub.push_main)
            from finetune.hub import push_main

            return push_main(args[1:])
        train(settings_from_argv(args))
    except (ValueError, FileNotFoundError) as err:  # user errors: one line, not a traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the newest checkpoint stays; a rerun resumes from it
        print("vocalgrad-finetune: interrupted", file=sys.stderr)
        return 130
    except OSError as err:
        if err.filename is None:
            raise
        print(f"error: {path_error(err)}", file=sys.stderr)
        return 2
    return 0


def _run_as_script() -> int:
    """`python finetune/train.py` / `accelerate launch finetune/train.py`: the repository root replaces
    finetune/ on sys.path, then the package's own main runs (not this __main__ copy's)."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    from finetune.train import main as package_main

    return package_main()


if __name__ == "__main__":
    sys.exit(main() if __package__ else _run_as_script())
