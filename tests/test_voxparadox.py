"""VoxParadox-lite: vendored bases, held-out splits, the signal measurements, items, the build and the eval."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad_dataset import voxparadox as vp
from vocalgrad_dataset.voxparadox_items import build_items, measure

SR = 16000


def _tone(f0: float, sec: float, amp: float = 0.3, end_f0: float | None = None) -> np.ndarray:
    """A harmonic tone (5 harmonics) gliding from f0 to end_f0: an independent test signal."""
    t = np.arange(int(sec * SR)) / SR
    f = np.linspace(f0, end_f0 or f0, len(t))
    phase = 2 * np.pi * np.cumsum(f) / SR
    return (amp * sum(np.sin(k * phase) / k for k in range(1, 6)) / 2).astype(np.float32)


def test_vendored_bases_match_their_hashes_and_budget() -> None:
    with open(vp.BASES_TSV, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    total = 0
    for r in rows:
        data = (vp.BASES_DIR / f"{r['id']}.wav").read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"], r["id"]
        total += len(data)
    info = sf.info(str(vp.BASES_DIR / f"{rows[0]['id']}.wav"))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert total <= 30e6 and len(rows) == len(list(vp.BASES_DIR.glob("*.wav")))


def test_test_voices_and_wordings_are_held_out() -> None:
    split_of = {s: {b.voice.variant for b in vp.bases().values() if b.voice.split == s} for s in ("test", "train")}
    assert split_of["test"] == {"m7", "m8", "f5"} and not split_of["test"] & split_of["train"]
    texts = {s: {b.script.text for b in vp.bases().values() if b.script.split == s} for s in ("test", "train")}
    assert not texts["test"] & texts["train"]
    assert all(b.voice.split == b.script.split for b in vp.bases().values())


@pytest.mark.parametrize(("task", "audio", "expected"), [
    ("pitch", vp.join([_tone(200, 1), _tone(100, 1), _tone(140, 1)]), "high-low-medium"),
    ("volume", vp.join([_tone(150, 1, 0.05), _tone(150, 1, 0.5), _tone(150, 1, 0.15)]), "quiet-loud-medium"),
    ("speed", vp.join([_tone(150, 1.0), _tone(150, 2.0), _tone(150, 0.6)]), "medium-slow-fast"),
    ("gender", _tone(115, 1.5), "male"),
    ("gender", _tone(230, 1.5), "female"),
    ("intonation", _tone(150, 1.5, end_f0=230), "rising"),
    ("intonation", _tone(200, 1.5, end_f0=130), "falling"),
    ("counting", vp.join([_tone(110, 0.8), _tone(180, 0.8), _tone(110, 0.8)]), "two"),
    ("identity", vp.join([_tone(120, 0.8), _tone(200, 0.8), _tone(121, 0.8), _tone(160, 0.8)]), "segment 3"),
])  # fmt: skip
def test_measurements_read_known_signals(task: str, audio: np.ndarray, expected: str) -> None:
    assert measure(task, audio) == expected


def _claims(item: vp.Item) -> list[str]:
    """The label each segment's words assert, read from the script table (what is said)."""
    said = {s.text: s for s in vp.SCRIPTS}
    return [said[t].label for t in item.script.split(" | ") if t in said]


@pytest.mark.parametrize("task", vp.TASKS)
def test_items_assert_the_wrong_label_and_carry_the_true_one(task: str) -> None:
    items = build_items(task, "test", 2)
    for it in items:
        assert it.answer != it.adversarial and {it.answer, it.adversarial} <= set(it.options)
        assert 2 <= len(it.options) <= 4 and measure(task, it.audio) == it.answer == it.measured
        claims = _claims(it)
        if task in vp.PATTERN_TASKS:
            assert "-".join(claims) == it.adversarial  # each part claims the level of another order
        elif task in ("gender", "intonation"):
            assert claims[-1] == it.adversarial or claims[0] == it.adversarial
        elif task == "counting":
            assert set(claims) == {it.adversarial}  # every turn claims the same wrong count
        else:  # identity: the segment claiming "I am the first speaker again" is the adversarial one
            assert claims[int(it.adversarial.split()[1]) - 1] == "same"  # segment k is claims[k - 1]
            assert claims[int(it.answer.split()[1]) - 1] == "different"
    again = build_items(task, "test", 2)
    assert [i.id for i in again] == [i.id for i in items]
    assert all(np.array_equal(a.audio, b.audio) for a, b in zip(items, again, strict=True))


def test_reversed_control_reverses_audio_and_order() -> None:
    (item,) = build_items("pitch", "test", 1)
    rev = vp.reverse_item(item)
    assert np.array_equal(rev.audio, item.audio[::-1])
    assert rev.answer == "-".join(reversed(item.answer.split("-"))) == measure("pitch", rev.audio)
    with pytest.raises(ValueError, match="no time-reversed control"):
        vp.reverse_item(build_items("identity", "test", 1)[0])


def test_frozen_ids_match_a_fresh_build_prefix() -> None:
    for task in vp.TASKS:
        frozen = vp.frozen_ids(task, "test")
        if frozen is None:
            continue
        assert len(frozen) == vp.SPLIT_SIZES["test"] >= 100
        assert [i.id for i in build_items(task, "test", 2)] == frozen[:2]


def test_build_load_and_eval_through_both_loaders(tmp_path: Path) -> None:
    from harness.runner import EvalSettings, run_eval
    from vocalgrad_dataset.voxparadox_export import build_voxparadox

    out = tmp_path / "D"
    for config in ("voxparadox-gender", "voxparadox-pitch"):
        build_voxparadox(config, ["test"], out, limit=4)
    import datasets

    ds = datasets.load_dataset(str(out), "voxparadox-pitch", split="test")
    assert {"question", "options", "answer", "adversarial", "task"} <= set(ds.column_names) and len(ds) == 4
    configs = ["voxparadox-gender", "voxparadox-pitch"]
    a, b = tmp_path / "a", tmp_path / "b"
    run_eval(EvalSettings("mcq-signal-oracle", configs, str(a), dataset=str(out), preflight=False))
    run_eval(EvalSettings("mcq-signal-oracle", configs, str(b), dataset=str(out), preflight=False,
                          mcq_columns="audio=audio,question=question,options=options,answer=answer,"
                                      "adversarial=adversarial,task=task,id=benchmark_clip_id"))
    res = json.loads((a / "results.json").read_text())
    assert res["results"]["voxparadox-pitch"]["acc,none"] == 1.0 and res["results"]["voxparadox-pitch"]["ala,none"] == 0.0
    for c in configs:
        pa = [(r["benchmark_clip_id"], r["pred"]) for r in map(json.loads, (a / f"samples_{c}.jsonl").read_text().splitlines())]
        pb = [(r["benchmark_clip_id"], r["pred"]) for r in map(json.loads, (b / f"samples_{c}.jsonl").read_text().splitlines())]
        assert pa == pb and len(pa) == 4


@pytest.mark.parametrize("task", vp.TASKS)
def test_what_the_words_claim_is_the_adversarial_label(task: str) -> None:
    from harness.models.baselines import TranscriptReader

    for item in build_items(task, "test", 2):
        transcript = ". ".join(item.script.split(" | ")) + "."  # what is said, as a transcript punctuates it
        assert vp.claimed_label(task, transcript) == item.adversarial
        assert TranscriptReader.read(transcript, f"voxparadox-{task}", item.options) == item.adversarial
