"""LoRA fine-tuning on the tiny random Qwen2-Audio (real transformers class): it learns, touches only what it
should, saves/reloads exactly, resumes after kill -9 to the same adapter, and evaluates on all nine categories."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from huggingface_hub import parse_eval_result_entries
from safetensors.torch import load_file

from finetune.augment import build_augmenter, nuisances_for
from finetune.card import eval_results_yaml
from finetune.data import RowRenderer, StepCounts, balanced_subset, plan_steps, split_ids
from finetune.evaluate import evaluate_clips
from finetune.loop import lr_factor
from finetune.lora import lora_targets
from finetune.report import main as report_main
from finetune.settings import TrainSettings, build_parser
from finetune.train import load_base, main, train
from harness.data import CONFIGS
from harness.models.registry import get_model
from harness.models.tiny import tiny_model
from harness.prompts import build_prompt

ROOT = Path(__file__).resolve().parents[1]
# A toy set from the demo source: 16 training clips (8 per label), 4 clips per optimizer step, a high rate.
TOY = {"model": "tiny-qwen2-audio", "category": "volume", "source": "demo", "lr": 1e-2, "grad_accum": 4,
       "train_limit": 16, "num_workers": 0, "progress": False, "val_limit": 4, "save_every": 1000}


def _log(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "train_log.jsonl").read_text().splitlines()]


def _falls_by_half(losses: list[float]) -> bool:
    return np.mean(losses[-4:]) <= 0.5 * np.mean(losses[:2])


def _wrapped(model: torch.nn.Module) -> list[str]:
    return sorted(n for n, m in model.named_modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer"))


def _base_unchanged(before: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    after = model.state_dict()
    for key, value in before.items():
        head, _, leaf = key.rpartition(".")
        got = after[key] if key in after else after[f"{head}.base_layer.{leaf}"]
        assert torch.equal(got, value), f"base weight {key} changed"


def _train_ids(n: int, category: str = "volume") -> tuple[RowRenderer, tuple[str, ...]]:
    renderer = RowRenderer(category, "train", "demo")
    split = split_ids(renderer.ids(), val_fraction=0.1, seed=1234)
    return renderer, balanced_subset(split.train, n, seed=1234)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: the tiny model's ops are too small to gain from more, and on a shared 2-core box
    extra threads only contend; the kill test's subprocess gets the same count, so its sums match ours."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def all_linear(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """An all-linear adapter trained 5 epochs on the toy set, evaluated on all nine categories (and the base)."""
    out = tmp_path_factory.mktemp("lora") / "all_linear"
    settings = TrainSettings(scope="all_linear", epochs=5, out=str(out), eval_configs=list(CONFIGS), eval_limit=2,
                             eval_mode="choices", eval_base=True, eval_batch_size=4, **TOY)
    lm = load_base(settings)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    info = train(settings, lm)
    return SimpleNamespace(settings=settings, lm=lm, before=before, info=info, out=out)


def test_split_is_stratified_and_plans_do_not_depend_on_world_size() -> None:
    renderer = RowRenderer("volume", "train", "demo")
    ids = renderer.ids()
    split = split_ids(ids, val_fraction=0.1, seed=1234)
    assert len(ids) == 120 and len(split.val) == 12 and not set(split.val) & set(split.train)
    assert sum(i.endswith("__up") for i in split.val) == 6  # 10 % of each label
    assert split == split_ids(ids, val_fraction=0.1, seed=1234)
    one = plan_steps(split.train, seed=1, examples_per_step=16, micro_batch=1, rank=0, world_size=1,
                     start_step=0, total_steps=7)
    three = [plan_steps(split.train, seed=1, examples_per_step=16, micro_batch=1, rank=r, world_size=3,
                        start_step=0, total_steps=7) for r in range(3)]
    for step in range(7):
        ids_1 = sorted(c for mb in one if mb.step == step for c in mb.ids)
        ids_3 = sorted(c for plan in three for mb in plan if mb.step == step and mb.weight for c in mb.ids)
        assert ids_1 == ids_3 and len(ids_1) == (16 if step < 6 else 108 - 96)
    resumed = plan_steps(split.train, seed=1, examples_per_step=16, micro_batch=1, rank=0, world_size=1,
                         start_step=4, total_steps=7)
    assert resumed == [mb for mb in one if mb.step >= 4]


def test_step_counts_and_the_learning_rate_schedule() -> None:
    steps = StepCounts.of(18, examples_per_step=4, epochs=2, max_steps=None)  # 4 + 4 + 4 + 4 + 2 clips an epoch
    assert (steps.per_epoch, steps.total) == (5, 10)
    assert [steps.clips(s) for s in range(10)] == [4, 4, 4, 4, 2] * 2
    assert StepCounts.of(18, examples_per_step=4, epochs=2, max_steps=3).total == 3
    assert StepCounts.of(18, examples_per_step=4, epochs=2, max_steps=30).total == 10
    base = {"model": "m", "category": "volume", "scope": "lm_head", "warmup_steps": 2}
    factors = {name: lr_factor(TrainSettings(lr_scheduler=name, **base), 10) for name in ("constant", "linear", "cosine")}
    assert [factors["constant"](s) for s in (0, 1, 2, 9)] == [0.5, 1.0, 1.0, 1.0]  # linear warm-up over 2 steps
    assert [factors["linear"](s) for s in (0, 2, 6, 10)] == [0.5, 1.0, 0.5, 0.0]
    assert factors["cosine"](6) == pytest.approx(0.5) and factors["cosine"](2) == 1.0
    assert factors["cosine"](10) == pytest.approx(0.0, abs=1e-15)


def _option_blocks(text: str) -> dict[str, str]:
    """--help's option entries: first option string -> its whole entry (wrapped lines joined)."""
    blocks: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("  -"):
            name = line.split()[0].rstrip(",")
            blocks[name] = line
        elif name and line.startswith("    "):
            blocks[name] += " " + line.strip()
        else:
            name = None
    return {k: " ".join(v.split()) for k, v in blocks.items()}


def test_help_names_the_command_and_shows_every_default() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    entry_points = [[sys.executable, "-m", "finetune.train"], [str(Path(sys.executable).parent / "vocalgrad-finetune")],
                    [sys.executable, str(ROOT / "finetune" / "train.py")]]  # the script accelerate launches
    helps = [subprocess.run([*cmd, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
             for cmd in entry_points]
    assert [h.returncode for h in helps] == [0, 0, 0], [h.stderr[-2000:] for h in helps]
    text = helps[0].stdout
    assert helps[1].stdout == text == helps[2].stdout == build_parser().format_help()
    assert text.startswith("usage: vocalgrad-finetune ") and "finetune/train.py [" not in text
    assert "LoRA fine-tuning on one VocalGrad category" in text
    blocks = _option_blocks(text)
    valued = [a for a in build_parser()._actions if a.option_strings and a.nargs != 0 and not a.required]
    assert len(valued) >= 30 and all(a.option_strings[0] in blocks for a in valued)
    assert [a.option_strings[0] for a in valued if "default" not in blocks[a.option_strings[0]]] == []
    assert "(default: 16)" in blocks["--grad-accum"] and "(default: 0.0002)" in blocks["--lr"]
    probe = ("import sys\nfrom finetune.train import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
             "    pass\nprint('torch' in sys.modules)")
    quick = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert quick.stdout.splitlines()[-1] == "False", quick.stderr[-2000:]  # --help never loads torch
    # As a script, Python puts finetune/ first on sys.path (its data.py, settings.py would shadow top-level
    # modules): by the time the command runs, the repository root stands there instead.
    script = ROOT / "finetune" / "train.py"
    probe = (f"import runpy, sys\nsys.path.insert(0, {str(script.parent)!r})\nsys.argv = [{str(script)!r}, '--help']\n"
             f"try:\n    runpy.run_path({str(script)!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print(sys.path[0], any(p.rstrip('/').endswith('/finetune') for p in sys.path))")
    as_script = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=60)
    assert as_script.stdout.splitlines()[-1] == f"{ROOT} False", as_script.stderr[-2000:]


def test_all_linear_learns_and_fits_its_training_clips(all_linear: SimpleNamespace) -> None:
    losses = _log(all_linear.out)
    assert len(losses) == 20 and _falls_by_half(losses), losses
    renderer, train_ids = _train_ids(16)
    # the set of training clips, as SPEC §2 hashes id sets: sorted, newline-joined
    assert hashlib.sha256("\n".join(sorted(train_ids)).encode()).hexdigest() == all_linear.info["data"]["train_ids_sha256"]
    fit = evaluate_clips(all_linear.lm, renderer, train_ids, "default")
    assert fit["n"] == 16 and fit["accuracy"] >= 0.9, fit
    assert all_linear.info["validation"]["n"] == 4


def test_only_the_decoder_linears_change(all_linear: SimpleNamespace) -> None:
    model = all_linear.lm.model
    wrapped = _wrapped(model)
    decoder = [n for n, m in tiny_model("qwen2-audio").model.named_modules()
               if isinstance(m, torch.nn.Linear) and n.startswith("model.language_model.")]
    assert wrapped == sorted(decoder) and len(wrapped) == 14
    _base_unchanged(all_linear.before, model)
    for name in wrapped:  # every adapter moved away from its zero-initialised B
        assert model.get_submodule(name).lora_B["default"].weight.abs().sum() > 0, name


def test_lm_head_scope_trains_only_the_head(tmp_path: Path) -> None:
    settings = TrainSettings(scope="lm_head", epochs=4, out=str(tmp_path), skip_eval=True, **TOY)
    lm = load_base(settings)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    info = train(settings, lm)
    assert _falls_by_half(_log(tmp_path)), _log(tmp_path)
    assert _wrapped(lm.model) == ["lm_head"] and info["lora"]["target_modules"] == ["lm_head"]
    _base_unchanged(before, lm.model)
    tensors = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert sorted(tensors) == ["base_model.model.lm_head.lora_A.weight", "base_model.model.lm_head.lora_B.weight"]


def test_include_audio_tower_adds_encoder_and_projector() -> None:
    lm = tiny_model("qwen2-audio")
    _, names = lora_targets(lm, "all_linear", include_audio_tower=True)
    assert "model.multi_modal_projector.linear" in names and "model.audio_tower.layers.1.fc2" in names
    assert "lm_head" not in names and len(names) == 14 + 12 + 1
    with pytest.raises(ValueError, match="include-audio-tower"):
        lora_targets(lm, "lm_head", include_audio_tower=True)


def test_include_audio_tower_leaves_the_vision_side_alone() -> None:
    """Gemma 3n has a vision embedder beside its audio tower: the audio side is adapted, the vision side not."""
    import re

    from finetune.lora import linear_names

    lm = tiny_model("gemma-3n")
    pattern, names = lora_targets(lm, "all_linear", include_audio_tower=True)
    every = linear_names(lm.model)
    assert "model.embed_vision.embedding_projection" in every  # the family has one
    outside = {n for n in every if not n.startswith(lm.decoder_path + ".") and n != lm.lm_head_path}
    audio = {n for n in outside if n.startswith(("model.audio_tower.", "model.embed_audio."))}
    assert outside - audio == {"model.embed_vision.embedding_projection"}  # by hand: the only vision linear
    assert set(names) - {n for n in names if n.startswith(lm.decoder_path + ".")} == audio
    assert not re.fullmatch(pattern, "model.embed_vision.embedding_projection")


def test_adapter_reload_gives_identical_logits(all_linear: SimpleNamespace) -> None:
    adapter = all_linear.out / "adapter"
    assert all("lora_" in k for k in load_file(adapter / "adapter_model.safetensors"))
    reloaded = get_model("tiny-qwen2-audio", adapter=str(adapter))
    base = get_model("tiny-qwen2-audio")
    renderer = RowRenderer("volume", "test", "demo")
    prompts = [build_prompt(renderer.row(cid), "default")[0] for cid in renderer.ids()[:3]]
    trained = all_linear.lm
    trained.model.eval()
    with torch.no_grad():
        logits = [m.model(**m._encode(prompts)).logits for m in (trained, reloaded, base)]
    assert torch.equal(logits[0], logits[1])
    assert not torch.allclose(logits[0], logits[2])
    choices = ("increase", "decrease")
    assert np.array_equal(trained.score_choices(prompts, choices), reloaded.score_choices(prompts, choices))


def test_evaluation_on_nine_categories_and_the_matrix(all_linear: SimpleNamespace, tmp_path: Path) -> None:
    out = all_linear.out
    results = json.loads((out / "eval" / "results.json").read_text())
    assert list(results["results"]) == list(CONFIGS) and all(r["n"] == 2 for r in results["metrics"].values())
    assert results["config"]["model_args"]["adapter"] == str((out / "adapter").resolve())
    base = json.loads((out / "eval_base" / "results.json").read_text())
    assert list(base["results"]) == list(CONFIGS)
    assert (out / "cross_category.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "cross_category.md").read_text()
    assert "| base |" in table and "| volume (all_linear) |" in table
    rows = all_linear.info["eval"]["rows"]
    assert set(rows) == {"base", "volume (all_linear)"} and all(len(v) == 9 for v in rows.values())
    paired = all_linear.info["eval"]["paired_vs_base"]  # harness compare's McNemar, base (A) vs adapter (B)
    assert set(paired) == set(CONFIGS) and all(p["n_pairs"] == 2 for p in paired.values())
    assert [paired[c]["accuracy_b"] for c in CONFIGS] == [results["metrics"][c]["accuracy"] for c in CONFIGS]
    assert [paired[c]["accuracy_a"] for c in CONFIGS] == [base["metrics"][c]["accuracy"] for c in CONFIGS]
    card = (out / "adapter" / "README.md").read_text()
    assert "In-domain (`volume`)" in card and "not the official VCTK benchmark" in card
    assert not (out / "adapter" / ".eval_results").exists()  # demo scores stay off the benchmark's Hub leaderboard
    official = {**results, "config": {**results["config"], "source": "generate:vctk"}}
    entries = parse_eval_result_entries(yaml.safe_load(eval_results_yaml(all_linear.info, official,
                                                                         dataset_repo="ynklab/vocalgrad")))
    assert [e.task_id for e in entries][:3] == ["speaking_speed", "voice_pitch", "volume"] and len(entries) == 10
    assert entries[2].value == round(100 * results["metrics"]["volume"]["accuracy"], 2) and entries[9].task_id == "all"
    assert report_main([str(out), "--base", "--out", str(tmp_path)]) == 0  # the matrix over training runs
    assert (tmp_path / "cross_category.md").read_text() == table.replace(
        "LoRA all_linear on volume", "LoRA: trained category x test category").replace("tiny-qwen2-audio: ", "")


def test_kill_9_then_resume_ends_with_the_same_adapter(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    toy = {**TOY, "train_limit": 8, "grad_accum": 2, "epochs": 3, "skip_eval": True, "val_limit": 0}  # 12 steps
    ref = tmp_path / "uninterrupted"
    train(TrainSettings(scope="all_linear", out=str(ref), **toy))
    killed = tmp_path / "killed"
    args = ["--model", "tiny-qwen2-audio", "--category", "volume", "--scope", "all_linear", "--source", "demo",
            "--lr", "0.01", "--grad-accum", "2", "--train-limit", "8", "--epochs", "3", "--skip-eval",
            "--val-limit", "0", "--num-workers", "0", "--save-every", "1", "--no-progress", "--out", str(killed)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as this process (one_thread): the same summation order
    proc = subprocess.Popen([sys.executable, str(ROOT / "finetune" / "train.py"), *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = killed / "checkpoints" / "latest"
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline and not (
            latest.is_file() and latest.read_text().strip() >= "step-000003"):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    step = int(latest.read_text().strip().split("-")[1])
    assert 3 <= step < 12 and not (killed / "training.json").exists(), "the kill must land mid-run"
    assert main(args[:-2] + ["--out", str(killed)]) == 0
    assert f"from step-{step:06d}" in capsys.readouterr().out
    a = load_file(ref / "adapter" / "adapter_model.safetensors")
    b = load_file(killed / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), max(float((a[k] - b[k]).abs().max()) for k in a)
    assert _log(ref) == _log(killed)


def test_bad_input_fails_with_one_line(all_linear: SimpleNamespace, tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    base = ["--category", "volume", "--scope", "all_linear", "--source", "demo", "--out", str(tmp_path / "x")]
    assert main(["--model", "tiny-qwen-audio", *base]) == 2
    assert "did you mean 'tiny-qwen2-audio'" in capsys.readouterr().err
    assert main(["--model", "random", *base]) == 2
    assert "cannot be fine-tuned" in capsys.readouterr().err
    assert main(["--model", "tiny-qwen2-audio", *base[:1], "volumee", *base[2:]]) == 2
    assert "volume" in capsys.readouterr().err
    assert main(["--model", "tiny-qwen2-audio", *base[:5], "demoo", *base[6:]]) == 2
    assert "unknown source 'demoo'" in capsys.readouterr().err
    assert main(["--model", "tiny-qwen2-audio", *base, "--train-limit", "500"]) == 2
    assert "training split has 54" in capsys.readouterr().err
    other = TrainSettings(scope="all_linear", epochs=5, out=str(all_linear.out), **{**TOY, "lr": 1e-3})
    with pytest.raises(ValueError, match=r"other settings \(lr\)"):
        train(other)


def test_augmentation_is_seeded_and_spares_the_trained_attribute() -> None:
    from vocalgrad_dataset.oracle import predict

    assert "gain" not in {n.name for n in nuisances_for("volume")}
    assert "gaussian_snr" not in {n.name for n in nuisances_for("noise")}
    for category in CONFIGS:
        renderer = RowRenderer(category, "test", "demo")
        augment = build_augmenter(category, 1234, p=1.0)  # every transform on every clip
        for cid in [i for i in renderer.ids() if "__linear__high__" in i][:2]:
            row = renderer.row(cid)
            out = augment(row, 0)
            assert np.array_equal(out["audio"]["array"], augment(row, 0)["audio"]["array"])
            assert not np.array_equal(out["audio"]["array"], augment(row, 1)["audio"]["array"])
            sr = row["audio"]["sampling_rate"]
            span = (round(row["onset_sec"] * sr), round(row["offset_sec"] * sr))
            assert predict(category, out["audio"]["array"], sr, *span)[0] == row["label"], (category, cid)


@pytest.mark.slow
def test_two_process_ddp_matches_one_process(tmp_path: Path) -> None:
    """`accelerate launch` with 2 CPU processes (gloo): each takes half of every step's clips; with dropout off
    the adapter equals a single-process run up to summation order. Worker rendering and augmentation on."""
    flags = ["--model", "tiny-qwen2-audio", "--category", "volume", "--scope", "all_linear", "--source", "demo",
             "--lr", "0.01", "--grad-accum", "4", "--train-limit", "8", "--epochs", "2", "--lora-dropout", "0",
             "--augment", "--val-limit", "4", "--eval-configs", "volume", "--eval-limit", "4", "--eval-mode",
             "choices", "--no-progress"]
    launcher = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
                str(29500 + (os.getpid() + 7) % 1000)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two"
    proc = subprocess.run([*launcher, str(ROOT / "finetune" / "train.py"), *flags, "--num-workers", "1",
                           "--out", str(two)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = tmp_path / "one"
    assert main([*flags, "--num-workers", "0", "--skip-eval", "--out", str(one)]) == 0
    info = json.loads((two / "training.json").read_text())
    assert info["world_size"] == 2 and info["augmentation"]["enabled"]
    assert "gain" not in {t["name"] for t in info["augmentation"]["transforms"]}
    a, b = (load_file(d / "adapter" / "adapter_model.safetensors") for d in (one, two))
    # Two ranks sum the step's gradients in another order: float32 Adam at lr 0.01 carries that to ~1e-5 over 4
    # steps (1.2e-5 measured with transformers 5.24); a wrong DDP average would differ by ~lr (1e-2).
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=5e-5) for k in a)
    assert np.allclose(_log(one), _log(two), atol=1e-5)
    assert json.loads((two / "eval" / "results.json").read_text())["metrics"]["volume"]["n"] == 4


def test_progress_in_a_log_is_whole_lines_and_no_library_clutter(tmp_path: Path) -> None:
    """Issue 23: with stdout/stderr not a terminal, training prints one line per 5 % (no carriage-return tqdm
    frames), and transformers' weight-loading bars and FutureWarnings stay hidden without --verbose."""
    args = ["--model", "tiny-qwen2-audio", "--category", "volume", "--scope", "all_linear", "--source", "demo",
            "--train-limit", "8", "--epochs", "1", "--skip-eval", "--val-limit", "0", "--num-workers", "0",
            "--out", str(tmp_path / "run")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "VOCALGRAD_PROGRESS": "auto"}
    proc = subprocess.run([sys.executable, str(ROOT / "finetune" / "train.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, timeout=300)  # bytes: text mode would turn "\r" into "\n"
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err[-3000:]
    log = out + err
    assert "\r" not in log  # no tqdm frames in a log
    lines = [ln for ln in err.split("\n") if ln.startswith("LoRA all_linear volume:")]
    assert lines and lines[-1].startswith("LoRA all_linear volume: 100%"), err[-2000:]
    assert "FutureWarning" not in log and "Loading weights" not in log, log[-2000:]
