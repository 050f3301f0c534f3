"""Issue 44: PCLM's prompt encoder as the paper's, a small BERT over the user's prompt only (here a tiny random
transformers BertModel built from its config), beside the documented default (the LM's mean-pooled embeddings)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pytest
import torch

from finetune.train import main
from harness.models import pclm
from harness.models.protocol import AudioClip, Prompt
from harness.models.tiny import tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WORDS = ["does", "the", "volume", "pitch", "rise", "or", "fall", "go", "up", "down", "of", "this", "voice", "speech"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer BERT with a WordPiece vocabulary of a few words and the letters (saved like a Hub one)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *string.ascii_lowercase,
             *(f"##{c}" for c in string.ascii_lowercase), *WORDS]
    (folder / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(dict.fromkeys(vocab)), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(str(folder))
    return folder


def _clip(seed: int) -> AudioClip:
    return AudioClip((0.1 * np.random.default_rng(seed).standard_normal(24000)).astype(np.float32), 16000)


def test_the_encoder_reads_the_users_prompt_only(tiny_bert: Path) -> None:
    lm = tiny_model("qwen2-audio")
    mixer = pclm.attach(lm, pclm.new_config(lm, prompt_encoder=str(tiny_bert)))
    assert mixer.config.prompt_dim == 32  # the BERT's width, not the LM's
    site = mixer._site
    seen: list[list[str]] = []
    encoder = site.sentence
    site.sentence = lambda texts: (seen.append(list(texts)), encoder(texts))[1]
    prompts = [Prompt((_clip(1), "Does the volume rise or fall?")),
               Prompt(("Listen.", _clip(2), "Does the pitch go up or down?"))]
    lm.score_choices(prompts, ("increase", "decrease"))
    assert seen == [["Does the volume rise or fall?", "Listen. Does the pitch go up or down?"]]
    out = lm.generate(prompts, max_new_tokens=3)
    assert len(out) == 2 and seen[-1] == seen[0]  # generate: the first forward (the one with the audio) only
    weights = mixer.alpha(encoder(seen[0]))
    assert (weights[0] - weights[1]).abs().max() > 0  # two prompts, two weightings


def test_multi_task_training_with_the_bert_gives_each_prompt_its_weights(tiny_bert: Path, tmp_path: Path) -> None:
    from finetune.data import RowRenderer
    from finetune.objective import AnswerTask
    from harness.models.registry import get_model

    out = tmp_path / "run"
    assert main(["--model", "tiny-qwen2-audio", "--category", "volume,pitch", "--source", "demo", "--method", "pclm",
                 "--scope", "all_linear", "--prompt-encoder", str(tiny_bert), "--pclm-stage1-steps", "2",
                 "--pclm-stage2-steps", "1", "--pclm-lr", "1e-2", "--train-limit", "4", "--grad-accum", "2",
                 "--skip-eval", "--num-workers", "0", "--no-progress", "--val-limit", "2", "--out", str(out)]) == 0
    info = json.loads((out / "training.json").read_text())
    assert info["pclm"]["prompt_encoder"] == str(tiny_bert) and "user's prompt text only" in info["pclm"]["prompt_embedding"]
    assert not any("prompt embedding" in d for d in info["not_paper_protocol"])
    lm = get_model("tiny-qwen2-audio", adapter=str(out))
    volume, pitch = (RowRenderer(c, "train", "demo") for c in ("volume", "pitch"))
    rows = [volume.row(volume.ids()[0]), pitch.row(pitch.ids()[0])]  # one source clip, the two questions
    with torch.no_grad():
        lm.model(**lm._encode(AnswerTask.of("default", "volume,pitch").prompts(rows)))
    alpha = pclm.mixer_of(lm.model)._site.window_alpha
    assert (alpha[0] - alpha[1]).abs().max() > 1e-4, alpha


def test_an_unloadable_prompt_encoder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = ["--model", "tiny-qwen2-audio", "--category", "volume", "--source", "demo", "--method", "pclm",
            "--scope", "all_linear", "--skip-eval", "--out", str(tmp_path / "x")]
    assert main([*base, "--prompt-encoder", "no such thing"]) == 2
    assert "neither a checkpoint directory nor a Hub id" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([*base, "--prompt-encoder", str(tmp_path / "empty"), "--num-workers", "0", "--max-steps", "1",
                 "--train-limit", "2", "--grad-accum", "2"]) == 2
    err = capsys.readouterr().err
    assert f"prompt encoder '{tmp_path / 'empty'}': cannot load it" in err and err.count("\n") == 1
