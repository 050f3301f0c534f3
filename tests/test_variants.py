"""SPEC §4-§5 variants: beep sources to the sample, id hashes, formats, alternative-source loaders, few-shot,
the answer parsers per vocabulary and macro-F1."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import random
import warnings
from dataclasses import replace
from pathlib import Path

import datasets
import numpy as np
import pytest
import soundfile as sf

from harness.data import SourceUnit, normalize_row
from harness.kinds.ternary import TERNARY_PARSER as TERNARY
from harness.kinds.ternary import TERNARY_VOCABULARY
from harness.kinds.yesno import YESNO_PARSER as YESNO
from harness.kinds.yesno import YESNO_VOCABULARY
from harness.metrics import f1_by_class, macro_f1, prediction_distribution, summarize
from harness.models.protocol import AudioClip
from harness.parsing import MAIN, SYNONYM, get_parser
from harness.prompts import (
    FEW_SHOT_AUDIOS,
    FewShotPool,
    build_prompt,
    draw_examples,
    few_shot_segments,
    get_variant,
    prepare_variant,
)
from tests.helpers.sources import demo_speech
from vocalgrad_dataset import generate
from vocalgrad_dataset.build.card import card_text
from vocalgrad_dataset.cli import main as cli
from vocalgrad_dataset.generate import config_ids, iter_rows
from vocalgrad_dataset.grid import BEEP_IDS_SHA256, TEST_IDS_SHA256, ids_sha256
from vocalgrad_dataset.sources import get_source, span_samples
from vocalgrad_dataset.sources.alternate import read_selection
from vocalgrad_dataset.sources.beep import BeepSource
from vocalgrad_dataset.sources.commonvoice import SELECTION as CV_SELECTION
from vocalgrad_dataset.sources.commonvoice import corpus_relative
from vocalgrad_dataset.sources.loquacious import SELECTION as LOQ_SELECTION
from vocalgrad_dataset.sources.loquacious import LoquaciousSource
from vocalgrad_dataset.tasks import config_spec

# id_sha256 of the published alternative-source result files (reference camera_ready_direction_metrics.csv)
LOQUACIOUS_IDS_SHA256 = "4b6bd942929255741a184d47ea9d8b47e3799f23bd31ca011fa4ea8609edb1ee"
COMMONVOICE_IDS_SHA256 = "6becf5e5ea7a30f8f3d814d6eb9d923b63f2550d9412cef7635b93afde3ffc38"


# ---- beep ----------------------------------------------------------------------------------------------


def test_beep_sources_match_spec_to_the_sample() -> None:
    src = BeepSource()
    clips = src.clips("test")
    assert [c.source_item_id for c in clips] == [f"beep_{i:02d}" for i in range(1, 11)]
    for i, clip in enumerate(clips):
        f = 700 + 150 * i
        pcm = src.read(clip)
        x = pcm.samples
        assert pcm.sample_rate == 48000 and x.dtype == np.int16 and len(x) == 36000 + 100800 + 36000
        assert not x[:36000].any() and not x[136800:].any()  # 0.75 s silence either side
        assert (clip.onset_sec, clip.offset_sec) == (0.75, 2.85)
        assert span_samples(clip.onset_sec, clip.offset_sec, 48000, len(x)) == (36000, 136800)
        if i in (0, 9):  # every tone sample against an independent scalar computation (no fade, t from onset)
            ref = [round(0.65 * math.sin(2 * math.pi * f * k / 48000) * 32767) for k in range(100800)]
            np.testing.assert_array_equal(x[36000:136800], np.array(ref, dtype=np.int16))
    assert int(src.read(clips[0]).samples[36000 + 17]) == round(0.65 * math.sin(2 * math.pi * 700 * 17 / 48000) * 32767)
    with pytest.raises(ValueError, match="test only"):
        src.clips("train")


def test_beep_ids_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    for cat in ("pitch", "volume", "noise", "vibration"):
        assert ids_sha256(config_ids(f"beep-{cat}", "test")) == BEEP_IDS_SHA256
    assert cli(["ids", "--config", "beep-pitch", "--split", "test"]) == 0
    ids = capsys.readouterr().out.splitlines()
    assert len(ids) == 240 and ids[0] == "beep_01__beep_01__linear__low__up"
    assert hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest() == BEEP_IDS_SHA256
    with pytest.raises(ValueError, match="pitch, volume, noise, vibration only"):
        config_spec("beep-echo")
    with pytest.raises(ValueError, match="beep source only"):
        config_ids("beep-pitch", "test", "demo")


def test_beep_rows_render_and_card_records_the_audio_ref_prompt(tmp_path: Path) -> None:
    rows = list(iter_rows("beep-volume", "test"))
    assert len(rows) == 240 and {r["category"] for r in rows} == {"volume"}
    assert ids_sha256(r["benchmark_clip_id"] for r in rows) == BEEP_IDS_SHA256
    assert all(r["onset_sec"] == 0.75 for r in rows)
    text = card_text(tmp_path, source="beep")
    assert "measured with the `audio_ref` prompt" in text and generate.BEEP_PROMPT_VARIANT == "audio_ref"


# ---- id hashes, config names -----------------------------------------------------------------------------


def test_id_hashes_of_every_source() -> None:
    assert ids_sha256(config_ids("pitch", "test")) == TEST_IDS_SHA256
    assert ids_sha256(config_ids("pitch", "test", "loquacious")) == LOQUACIOUS_IDS_SHA256
    assert ids_sha256(config_ids("pitch", "test", "commonvoice-spontaneous")) == COMMONVOICE_IDS_SHA256
    ternary = config_ids("volume-ternary", "test")
    assert len(ternary) == 2500 and ids_sha256(i for i in ternary if not i.endswith("__source")) == TEST_IDS_SHA256
    assert ternary[24] == "p226_01__p226_106__source" and len(config_ids("echo-source", "test")) == 100
    assert len(config_ids("all-yesno", "test")) == 9 * 2500


def test_config_names_and_aliases() -> None:
    assert config_spec("background_noise-ternary").name == "noise-ternary"
    assert config_spec("voice_pitch").name == "pitch" and config_spec("pitch-yesno").labels == ("no", "yes")
    assert [s.name for s in generate.expand_specs("beep-all")] == [f"beep-{c}" for c in ("pitch", "volume", "noise", "vibration")]
    with pytest.raises(ValueError, match="did you mean 'pitch-ternary'"):
        config_spec("pitch-ternery")


# ---- formats ----------------------------------------------------------------------------------------------


def test_volume_ternary_build_contract(tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert cli(["build", "--config", "volume-ternary", "--split", "test", "--source", "demo", "--out", str(out), "--quiet"]) == 0
    ds = datasets.load_dataset(str(out), "volume-ternary", split="test")
    names = ds.features["label"].names
    assert names == ["decrease", "increase", "constant"]
    labels = [names[i] for i in ds["label"]]
    n_sources = len(get_source("demo").clips("test"))
    assert labels.count("constant") == n_sources and labels.count("increase") == labels.count("decrease") == 12 * n_sources
    constant = [r for r, lab in zip(ds.select_columns(["benchmark_clip_id", "source_clip_id"]), labels, strict=True)
                if lab == "constant"]
    assert sorted(r["source_clip_id"] for r in constant) == sorted(c.source_clip_id for c in get_source("demo").clips("test"))
    assert all(r["benchmark_clip_id"].endswith("__source") for r in constant)


def test_yesno_rows_labels_prompt_and_unmodified_audio() -> None:
    src = get_source("demo")
    clip = src.clips("test")[0]
    rows = list(iter_rows("pitch-yesno", "test", "demo", clips=[clip]))
    assert [r["label"] for r in rows] == ["yes"] * 24 + ["no"]
    source = rows[-1]
    assert source["benchmark_clip_id"] == f"{clip.source_item_id}__{clip.source_clip_id}__source"
    assert (source["direction"], source["tier"], source["param_start"]) == ("none", "none", None)
    assert source["prompt"] == 'Does the voice pitch vary with time?\n\nAnswer with only one word: "yes" or "no".'
    np.testing.assert_array_equal(source["audio"]["array"], src.read(clip).samples.astype(np.float32) / 32768)
    # the harness reads the same rows: source ids and format labels pass its integrity check
    assert normalize_row(source, "pitch-yesno")["label"] == "no"
    with pytest.raises(ValueError, match="contradicts"):
        normalize_row({**source, "label": "yes"}, "pitch-yesno")


# ---- alternative sources ----------------------------------------------------------------------------------


def test_frozen_alternative_lists_and_onset_fallback() -> None:
    for name in ("loquacious", "commonvoice-spontaneous"):
        clips = get_source(name).clips("test")
        assert len(clips) == 100 and len({c.source_item_id for c in clips}) == 100
    fallback = [r for r in read_selection(LOQ_SELECTION) if r["onset_fallback"] == "full_clip"]
    assert len(fallback) == 4
    clips = {c.source_item_id: c for c in get_source("loquacious").clips("test")}
    for r in fallback:  # onset_fallback = full_clip: the whole clip is the span
        assert clips[r["test_item_id"]].onset_sec == 0.0
        assert clips[r["test_item_id"]].offset_sec == float(r["duration_sec"])


def _fake_loquacious(root: Path, n_rows: int, wanted: dict[int, tuple[str, bytes]], *, hub_layout: bool) -> None:
    """A LoquaciousSet-shaped test split (columns ID, wav, duration, text, spk_id, sex) as Parquet."""
    silence = io.BytesIO()
    sf.write(silence, np.zeros(160, dtype=np.int16), 16000, subtype="PCM_16", format="WAV")
    ids, wavs = [], []
    for i in range(n_rows):
        cid, data = wanted.get(i, (f"other_{i}", silence.getvalue()))
        ids.append(cid)
        wavs.append({"bytes": data, "path": f"{i}.wav"})
    features = datasets.Features({"ID": datasets.Value("string"), "wav": datasets.Audio(), "duration": datasets.Value("float32"),
                                  "text": datasets.Value("string"), "spk_id": datasets.Value("string"), "sex": datasets.Value("string")})
    ds = datasets.Dataset.from_dict({"ID": ids, "wav": wavs, "duration": [1.0] * n_rows, "text": ["x"] * n_rows,
                                     "spk_id": ["s"] * n_rows, "sex": ["female"] * n_rows}, features=features)
    (root / "test").mkdir(parents=True)
    ds.to_parquet(str(root / "test" / "test-00000-of-00001.parquet"))
    if hub_layout:
        (root / "README.md").write_text('---\nconfigs:\n- config_name: clean\n  data_files:\n  - split: test\n'
                                        '    path: "test/*.parquet"\n---\n', encoding="utf-8")


def _selection(path: Path, rows: list[tuple[int, str]]) -> Path:
    """A frozen-list CSV with the real columns, pointing at the given (row index, ID) pairs."""
    head = read_selection(LOQ_SELECTION)[: len(rows)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(head[0]))
        writer.writeheader()
        for r, (index, cid) in zip(head, rows, strict=True):
            writer.writerow({**r, "clip_id": cid, "source_row_index": index})
    return path


@pytest.mark.parametrize("hub_layout", [True, False])
def test_loquacious_loader_selects_frozen_rows(tmp_path: Path, hub_layout: bool) -> None:
    speech = demo_speech()[0][:16000 * 2 : 3]  # any real speech; only the sample values matter here
    pcm16 = io.BytesIO()
    sf.write(pcm16, speech, 16000, subtype="PCM_16", format="WAV")
    flt48 = io.BytesIO()
    sf.write(flt48, np.stack([speech, speech], 1).astype(np.float32) / 32768, 48000, subtype="FLOAT", format="WAV")
    data = tmp_path / "loq"
    _fake_loquacious(data, 8, {1: ("clip_a", pcm16.getvalue()), 6: ("clip_b", flt48.getvalue())}, hub_layout=hub_layout)
    src = LoquaciousSource(data if hub_layout else data / "test", selection=_selection(tmp_path / "sel.csv", [(6, "clip_b"), (1, "clip_a")]))
    b, a = src.clips("test")
    np.testing.assert_array_equal(src.read(a).samples, speech)  # 16 kHz PCM16: sample for sample
    got = src.read(b)  # 48 kHz stereo float: the published librosa.load(sr=16000, mono=True) + PCM_16 write
    import librosa

    flt48.seek(0)
    y, _ = librosa.load(flt48, sr=16000, mono=True)
    ref = io.BytesIO()
    sf.write(ref, y, 16000, subtype="PCM_16", format="WAV")
    ref.seek(0)
    np.testing.assert_array_equal(got.samples, sf.read(ref, dtype="int16")[0])
    assert got.sample_rate == 16000
    moved = LoquaciousSource(data if hub_layout else data / "test", selection=_selection(tmp_path / "bad.csv", [(2, "clip_a")]))
    with pytest.raises(Exception, match="upstream split changed"):
        moved.read(moved.clips("test")[0])


def test_commonvoice_loader_decodes_mp3_to_16k(tmp_path: Path) -> None:
    rows = read_selection(CV_SELECTION)[:1]
    # the real clip is 9.468 s with speech to 8.73 s (frozen list): a demo clip padded to that length stands in
    speech = demo_speech()[3]
    speech = np.pad(speech, (0, max(0, round(float(rows[0]["duration_sec"]) * 48000) - len(speech))))
    path = tmp_path / corpus_relative(rows[0]["source_audio_path"])
    path.parent.mkdir(parents=True)
    sf.write(str(path), speech, 48000, format="MP3")  # libsndfile >= 1.1 writes and reads MPEG layer III
    src = get_source("commonvoice-spontaneous", tmp_path)
    clip = src.clips("test")[0]
    got = src.read(clip)
    import librosa

    y, _ = librosa.load(str(path), sr=16000, mono=True)  # the published materialisation
    ref = io.BytesIO()
    sf.write(ref, y, 16000, subtype="PCM_16", format="WAV")
    ref.seek(0)
    np.testing.assert_array_equal(got.samples, sf.read(ref, dtype="int16")[0])
    # rows render at 16 kHz, and the distortion tiers that do nothing there are announced once
    generate._WARNED_NOOP.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows_ = list(iter_rows("distortion", "test", src, clips=[clip], ids={
            f"{clip.source_item_id}__{clip.source_clip_id}__linear__{t}__up" for t in ("low", "high")}))
        list(iter_rows("distortion", "test", src, clips=[clip], ids={f"{clip.source_item_id}__{clip.source_clip_id}__jump__mid__up"}))
    noop = [w for w in caught if "no-ops at 16000 Hz" in str(w.message)]
    assert len(noop) == 1 and "low, mid" in str(noop[0].message)
    assert [r["tier"] for r in rows_] == ["low", "high"] and rows_[0]["audio"]["sampling_rate"] == 16000
    with pytest.raises(Exception, match="needs data_dir"):
        get_source("commonvoice-spontaneous").read(clip)
    assert "distortion low and mid" in card_text(tmp_path, source="commonvoice-spontaneous")


# ---- parsers, vocabularies, metrics -----------------------------------------------------------------------

PARSER_TABLES = {
    YESNO: [("yes", "yes"), ("No.", "no"), ('"YES"', "yes"), ("Yes, it does.", "yes"), ("yes or no", None),
            ("nothing", None), ("It does not vary.", None), ("no, no", "no"), ("", None), (None, None)],
    TERNARY: [("constant", "constant"), ("Increases.", "increase"), ("decrease", "decrease"), ("It stays constant", "constant"),
              ("increase, not constant", None), ("increasing", None), ("constantly rising", None), ("remains the same", None)],
    SYNONYM: [("rise", "increase"), ("It declines", "decrease"), ("faster", "increase"), ("rise or fall", None)],
    MAIN: [("increase", "increase"), ("Decreases", "decrease"), ("increase or decrease", None), ("rise", None)],
}


@pytest.mark.parametrize(("parser", "raw", "expected"), [(p, r, e) for p, cases in PARSER_TABLES.items() for r, e in cases])
def test_parser_tables(parser, raw: str | None, expected: str | None) -> None:
    assert parser.parse(raw) == expected


def test_parser_ids_and_vocabulary_decisions() -> None:
    assert (YESNO.id, TERNARY.id) == ("yesno-unique-answer-v1", "ternary-unique-answer-v1")
    assert get_parser("ternary-unique-answer-v1") is TERNARY and TERNARY.labels == ("increase", "decrease", "constant")
    assert TERNARY_VOCABULARY.decide([-3.0, -2.0, -0.5]) == ("constant", "constant", 1.5)
    assert YESNO_VOCABULARY.decide([-1.0, -2.0]) == ("yes", "yes", 1.0)
    assert YESNO_VOCABULARY.decide([-1.0, -1.0])[0] is None
    with pytest.raises(ValueError, match="fixes its question"):
        get_variant("swap_order").vocabulary("volume-ternary")


def _fmt_rows(table: list[tuple[str, str | None, str]]) -> list[dict]:
    return [{"benchmark_clip_id": f"c{i}", "gold": g, "pred": p, "direction": d, "source_clip_id": f"s{i % 3}",
             "raw": p, "parser": "ternary-unique-answer-v1", "answer_words": ["increase", "decrease", "constant"]}
            for i, (g, p, d) in enumerate(table)]


def test_macro_f1_hand_built_confusions() -> None:
    # ternary: 3 increase (2 right, 1 unparsed), 3 decrease (1 right, 1 -> increase, 1 -> constant), 2 constant (1 right, 1 -> increase)
    rows = _fmt_rows([("increase", "increase", "up"), ("increase", "increase", "up"), ("increase", None, "up"),
                      ("decrease", "decrease", "down"), ("decrease", "increase", "down"), ("decrease", "constant", "down"),
                      ("constant", "constant", "none"), ("constant", "increase", "none")])
    f1 = f1_by_class(rows)
    # increase: P 2/4, R 2/3 -> 4/7; decrease: P 1/1, R 1/3 -> 1/2; constant: P 1/2, R 1/2 -> 1/2
    assert f1 == pytest.approx({"increase": 4 / 7, "decrease": 0.5, "constant": 0.5})
    assert macro_f1(rows) == pytest.approx((4 / 7 + 0.5 + 0.5) / 3)
    assert summarize(rows)["macro_f1"] == pytest.approx(macro_f1(rows))
    # the unparsed increase row counts as a miss of "increase" only: parsing it right raises only increase's F1
    fixed = _fmt_rows([("increase", "increase", "up")] * 3 + [(g, p, d) for g, p, d in
                      [("decrease", "decrease", "down"), ("decrease", "increase", "down"), ("decrease", "constant", "down"),
                       ("constant", "constant", "none"), ("constant", "increase", "none")]])
    assert f1_by_class(fixed)["increase"] == pytest.approx(2 * 0.6 * 1 / 1.6) and f1_by_class(fixed)["constant"] == 0.5
    # yes/no: everything "yes" -> F1(yes) = 2*(24/25)/(1+24/25), F1(no) = 0
    yn = [{"gold": "yes", "pred": "yes"}] * 24 + [{"gold": "no", "pred": "yes"}]
    assert macro_f1(yn) == pytest.approx((2 * 0.96 / 1.96) / 2)
    assert macro_f1([{"gold": "no", "pred": None, "error": "boom"}]) == 0.0


def test_prediction_distribution_by_clip_type() -> None:
    rows = _fmt_rows([("increase", "increase", "up"), ("increase", None, "up"), ("decrease", "constant", "down"),
                      ("constant", "constant", "none")])
    dist = prediction_distribution(rows, ["increase", "decrease", "constant"])
    assert dist["increasing"] == {"increase": 0.5, "decrease": 0.0, "constant": 0.0, "unparsed": 0.5}
    assert dist["decreasing"]["constant"] == 1.0 and dist["source"]["constant"] == 1.0


# ---- few-shot --------------------------------------------------------------------------------------------


class _Train:
    """Train rows whose audio encodes the clip index, so the prompt shows which clip went where."""

    description = "fake"

    def __init__(self) -> None:
        self.ids = [f"p300_{k:02d}__p300_{k:03d}__linear__{t}__{d}" for k in range(1, 4) for t in ("low", "mid") for d in ("up", "down")]

    def units(self, config: str) -> list[SourceUnit]:
        return [SourceUnit(f"p300_{k:02d}__p300_{k:03d}", 1.0, tuple(i for i in self.ids if i.startswith(f"p300_{k:02d}")))
                for k in range(1, 4)]

    def rows(self, config: str, units: list[SourceUnit]):
        for u in units:
            for cid in u.clip_ids:
                yield {"benchmark_clip_id": cid, "label": "increase" if cid.endswith("up") else "decrease",
                       "audio": {"array": np.full(4, self.ids.index(cid), dtype=np.float32), "sampling_rate": 16000}}


def test_few_shot_draw_is_the_published_seeded_draw() -> None:
    train = _Train()
    inc = [i for i in train.ids if i.endswith("up")]
    dec = [i for i in train.ids if i.endswith("down")]
    query = "p226_01__p226_106__jump__high__down"
    seed = int.from_bytes(hashlib.sha256(f"1234:voice_pitch:{query}".encode()).digest()[:8], "big")
    rng = random.Random(seed)
    expected = [*rng.sample(inc, 2), *rng.sample(dec, 2)]
    rng.shuffle(expected)
    assert draw_examples(inc, dec, "voice_pitch", query) == expected
    pool = FewShotPool(train)
    assert pool.draw("pitch", query) == expected  # keyed by the published long name, as the published runs
    assert pool.draw("voice_pitch", query) == expected  # aliases resolve to the same key


def test_few_shot_prompt_layout_and_model_check() -> None:
    train = _Train()
    variant = replace(get_variant("few-shot+audio_ref"), pool=FewShotPool(train))
    query = {"benchmark_clip_id": "p226_01__p226_106__jump__high__down", "category": "pitch", "attribute": "voice pitch",
             "label": "decrease", "audio": {"array": np.full(4, -1, dtype=np.float32), "sampling_rate": 16000}}
    prompt, vocab = build_prompt(query, variant)
    audios = [int(a.array[0]) for a in prompt.audios]
    drawn = variant.pool.draw("pitch", query["benchmark_clip_id"])
    assert audios == [train.ids.index(i) for i in drawn] + [-1] and len(audios) == FEW_SHOT_AUDIOS
    labels = ["increase" if i.endswith("up") else "decrease" for i in drawn]
    expected = "You will receive 4 labeled audio examples for voice pitch, followed by one query audio clip.\n\n"
    for k, lab in enumerate(labels, start=1):
        expected += f"Example {k} audio:\n<audio>\nExample {k} label: {lab}\n\n"
    expected += ("Query audio:\n<audio>\nFor the query audio, answer the same question:\n"
                 'Does the voice pitch of this audio clip increase or decrease over time?\n\n'
                 'Answer with only one word: "increase" or "decrease".')
    assert prompt.text == expected and vocab.choices == ("increase", "decrease")
    assert few_shot_segments("echo", [], AudioClip(np.zeros(1), 16000), "Q")[0].startswith("You will receive 0")

    class OneClip:
        name = "one-clip"
        max_audios = 1

    settings = type("S", (), {"source": "demo", "data_dir": None, "dataset": None})()
    with pytest.raises(ValueError, match="at most 1 audio clip"):
        prepare_variant(get_variant("few-shot+audio_ref"), settings, OneClip())
    demo_pool = prepare_variant(get_variant("few-shot+audio_ref"), settings).pool
    rows = demo_pool.examples("pitch", "an4_speaker_01__an4cards_005__linear__low__up")  # rendered from demo train clips
    assert [r["label"] for r in rows].count("increase") == 2 and len({r["benchmark_clip_id"] for r in rows}) == 4
