"""VoxParadox-lite: vendored bases, held-out splits, the signal measurements, items, the build and the eval."""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad_dataset import voxparadox as vp
from vocalgrad_dataset.voxparadox.items import build_items, measure, signal_verified

ROOT = Path(__file__).resolve().parents[1]

SR = 16000


def _tone(f0: float, sec: float, amp: float = 0.3, end_f0: float | None = None) -> np.ndarray:
    """A harmonic tone (5 harmonics) gliding from f0 to end_f0: an independent test signal."""
    t = np.arange(int(sec * SR)) / SR
    f = np.linspace(f0, end_f0 or f0, len(t))
    phase = 2 * np.pi * np.cumsum(f) / SR
    return (amp * sum(np.sin(k * phase) / k for k in range(1, 6)) / 2).astype(np.float32)


def _base_rows() -> list[dict[str, str]]:
    with open(vp.BASES_TSV, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_vendored_bases_match_their_hashes_and_budget() -> None:
    rows = _base_rows()
    total = 0
    for r in rows:
        data = (vp.BASES_DIR / f"{r['id']}.wav").read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"], r["id"]
        total += len(data)
    info = sf.info(str(vp.BASES_DIR / f"{rows[0]['id']}.wav"))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert total <= 30e6 and len(rows) == len(list(vp.BASES_DIR.glob("*.wav")))


def test_every_base_was_heard_right_by_whisper() -> None:
    """bases.tsv holds each base's Whisper tiny.en transcript, and it equals the script after normalisation."""
    scripts = {s.id: s.text for s in vp.SCRIPTS}
    rows = _base_rows()
    assert len(rows) >= 300
    for r in rows:
        assert r["text"] == scripts[r["script"]], r["id"]
        assert r["asr"] and vp.normalize_text(r["asr"]) == vp.normalize_text(r["text"]), (r["id"], r["asr"])
        assert (r["asr_ok"], float(r["wer"])) == ("1", 0.0), r["id"]


def test_normalisation_and_word_error_rate() -> None:
    assert vp.normalize_text("I'm speaking QUICKLY!") == vp.normalize_text("I am speaking quickly.") == "i am speaking quickly"
    assert vp.normalize_text("We are 4 people.") == "we are four people"
    assert vp.word_error_rate("I talk first.", "I speak quickly.") == pytest.approx(2 / 3)
    assert vp.word_error_rate("I'm a man", "I am a man.") == 0.0
    assert vp.word_error_rate("", "I am a man.") == 1.0


def _contour(f0s: tuple[float, ...], sec: float) -> np.ndarray:
    """A harmonic tone whose F0 moves linearly through `f0s` (equal time between them)."""
    t = np.arange(int(sec * SR)) / SR
    f = np.interp(t, np.linspace(0, t[-1], len(f0s)), f0s)
    phase = 2 * np.pi * np.cumsum(f) / SR
    return (0.3 * sum(np.sin(k * phase) / k for k in range(1, 6)) / 2).astype(np.float32)


@pytest.mark.parametrize(("task", "audio", "expected"), [
    ("pitch", vp.join([_tone(200, 1), _tone(100, 1), _tone(140, 1)]), "high-low-medium"),
    ("volume", vp.join([_tone(150, 1, 0.05), _tone(150, 1, 0.5), _tone(150, 1, 0.15)]), "low-high-medium"),
    ("speed", vp.join([_tone(150, 1.0), _tone(150, 2.0), _tone(150, 0.6)]), "medium-low-high"),
    ("gender", _tone(115, 1.5), "Male"),
    ("gender", _tone(230, 1.5), "Female"),
    ("intonation", _tone(150, 1.5, end_f0=230), "Rising intonation"),
    ("intonation", _tone(200, 1.5, end_f0=130), "Falling intonation"),
    ("intonation", _contour((150, 220, 130), 1.8), "Rise-fall intonation"),
    ("intonation", _contour((200, 130, 210), 1.8), "Fall-rise intonation"),
    ("intonation", _tone(150, 1.5), None),  # flat: no contour
    ("counting", vp.join([_tone(110, 0.8), _tone(180, 0.8), _tone(110, 0.8)]), "2 people"),
    ("counting", vp.join([_tone(110, 0.8), _tone(111, 0.8), _tone(110, 0.8), _tone(112, 0.8)]), "1 person"),
    ("counting", vp.join([_tone(100, 0.6), _tone(140, 0.6), _tone(200, 0.6), _tone(260, 0.6)]), "4 people"),
    ("identity", vp.join([_tone(120, 0.8), _tone(200, 0.8), _tone(121, 0.8), _tone(160, 0.8)]), "the third person"),
    ("identity", vp.join([_tone(120, 0.7), _tone(200, 0.7), _tone(160, 0.7), _tone(95, 0.7), _tone(119, 0.7)]),
     "the fifth person"),
])  # fmt: skip
def test_measurements_read_known_signals(task: str, audio: np.ndarray, expected: str | None) -> None:
    assert measure(task, audio) == expected


def _claims(item: vp.Item) -> list[str]:
    """The label each segment's words assert, read from the script table (what is said; the item's task's
    sentences first, as two tasks may share a sentence)."""
    said = {s.text: s.label for s in vp.SCRIPTS} | {s.text: s.label for s in vp.SCRIPTS if s.task == item.task}
    return [said[t] for t in item.script.split(" | ")]


@pytest.mark.parametrize("task", vp.TASKS)
def test_items_assert_the_wrong_label_and_carry_the_true_one(task: str) -> None:
    items = build_items(task, "test", 2)
    for it in items:
        assert it.answer != it.adversarial and {it.answer, it.adversarial} <= set(it.options)
        assert len(it.options) == (2 if task == "gender" else 4) and measure(task, it.audio) == it.answer == it.measured
        claims = _claims(it)
        if task in vp.PATTERN_TASKS:
            assert vp.release_label(task, "-".join(claims)) == it.adversarial  # each part claims another level
        elif task in ("gender", "intonation"):
            assert vp.release_label(task, claims[-1] if task == "intonation" else next(
                c for c in claims if c in ("male", "female"))) == it.adversarial
        elif task == "counting":  # one turn claims the wrong count, the others say neutral sentences
            assert [vp.release_label(task, c) for c in claims if c in ("one", "four")] == [it.adversarial]
            assert len(claims) == 4
        else:  # identity: the clip claiming "I was the first voice" is the adversarial one (clip k is claims[k - 1])
            labels = vp.LABELS["identity"]
            assert claims[labels.index(it.adversarial) + 1] == "same"
            assert claims[labels.index(it.answer) + 1] == "different"
    again = build_items(task, "test", 2)
    assert [i.id for i in again] == [i.id for i in items] and [i.options for i in again] == [i.options for i in items]
    assert all(np.array_equal(a.audio, b.audio) for a, b in zip(items, again, strict=True))


def test_reversed_control_reverses_audio_and_order() -> None:
    (item,) = build_items("pitch", "test", 1)
    rev = vp.reverse_item(item)
    assert np.array_equal(rev.audio, item.audio[::-1])
    assert rev.answer == "-".join(reversed(item.answer.split("-"))) == measure("pitch", rev.audio)
    with pytest.raises(ValueError, match="no time-reversed control"):
        vp.reverse_item(build_items("identity", "test", 1)[0])


def test_intonation_has_a_reversed_control_where_a_rise_falls() -> None:
    backwards = {"Rising intonation": "Falling intonation", "Falling intonation": "Rising intonation",
                 "Rise-fall intonation": "Rise-fall intonation", "Fall-rise intonation": "Fall-rise intonation"}
    for item in build_items("intonation", "test", 8):
        rev = vp.reverse_item(item)
        assert rev.answer == backwards[item.answer] == measure("intonation", rev.audio)
        assert sorted(rev.options) == sorted(backwards[o] for o in item.options)


@pytest.mark.parametrize("split", ["test", "train"])
def test_frozen_lists_and_a_fresh_build_agree(split: str) -> None:
    """Every task has its frozen list (the split's size, distinct ids, a Whisper WER per item); the first
    items built now have the frozen PCM sha256s, and they use only their split's voices and wordings."""
    for task in vp.TASKS:
        lines = (vp.IDS_DIR / f"{task}-{split}.txt").read_text(encoding="utf-8").splitlines()
        entries = [line.split("\t") for line in lines]
        assert len({e[0] for e in entries}) == len(entries) == vp.SPLIT_SIZES[split], task
        # every item, test and train, was transcribed by Whisper tiny.en: the WER of its transcript (never "-")
        assert all(len(e) == 3 and len(e[1]) == 64 for e in entries)
        # ... and it equals the item's script after normalisation, on every task (the exact rule)
        assert {e[2] for e in entries} == {"0.000"}, task
        built = build_items(task, split, 2)
        assert [(i.id, vp.pcm_sha256(i.audio)) for i in built] == [tuple(e[:2]) for e in entries[:2]]
        for item in built:
            assert {vp.bases()[b].voice.split for b in item.bases} == {vp.bases()[b].script.split for b in item.bases} == {split}


def test_the_appended_range_tier_keeps_every_earlier_item_and_builds_to_its_frozen_bits() -> None:
    """Range's middle-version candidates (F0 range x0.33 / x2.2) come after all two-version ones, so no earlier
    item moved; the first of them kept in train builds to its frozen sha256."""
    from vocalgrad_dataset.voxparadox.items import candidates

    first_new, index, two_version_candidates = "vpl-range-train-1655bd46e2", 280, 480
    order = [c.id for c in candidates("range", "train")]
    assert order.index(first_new) == two_version_candidates
    frozen = [line.split("\t") for line in (vp.IDS_DIR / "range-train.txt").read_text(encoding="utf-8").splitlines()]
    assert frozen[index][0] == first_new
    assert all(order.index(row[0]) < two_version_candidates for row in frozen[:index])  # all earlier: first versions
    test_ids = [line.split("\t")[0] for line in (vp.IDS_DIR / "range-test.txt").read_text(encoding="utf-8").splitlines()]
    test_order = {c.id: k for k, c in enumerate(candidates("range", "test"))}
    assert max(test_order[i] for i in test_ids) < 300  # test uses none of the new tier
    item = next(c for c in candidates("range", "train") if c.id == first_new).make()
    assert vp.pcm_sha256(item.audio) == frozen[index][1]
    assert measure("range", item.audio) == item.answer != item.adversarial
    assert len(item.parts) == 3


AVX512_CHECK = """
import sys
from vocalgrad_dataset import voxparadox as vp
from vocalgrad_dataset.voxparadox.items import build_items
for task in vp.TASKS:
    for item in build_items(task, "test", 6):
        print(task, item.id, vp.pcm_sha256(item.audio))
"""


def test_items_are_the_same_bits_without_numpys_avx512_kernels() -> None:
    """numpy's float64 log2/log10/power take AVX-512 (SVML) kernels where the CPU has them, and their last bits
    differ; the frozen sha256s must hold on CPUs with and without AVX-512 (CI's may lack it)."""
    from numpy._core._multiarray_umath import __cpu_features__

    avx512 = [f for f, on in __cpu_features__.items() if on and f.startswith("AVX512")]
    if not avx512:
        pytest.skip("this CPU has no AVX-512: numpy already runs the kernels the frozen lists were checked with")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NPY_DISABLE_CPU_FEATURES": " ".join(avx512)}
    proc = subprocess.run([sys.executable, "-c", AVX512_CHECK], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = [line.split() for line in proc.stdout.splitlines()]
    assert got == [[t, *entry] for t in vp.TASKS for entry in vp.frozen_entries(t, "test")[:6]]


def test_train_and_test_are_disjoint_in_ids_voices_and_wordings() -> None:
    def used(split: str) -> tuple[set[str], set[str]]:
        ids = {i for t in vp.TASKS for i in vp.frozen_ids(t, split) or []}
        return ids, {i.split("-")[2] for i in ids}

    test_ids, test_splits = used("test")
    train_ids, train_splits = used("train")
    assert not test_ids & train_ids and test_splits == {"test"} and train_splits <= {"train"}
    voices = {s: {v.variant for v in vp.voices_of(s)} for s in ("test", "train")}
    assert not voices["test"] & voices["train"]
    texts = {s: {sc.text for sc in vp.SCRIPTS if sc.split == s} for s in ("test", "train")}
    assert not texts["test"] & texts["train"]


def test_a_whole_frozen_task_rebuilds_exactly() -> None:
    from vocalgrad_dataset.voxparadox.export import config_items

    items = config_items("voxparadox-gender", "test")  # raises when an id or a sha256 differs from the list
    assert [i.id for i in items] == vp.frozen_ids("gender", "test") and len(items) >= 100
    assert all(i.measured == i.answer != i.adversarial for i in items)


def test_build_load_and_eval_through_both_loaders(tmp_path: Path) -> None:
    from harness.runner import EvalSettings, run_eval
    from vocalgrad_dataset.voxparadox.export import build_voxparadox

    out = tmp_path / "D"
    for config in ("voxparadox-gender", "voxparadox-pitch"):
        build_voxparadox(config, ["test"], out, limit=4)
    import datasets

    ds = datasets.load_dataset(str(out), "voxparadox-pitch", split="test")
    assert {"question", "options", "answer", "adversarial", "task"} <= set(ds.column_names) and len(ds) == 4
    assert ds["task_name"] == ["pitch_comparison"] * 4  # the release's name of the task (its dataset card)
    configs = ["voxparadox-gender", "voxparadox-pitch"]
    a, b = tmp_path / "a", tmp_path / "b"
    run_eval(EvalSettings("mcq-signal-oracle", configs, str(a), dataset=str(out), preflight=False))
    run_eval(EvalSettings("mcq-signal-oracle", configs, str(b), dataset=str(out), preflight=False,
                          kind="mcq", columns="audio=audio,question=question,options=options,answer=answer,"
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


@pytest.mark.parametrize(("task", "transcript", "expected"), [
    ("pitch", "My voice is high. My voice is low. My voice is medium.", "high-low-medium"),
    ("pitch", "This part is low. This part is medium. This part is high.", "low-medium-high"),
    ("pitch", "My voice is high. My voice is low.", None),  # two claims are no order
    ("volume", "I speak loudly. I speak normally. I speak quietly.", "high-medium-low"),
    ("volume", "This part is quiet. This part is loud. This part is normal.", "low-high-medium"),
    ("speed", "I'm speaking quickly. I'm speaking slowly. I'm speaking normally.", "high-low-medium"),
    ("speed", "I speak slowly. I speak quickly. I speak normally.", "low-high-medium"),
    ("range", "I sound excited. I sound boring. I sound calm.", "high-low-medium"),
    ("range", "I speak in one tone. I speak with lots of melody. I speak with a bit of melody.", "low-high-medium"),
    ("gender", "I'm a man. My voice is low.", "Male"),
    ("gender", "This part is loud. I am a female speaker.", "Female"),
    ("intonation", "I spoke first. My voice keeps going down every time.", "Falling intonation"),
    ("intonation", "This part is loud. My voice is going up all the time.", "Rising intonation"),
    ("counting", "We are 4 people talking. We are 4 people talking.", "4 people"),  # Whisper writes digits
    ("counting", "I am alone here. I'm alone here.", "1 person"),
    ("identity", "My voice is medium. I never spoke before. I spoke first.", "the third person"),
    ("identity", "This part is medium. I was the first voice. I am a new speaker. This part is medium.", "the second person"),
    ("identity", "My voice is medium. I spoke first. I spoke first.", None),
])  # fmt: skip
def test_claimed_label_reads_the_new_wordings(task: str, transcript: str, expected: str | None) -> None:
    from harness.models.baselines import TranscriptReader

    assert vp.claimed_label(task, transcript) == expected
    if expected is not None:  # the transcript reader answers what the words claim
        options = [expected, "the fourth person"] if task == "identity" else [expected, "other"]
        assert TranscriptReader.read(transcript, f"voxparadox-{task}", options) == expected


def test_whisper_rule_accepts_the_script_and_rejects_a_mishearing() -> None:
    (item,) = build_items("gender", "test", 1)
    said = ". ".join(item.script.split(" | ")) + "."
    assert vp.whisper_accepts(item, said) and vp.whisper_accepts(item, said.replace("I am", "I'm"))
    wrong_claim = "female" if item.adversarial == "Male" else "male"
    assert not vp.whisper_accepts(item, said.replace(f" {item.adversarial.lower()}", f" {wrong_claim}"))
    assert not vp.whisper_accepts(item, said + " Thanks.")  # the claim survives, the words do not
    (glided,) = build_items("intonation", "test", 1)  # a dropped tail word fails it too, on every task
    heard = ". ".join(glided.script.split(" | ")) + "."
    assert vp.whisper_accepts(glided, heard) and not vp.whisper_accepts(glided, heard.replace(" all the time", ""))


def test_freeze_keeps_what_whisper_hears_right_and_resumes_from_its_cache(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("freeze", Path(__file__).parents[1] / "scripts" / "freeze_voxparadox_ids.py")
    freeze = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(freeze)  # type: ignore[union-attr]

    candidates = list(itertools.islice(signal_verified("gender", "test"), 12))
    heard_right = {hashlib.sha256(freeze.served(i.audio).tobytes()).hexdigest(): ". ".join(i.script.split(" | "))
                   for i in candidates[::2]}
    expected, per_label = [], {"Female": 0, "Male": 0}  # heard right, at most 2 of a label in 4 (ceil(4 / 2))
    for item in candidates[::2]:
        if per_label[item.answer] < 2 and len(expected) < 4:
            per_label[item.answer] += 1
            expected.append(item.id)

    class Ear:  # hears every other candidate right, mishears the rest
        def __init__(self) -> None:
            self.calls = 0

        def transcribe(self, clips: list) -> list[str]:
            self.calls += 1
            return [heard_right.get(hashlib.sha256(c.array.tobytes()).hexdigest(), "I talk first.") for c in clips]

    cache = freeze.TranscriptCache(tmp_path / "t.tsv")
    lines = freeze.freeze_task("gender", "test", 4, cache, Ear(), batch=6)
    assert [line.split("\t")[0] for line in lines] == expected
    assert all(line.endswith("\t0.000") for line in lines)
    again = Ear()
    resumed = freeze.freeze_task("gender", "test", 4, freeze.TranscriptCache(tmp_path / "t.tsv"), again, batch=6)
    assert resumed == lines and again.calls == 0


def test_freeze_fills_from_any_label_only_when_the_balanced_candidates_run_out(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("freeze", Path(__file__).parents[1] / "scripts" / "freeze_voxparadox_ids.py")
    freeze = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(freeze)  # type: ignore[union-attr]
    pool = list(itertools.islice(signal_verified("gender", "test"), 16))
    female = [i for i in pool if i.answer == "Female"]
    assert len(female) >= 4
    heard_right = {hashlib.sha256(freeze.served(i.audio).tobytes()).hexdigest(): ". ".join(i.script.split(" | "))
                   for i in female}

    class Ear:  # hears the female voices right, every male one wrong: the balanced pass keeps 2 of 4
        def transcribe(self, clips: list) -> list[str]:
            return [heard_right.get(hashlib.sha256(c.array.tobytes()).hexdigest(), "I talk first.") for c in clips]

    lines = freeze.freeze_task("gender", "test", 4, freeze.TranscriptCache(tmp_path / "t.tsv"), Ear(), batch=4)
    assert [line.split("\t")[0] for line in lines] == [i.id for i in female[:4]]


@pytest.mark.parametrize("task", ["identity", "counting", "pitch"])
def test_candidate_ids_are_unique(task: str) -> None:
    from vocalgrad_dataset.voxparadox.items import candidates

    ids = [c.id for c in candidates(task, "test")]
    assert len(ids) == len(set(ids)) > 100


def test_rehash_refuses_a_builder_whose_items_are_not_the_frozen_ones(tmp_path: Path, monkeypatch) -> None:
    import importlib.util
    from types import SimpleNamespace

    import vocalgrad_dataset.voxparadox.items as items_module

    spec = importlib.util.spec_from_file_location("freeze", Path(__file__).parents[1] / "scripts" / "freeze_voxparadox_ids.py")
    freeze = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(freeze)  # type: ignore[union-attr]
    monkeypatch.setattr(freeze, "IDS_DIR", tmp_path)
    (tmp_path / "pitch-test.txt").write_text("a\told\t0.000\nb\told\t0.250\n", encoding="utf-8")
    audio = np.zeros(8, dtype=np.float32)

    monkeypatch.setattr(items_module, "build_items", lambda task, split: [SimpleNamespace(id=i, audio=audio) for i in "ab"])
    rows = [line.split("\t") for line in freeze.rehash_task("pitch", "test")]
    assert [(r[0], r[2]) for r in rows] == [("a", "0.000"), ("b", "0.250")]
    assert rows[0][1] == freeze.pcm_sha256(audio) != "old"

    monkeypatch.setattr(items_module, "build_items", lambda task, split: [SimpleNamespace(id=i, audio=audio) for i in "ac"])
    with pytest.raises(ValueError, match=r"voxparadox-pitch test: .*pitch-test.txt from item 1 on"):
        freeze.rehash_task("pitch", "test")


RELEASE_EXAMPLES = json.loads((ROOT / "tests" / "data" / "voxparadox_release_examples.json").read_text(encoding="utf-8"))


def _release_example(task: str) -> dict:
    (example,) = [e for e in RELEASE_EXAMPLES["examples"] if e["task_name"] == vp.RELEASE_TASKS[task]]
    return example


def _option_shape(task: str, option: str) -> object:
    """What an option text looks like, whatever its value: the shape two wordings must share."""
    import re

    if task in vp.PATTERN_TASKS:
        return tuple(sorted(option.split("-")))  # an order of low, medium, high
    if task == "counting":
        return re.sub(r"^\d+ ", "N ", option).replace("person", "people")  # "N people" / "1 person"
    return option  # gender, intonation, identity: the closed label set itself


@pytest.mark.parametrize("task", vp.TASKS)
def test_lite_asks_and_offers_as_the_release_s_published_examples(task: str) -> None:
    """The release's ten published examples (tests/data/voxparadox_release_examples.json, copied from its
    project page): lite's question is the release's word for word, it offers as many options, each shaped as the
    release writes them, and the release's own true and adversarial labels are among lite's labels."""
    example = _release_example(task)
    release_shapes = {_option_shape(task, o) for o in example["options"]}
    for item in build_items(task, "test", 3):
        assert item.question == example["question"]
        assert len(item.options) == len(example["options"])
        assert {_option_shape(task, o) for o in item.options} <= release_shapes
    assert {example["true"], *example["adversarial"]} <= set(vp.LABELS[task])


def _frozen_test_options(task: str) -> list[tuple[str, list[str]]]:
    """(answer, options) of every frozen test item, options as the build offers them (no audio made)."""
    from vocalgrad_dataset.voxparadox.items import frozen_candidates, plan_options

    cands = frozen_candidates(task, "test", vp.frozen_ids(task, "test"))
    plan = plan_options(task, cands)
    return [(c.answer, plan[c.id]) for c in cands]


@pytest.mark.parametrize("task", vp.TASKS)
def test_no_answerer_that_ignores_the_audio_beats_chance(task: str) -> None:
    """On the frozen test items, answering "A" every time, or the first of the task's labels that is offered, or
    (where every item offers all labels) always one label scores within 2 points of uniform chance."""
    rows = _frozen_test_options(task)
    chance = float(np.mean([1 / len(options) for _, options in rows]))
    always_a = np.mean([options[0] == answer for answer, options in rows])
    first_label = np.mean([min(options, key=vp.LABELS[task].index) == answer for answer, options in rows])
    assert abs(always_a - chance) <= 0.02 and abs(first_label - chance) <= 0.02, (always_a, first_label, chance)
    if all(len(options) == len(vp.LABELS[task]) for _, options in rows):
        for label in vp.LABELS[task]:
            assert abs(np.mean([answer == label for answer, _ in rows]) - chance) <= 0.02, label


def test_served_rows_offer_the_options_of_the_build() -> None:
    """A row served without a build (iter_config_items, by id) offers the options of the built item."""
    from vocalgrad_dataset.voxparadox.export import iter_config_items

    built = build_items("counting", "test", 5)
    served = list(iter_config_items("voxparadox-counting", "test", ids=[built[4].id, built[1].id]))
    assert [(i.id, i.options) for i in served] == [(built[1].id, built[1].options), (built[4].id, built[4].options)]
