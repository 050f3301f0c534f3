"""What the runtime fine-tuning tests (Kimi-Audio, MiMo-Audio, Step-Audio 2 mini) share: the fakes on the import
path, a toy `vocalgrad-finetune` command line, the run's training clips as prompts, and the kill -9 resume run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf

from tests.helpers import fake_runtimes

ROOT = Path(__file__).resolve().parents[2]
# Kimi-Audio and Step-Audio 2 load remote code; MiMo-Audio's model class is its checkout's own code.
MODEL_ARGS = {"kimi-audio": ["--model-arg", "trust_remote_code=true"],
              "step-audio-2-mini": ["--model-arg", "trust_remote_code=true"], "mimo-audio": []}


def installed(tmp: Path) -> Iterator[Path]:
    """The fakes importable under the runtimes' module names (sys.path and a subprocess's PYTHONPATH)."""
    shims = fake_runtimes.install(tmp / "shims")
    sys.path.insert(0, str(shims))
    fake_runtimes.forget_modules()
    try:
        yield shims
    finally:
        sys.path.remove(str(shims))
        fake_runtimes.forget_modules()


def cli_args(model: str, out: Path, *extra: str, scope: str = "all_linear") -> list[str]:
    """A toy run on the demo source: 1e-2 learning rate, no progress bar, no worker processes."""
    return ["--model", model, *MODEL_ARGS[model], "--category", "volume", "--scope", scope, "--source", "demo",
            "--lr", "0.01", "--num-workers", "0", "--no-progress", *extra, "--out", str(out)]


def losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "train_log.jsonl").read_text().splitlines()]


def training_prompts(argv: list[str]) -> tuple[list, list[str]]:
    """The run's training clips (in id order) as the prompts and answers the trainer gives the model."""
    from finetune.items import run_training_data
    from finetune.objective import AnswerTask, answer_options
    from finetune.settings import settings_from_argv

    settings = settings_from_argv(argv)
    settings.check()
    data = run_training_data(settings)
    rows = [data.renderer.row(cid) for cid in sorted(data.train_ids)]
    task = AnswerTask.of(settings.prompt, settings.category)
    return task.prompts(rows), [answer_options(r, task.vocabulary).answer for r in rows]


def wav_of(clip, folder: Path, name: str) -> str:
    """The clip as the 16-bit WAV file a runtime is handed (what the wrappers write)."""
    path = folder / f"{name}.wav"
    sf.write(path, np.asarray(clip.array, dtype=np.float32), clip.sampling_rate, subtype="PCM_16")
    return str(path)


def kill_9_and_resume(model: str, tmp: Path, shims: Path, extra: list[str]) -> tuple[Path, Path, int]:
    """(an uninterrupted run, a run killed with SIGKILL mid-run and resumed, the step it resumed from)."""
    from finetune.train import main

    ref, killed = tmp / "uninterrupted", tmp / "killed"
    assert main(cli_args(model, ref, *extra)) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(shims), str(ROOT)])}
    proc = subprocess.Popen([sys.executable, str(ROOT / "finetune" / "train.py"),
                             *cli_args(model, killed, *extra, "--save-every", "1")],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    latest = killed / "checkpoints" / "latest"
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline and not (
            latest.is_file() and latest.read_text().strip() >= "step-000003"):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate()
    assert latest.is_file(), err.decode()[-2000:]
    step = int(latest.read_text().strip().split("-")[1])
    assert not (killed / "training.json").exists(), "the kill must land mid-run"
    assert main(cli_args(model, killed, *extra, "--save-every", "1")) == 0
    return ref, killed, step
