"""The repaired checkpoints VoxParadox released (issue 43 item 6): one line saying what is supported and what to do,
before any download, never a traceback or a load as another family. No network: names and a fake config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main as harness
from harness.models.protocol import ModelError
from harness.models.released import refuse_released

RELEASES = ("IHP-Lab/AF3_PCLM_DPO", "IHP-Lab/Qwen2-Audio_PCLM_DPO")


@pytest.mark.parametrize("model_id", RELEASES)
@pytest.mark.parametrize("how", [["--model", "{id}"], ["--model", "hf", "--model-arg", "pretrained={id}"],
                                 ["--model", "audio-flamingo-3", "--model-arg", "pretrained={id}"],
                                 ["--model", "qwen2-audio-7b-instruct", "--adapter", "{id}"]])
def test_released_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], model_id: str,
                                         how: list[str]) -> None:
    args = [a.replace("{id}", model_id) for a in how]
    code = harness(["eval", *args, "--configs", "voxparadox-gender", "--limit", "2", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    line = next(x for x in err.splitlines() if model_id in x)
    assert "VoxParadox" in line and "--adapter" in line and "ihp-lab/VoxParadox" in line


def test_original_af3_layout_by_config(tmp_path: Path) -> None:
    folder = tmp_path / "my-af3-copy"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llava_llama"}))
    with pytest.raises(ModelError, match=r"original Audio Flamingo 3 layout \(config.json model_type 'llava_llama'\)"):
        from harness.models.hf import auto_model

        auto_model(str(folder))


def test_a_local_snapshot_named_like_the_release(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="AF3 \\+ PCLM \\+ DPO release"):
        refuse_released(str(tmp_path / "AF3_PCLM_DPO"))
    refuse_released("Qwen/Qwen2-Audio-7B-Instruct")  # any other checkpoint passes
    refuse_released(str(tmp_path / "checkpoint"), "qwen2_audio")
