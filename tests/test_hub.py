"""Publishing offline: the exact repo layouts that would be uploaded and the exact HfApi calls (a fake HfApi)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import huggingface_hub
import pytest
import torch
import yaml
from huggingface_hub.utils import filter_repo_objects
from safetensors.torch import load_file

from finetune import hub
from finetune.settings import TrainSettings
from finetune.train import train
from vocalgrad_dataset.build.export import PUSH_IGNORE

TOKEN = "hf_offlineTestTokenThatMustNeverAppear"


class FakeHfApi:
    """Records every call; upload_folder snapshots the folder (relative path -> sha256) as it was uploaded."""

    calls: list[tuple[str, dict[str, Any]]] = []
    uploads: list[dict[str, str]] = []
    remote_files: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        assert not args and not kwargs, "the token must come from the environment, not be passed in"

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs: Any) -> Any:
        folder = Path(kwargs["folder_path"])
        files = [str(p.relative_to(folder)) for p in sorted(folder.rglob("*")) if p.is_file()]
        kept = filter_repo_objects(files, ignore_patterns=kwargs.get("ignore_patterns"))  # as the Hub client does
        self.uploads.append({f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in kept})
        self.calls.append(("upload_folder", {k: v for k, v in kwargs.items() if k != "folder_path"}))
        return type("Commit", (), {"commit_url": f"https://huggingface.co/{kwargs['repo_id']}/commit/abc"})()

    def list_repo_files(self, repo_id: str, **kwargs: Any) -> list[str]:
        self.calls.append(("list_repo_files", {"repo_id": repo_id, **kwargs}))
        return list(self.remote_files)


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> type[FakeHfApi]:
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    FakeHfApi.calls, FakeHfApi.uploads, FakeHfApi.remote_files = [], [], []
    return FakeHfApi


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished (2-step) training run evaluated on two categories."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("hub") / "run"
    train(TrainSettings(model="tiny-qwen2-audio", category="volume", scope="all_linear", source="demo", out=str(out),
                        train_limit=4, grad_accum=2, max_steps=2, num_workers=0, progress=False, val_limit=2,
                        eval_configs=["volume", "noise"], eval_limit=2, eval_mode="choices"))
    torch.set_num_threads(threads)
    return out


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def official(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run as if its evaluation had been on the official VCTK benchmark (source rewritten)."""
    out = tmp_path_factory.mktemp("official") / "run"
    shutil.copytree(run, out)
    path = out / "eval" / "results.json"
    results = json.loads(path.read_text())
    results["config"]["source"] = "generate:vctk"
    path.write_text(json.dumps(results))
    return out


def test_adapter_repo_layout_and_calls(official: Path, tmp_path: Path, fake_hub: type[FakeHfApi],
                                       capsys: pytest.CaptureFixture) -> None:
    run = official
    files = hub.stage_adapter(run, tmp_path, repo_id="org/vg-lora")
    assert files == [".eval_results/vocalgrad.yaml", "README.md", "adapter_config.json", "adapter_model.safetensors",
                     "cross_category.csv", "cross_category.md", "cross_category.png", "train_log.jsonl",
                     "training.json"]
    url = hub.push_adapter(run, "org/vg-lora")
    assert url == "https://huggingface.co/org/vg-lora/commit/abc"
    assert fake_hub.calls == [
        ("create_repo", {"repo_id": "org/vg-lora", "repo_type": "model", "private": False, "exist_ok": True}),
        ("upload_folder", {"repo_id": "org/vg-lora", "repo_type": "model",
                           "commit_message": "VocalGrad LoRA adapter (all_linear, volume)"}),
    ]
    assert fake_hub.uploads == [_tree(tmp_path)]  # byte for byte the staged layout
    tensors = load_file(tmp_path / "adapter_model.safetensors")
    assert tensors and all("lora_" in k for k in tensors)  # no base lm_head or embeddings copied
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["lora_alpha"] == 16 and config["lora_dropout"] == 0.05
    assert config["base_model_name_or_path"] == "tiny-qwen2-audio"
    card = (tmp_path / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["library_name"] == "peft" and meta["datasets"] == ["ynklab/vocalgrad"] and "base_model" not in meta
    for text in ("r 8, alpha 16, dropout 0.05", "AdamW, lr 0.0002", "generator version 1.0.0", "`volume`",
                 "In-domain (`volume`)", "| noise |", "Augmentation: off."):
        assert text in card, text
    assert "not the official VCTK benchmark" not in card
    entries = yaml.safe_load((tmp_path / ".eval_results" / "vocalgrad.yaml").read_text())
    assert [e["dataset"] for e in entries] == [{"id": "ynklab/vocalgrad", "task_id": "volume"},
                                               {"id": "ynklab/vocalgrad", "task_id": "background_noise"}]
    assert entries[0]["source"] == {"url": "https://huggingface.co/org/vg-lora", "name": "VocalGrad harness"}
    seen = capsys.readouterr()
    for text in [seen.out, seen.err, *(p.read_text(errors="ignore") for p in tmp_path.rglob("*") if p.is_file())]:
        assert TOKEN not in text


def test_demo_results_stay_off_the_benchmark_leaderboard(run: Path, tmp_path: Path) -> None:
    files = hub.stage_adapter(run, tmp_path, repo_id="org/vg-lora")
    assert ".eval_results/vocalgrad.yaml" not in files and "README.md" in files
    assert "not comparable with published numbers" in (tmp_path / "README.md").read_text()


def test_results_repo_reuses_the_dataset_push(run: Path, tmp_path: Path, fake_hub: type[FakeHfApi]) -> None:
    fake_hub.remote_files = ["README.md", "other-model--default--generate/results.json",
                             "other-model--default--generate/samples_pitch.jsonl"]
    hub.push_results(run / "eval", "org/vg-results")
    name = "tiny-qwen2-audio_lora-all_linear-volume--default--choices"
    assert fake_hub.calls == [
        ("list_repo_files", {"repo_id": "org/vg-results", "repo_type": "dataset"}),
        ("create_repo", {"repo_id": "org/vg-results", "repo_type": "dataset", "private": False, "exist_ok": True}),
        ("upload_folder", {"repo_id": "org/vg-results", "repo_type": "dataset", "commit_message": "VocalGrad build",
                           "ignore_patterns": PUSH_IGNORE}),
    ]
    assert sorted(fake_hub.uploads[0]) == ["README.md", f"{name}/results.json", f"{name}/samples_noise.jsonl",
                                           f"{name}/samples_volume.jsonl"]
    staged = hub.stage_results(run / "eval", tmp_path, existing=["other-model--default--generate"])
    assert fake_hub.uploads == [_tree(tmp_path)] and len(staged) == 4
    card = yaml.safe_load((tmp_path / "README.md").read_text().split("---")[1])
    assert [c["config_name"] for c in card["configs"]] == ["other-model--default--generate", name]
    assert card["configs"][1]["data_files"] == [{"split": "test", "path": f"{name}/samples_*.jsonl"}]


def test_train_pushes_after_a_finished_run(run: Path, fake_hub: type[FakeHfApi]) -> None:
    settings = TrainSettings(model="tiny-qwen2-audio", category="volume", scope="all_linear", source="demo",
                             out=str(run), train_limit=4, grad_accum=2, max_steps=2, num_workers=0, progress=False,
                             val_limit=2, eval_configs=["volume", "noise"], eval_limit=2, eval_mode="choices",
                             push_to_hub="org/vg-lora", results_repo="org/vg-results")
    train(settings)  # already trained and evaluated: straight to the pushes
    assert [c[0] for c in fake_hub.calls] == ["create_repo", "upload_folder", "list_repo_files", "create_repo",
                                              "upload_folder"]


def test_pushing_without_a_token_fails_before_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no stored login either
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    settings = TrainSettings(model="tiny-qwen2-audio", category="volume", scope="lm_head", source="demo",
                             out=str(tmp_path / "out"), push_to_hub="org/x")
    with pytest.raises(ValueError, match="no Hugging Face token"):
        train(settings)
    assert not (tmp_path / "out").exists()
