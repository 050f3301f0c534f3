"""Feature extraction on the tiny random Qwen2-Audio / AF3 models: positions, shapes, resume, the CLIs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.data import open_source
from harness.models.base import ModelError
from harness.models.registry import get_model
from probing import extract as ex
from probing import store
from probing.store import Extraction
from tests.helpers.probing import synthetic_extraction

ROWS = 3  # rows per model in the position tests


@pytest.fixture(scope="module")
def volume_rows() -> list[dict]:
    src = open_source("test", "demo")
    return list(src.rows("volume", src.units("volume")[:1]))[: ROWS * 8 : 8]


@pytest.fixture(scope="module")
def tiny_qwen():
    return get_model("tiny-qwen2-audio", fast_encoder=True, batch_size=8)


@pytest.mark.parametrize("name,fast", [("tiny-qwen2-audio", False), ("tiny-audio-flamingo-3", True)])
@pytest.mark.parametrize("variant", ["default", "audio_first"])
def test_positions_and_shapes_on_tiny_models(name: str, fast: bool, variant: str, volume_rows: list[dict]) -> None:
    model = get_model(name, fast_encoder=fast)
    from harness.prompts import get_variant

    prompts = [ex.probe_prompt(r, get_variant(variant)) for r in volume_rows]
    hs = model.hidden_states(prompts)
    for i, p in enumerate(prompts):
        ids = model._encode([p])["input_ids"][0].tolist()  # one prompt: no padding
        dec, pos = hs.decoder[i], hs.audio_positions[i]
        assert dec.shape == (model.model.config.text_config.num_hidden_layers + 1, len(ids), 64)
        # Audio positions are exactly the audio-token slots, one run per clip, as many as the tower yields.
        assert [ids[k] for k in pos] == [model.audio_token_id] * len(pos)
        assert ids.count(model.audio_token_id) == len(pos)
        assert np.all(np.diff(pos) == 1)
        # The adapter's hooked output is what layer 0 holds at those slots.
        assert hs.pre_llm_audio[i].shape == (len(pos), 64)
        np.testing.assert_allclose(dec[0][pos], hs.pre_llm_audio[i], atol=1e-6)
        assert hs.output_position[i] == len(ids) - 1
        tp = hs.text_positions[i]
        word = model.tokenizer.decode([ids[tp["attribute"]]]).strip()
        assert word == "volume"
        assert model.tokenizer.decode(ids[tp["query-2"] : tp["query-1"] + 1]).strip() == '".'
        feats = ex.clip_features(volume_rows[i]["audio"], ex.HiddenStates(
            [hs.pre_llm_audio[i]], [dec], [pos], [hs.output_position[i]], [tp]), [0, 2])
        n = dec.shape[0] - 1
        assert feats["mel/0"].shape == (2048,) and feats["pre_llm/0"].shape == (16 * 64,)
        assert feats[f"late_llm/{n}"].shape == (16 * 64,)
        assert sorted(k for k in feats if k.startswith("text/")) == [f"text/{k}" for k in range(n + 1)]
        np.testing.assert_array_equal(feats["pos_a4/2"], dec[2][pos[-1]])
        np.testing.assert_array_equal(feats["text/1"], dec[1][-1])
        assert {k.split("/")[0] for k in feats if k.endswith("/0") and k.startswith("pos_")} == {
            "pos_a1", "pos_a2", "pos_a3", "pos_a4", "pos_attribute", "pos_query-2", "pos_query-1"}


@pytest.mark.parametrize("name,fast", [("tiny-qwen2-audio", False), ("tiny-audio-flamingo-3", True)])
def test_compact_states_reduced_on_device_give_the_full_path_features(name: str, fast: bool,
                                                                      volume_rows: list[dict]) -> None:
    from harness.prompts import get_variant

    model = get_model(name, fast_encoder=fast, batch_size=8)
    assert model.supports_compact_hidden
    prompts = [ex.probe_prompt(r, get_variant("default")) for r in volume_rows]
    full, compact = model.hidden_items(prompts), model.hidden_items(prompts, compact=True)
    for row, f, c in zip(volume_rows, full, compact, strict=True):
        assert not c.decoder and not c.pre_llm_audio  # nothing per position beyond what a probe keeps
        layers = ex._layers_of(c, "all")
        assert layers == ex._layers_of(f, "all") == list(range(f.decoder[0].shape[0]))
        want, got = ex.clip_features(row["audio"], f, layers), ex.clip_features(row["audio"], c, layers)
        assert list(got) == list(want)
        for key in want:
            np.testing.assert_allclose(got[key], want[key], atol=1e-5, err_msg=key)
        host_full = f.decoder[0].nbytes + f.pre_llm_audio[0].nbytes
        host_compact = sum(v.nbytes for v in c.positions[0].values()) + sum(v.nbytes for v in c.pooled[0].values())
        assert host_compact * 2 < host_full, (host_compact, host_full)


def _settings(out: Path, split: str = "test", **kw) -> ex.ExtractSettings:
    base = {"model": "tiny-qwen2-audio", "configs": ["volume"], "split": split, "out": str(out), "source": "demo",
            "limit_units": 2, "units_per_shard": 1}
    return ex.ExtractSettings(**{**base, **kw})


class _Counting:
    """Wraps a model and counts the prompts it is asked for."""

    def __init__(self, model) -> None:
        self.model, self.prompts = model, 0
        self.supports_hidden_states = True
        self.name = model.name

    def hidden_items(self, prompts, **kw):
        self.prompts += len(prompts)
        return self.model.hidden_items(prompts, **kw)

    def __getattr__(self, name):  # the rest of the AudioLM protocol: the wrapped model's
        return getattr(self.model, name)


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path: Path, tiny_qwen, monkeypatch) -> None:
    settings = _settings(tmp_path)
    real = store.atomic_write_text
    calls = {"n": 0}

    def dying(path, text):  # the process dies after shard 1's file is written, before its manifest update
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        real(path, text)

    monkeypatch.setattr(store, "atomic_write_text", dying)
    counting = _Counting(tiny_qwen)
    with pytest.raises(KeyboardInterrupt):
        ex.run_extract(settings, model=counting)
    monkeypatch.setattr(store, "atomic_write_text", real)
    folder = tmp_path / "test" / "volume"
    assert sorted(p.name for p in folder.glob("shard-*")) == ["shard-00000.safetensors", "shard-00001.safetensors"]
    assert counting.prompts == 48
    ex.run_extract(settings, model=counting)
    assert counting.prompts == 72  # only the unit that was not listed was redone
    fs = Extraction(tmp_path).open("test", "volume")
    src = open_source("test", "demo")
    want = [cid for u in src.units("volume")[:2] for cid in u.clip_ids]
    assert fs.rows["benchmark_clip_id"] == want  # every row once, in dataset order
    assert fs.manifest["complete"] and len(fs.manifest["shards"]) == 2
    assert fs.load("text/2").shape == (48, 64)
    # The resumed unit's features are what the model gives for its rows.
    rows = list(src.rows("volume", src.units("volume")[1:2]))[:2]
    from harness.prompts import get_variant

    hs = tiny_qwen.hidden_states([ex.probe_prompt(r, get_variant("default")) for r in rows])
    np.testing.assert_allclose(fs.load("text/2")[24:26], np.stack([d[2][-1] for d in hs.decoder]), atol=2e-3)
    # Resuming under other settings is refused.
    with pytest.raises(store.StoreError, match="another extraction"):
        ex.run_extract(replace(settings, layers="all"), model=tiny_qwen)


def test_adapter_extraction_records_and_changes_features(tmp_path: Path, tiny_qwen) -> None:
    from peft import LoraConfig, get_peft_model

    from harness.models.tiny import build_tiny

    base, _ = build_tiny("qwen2-audio")
    lora = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    settings = _settings(tmp_path / "run", limit_units=1, adapter=str(tmp_path / "adapter"),
                         model_args={"fast_encoder": True})
    (path,) = ex.run_extract(settings)
    manifest = json.loads(path.read_text())
    assert manifest["adapter"] == str(tmp_path / "adapter")
    tuned = Extraction(tmp_path / "run").open("test", "volume")
    from harness.prompts import get_variant

    src = open_source("test", "demo")
    rows = list(src.rows("volume", src.units("volume")[:1]))[:2]
    plain = tiny_qwen.hidden_states([ex.probe_prompt(r, get_variant("default")) for r in rows])
    plain_text = np.stack([d[2][-1] for d in plain.decoder])
    assert np.abs(tuned.load("text/2")[:2] - plain_text).max() > 1e-2  # the adapter changed the model


def test_train_and_report_clis(tmp_path: Path, capsys) -> None:
    from probing import report, train

    synthetic_extraction(tmp_path)
    assert train.main([str(tmp_path), "--epochs", "60", "--batch-size", "16"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    summary = json.loads(last)
    assert list(summary)[:3] == ["mel/0", "pre_llm/0", "late_llm/2"]  # pipeline order
    assert set(summary["mel/0"]) == {"volume", "noise"}
    assert summary["text/2"]["volume"] > 0.8 and summary["text/0"]["volume"] < 0.8
    results = json.loads((tmp_path / "probes" / "results.json").read_text())
    assert results["probes"]["mel/0"]["volume"]["per_direction"]["increase"]["n"] == 36
    directions = json.loads((tmp_path / "probes" / "directions.json").read_text())
    # volume's direction lives in dim 0, noise's in dim 1: nearly orthogonal.
    assert directions["text/2"]["configs"] == ["volume", "noise"] and directions["text/2"]["n_pairs"] == 1
    assert abs(directions["text/2"]["mean_signed"]) < 0.5
    harness_run = tmp_path / "eval"
    harness_run.mkdir()
    (harness_run / "results.json").write_text(json.dumps({"results": {
        "volume": {"accuracy": 0.5, "accuracy_ci_low": 0.4, "accuracy_ci_high": 0.6},
        "noise": {"accuracy": 0.48, "accuracy_ci_low": 0.38, "accuracy_ci_high": 0.58}},
        "config": {"model": "synthetic", "model_args": {}, "prompt_variant": "default"}}))
    text = report.make_report(tmp_path, harness_run, layer="text/2")
    out = tmp_path / "probes" / "report"
    for name in ("fig2_stages.png", "fig3_layers.png", "positions.png", "cosine_text_2.png", "probe_accuracy.csv",
                 "knows_vs_says.csv", "positions.csv", "report.md"):
        assert (out / name).stat().st_size > 0, name
    assert "| volume | 50.0 |" in text
    with pytest.raises(ValueError, match="no direction alignment"):
        report.make_report(tmp_path, layer="text/9")
    # Speaker-grouped CV (3 train speakers), on a subset of representations.
    assert train.main([str(tmp_path), "--epochs", "2", "--cv", "3", "--representations", "text/*"]) == 0
    cv = json.loads((tmp_path / "probes" / "results.json").read_text())["cross_validation"]
    assert cv["group_by"]["volume"] == "speaker_id" and set(cv["accuracy"]) == {"text/0", "text/1", "text/2"}
    capsys.readouterr()
    assert train.main([str(tmp_path), "--epochs", "1", "--cv", "9"]) == 2
    assert "needs at least 9 groups" in capsys.readouterr().err


def test_bad_inputs_name_what_is_wrong(tmp_path: Path, tiny_qwen) -> None:
    with pytest.raises(ValueError, match="did you mean"):
        ex.run_extract(_settings(tmp_path, model="tiny-qwen-audio"))
    with pytest.raises(ValueError, match="does not expose hidden states"):
        ex.run_extract(_settings(tmp_path, model="always-increase"))
    with pytest.raises(FileNotFoundError, match="probing.train"):
        from probing import report

        report.make_report(tmp_path)
    from probing import train

    with pytest.raises(store.StoreError, match="not found"):
        train.train_run(tmp_path / "missing")
    # A clip that fails in the model becomes an error row, not a crash, and is listed in the manifest.

    class Failing(_Counting):
        def hidden_items(self, prompts, **kw):
            items = self.model.hidden_items(prompts, **kw)
            return [ModelError("boom", p.clip_id) if i == 0 else it for i, (p, it) in enumerate(zip(prompts, items, strict=True))]

    (path,) = ex.run_extract(_settings(tmp_path / "f", limit_units=1), model=Failing(tiny_qwen))
    manifest = json.loads(path.read_text())
    assert len(manifest["errors"]) == 1 and manifest["errors"][0]["error"] == "boom"
    assert manifest["shards"][0]["n"] == 23
