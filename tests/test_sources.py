"""Source corpora: onset detection (SPEC §1), VCTK/demo/folder loaders, audio decoding errors, registry."""

from __future__ import annotations

import csv
import hashlib
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers.sources import build_folder, build_vctk_tree, frozen_rows, vctk_wav_path
from vocalgrad_dataset.sources import (
    DemoSource,
    FolderSource,
    SourceError,
    VCTKSource,
    detect_onset_offset,
    download_vctk,
    get_source,
    read_pcm,
    span_samples,
    write_wav_pcm16,
)
from vocalgrad_dataset.sources.demo import DEMO_DIR

SR = 48000
FRAME = 0.01 + 1e-9  # one 10 ms frame (pre-emphasis can light the frame right after a hard stop)


def tone_burst(start: float, stop: float, total: float, sr: int = SR) -> np.ndarray:
    """Quiet seeded noise with a 440 Hz burst in [start, stop), as int16."""
    rng = np.random.default_rng(0)
    t = np.arange(int(total * sr)) / sr
    x = 1e-4 * rng.standard_normal(t.size)
    on = (t >= start) & (t < stop)
    x[on] += 0.3 * np.sin(2 * np.pi * 440 * t[on])
    return np.round(x * 32767).astype(np.int16)


# --- onset detection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("start", "stop"), [(0.5, 1.7), (0.503, 1.2345), (0.8, 2.0)])
def test_onset_of_tone_burst_within_one_frame(start: float, stop: float) -> None:
    onset, offset = detect_onset_offset(tone_burst(start, stop, 2.0), SR, clip_name="burst")
    assert abs(onset - start) <= FRAME
    assert abs(offset - stop) <= FRAME
    assert offset <= 2.0


def test_onset_accepts_16k_and_float_and_stereo() -> None:
    x = tone_burst(0.4, 1.0, 1.5, sr=16000)
    onset, offset = detect_onset_offset(x, 16000, clip_name="b16")
    assert abs(onset - 0.4) <= FRAME and abs(offset - 1.0) <= FRAME
    assert detect_onset_offset(x.astype(np.float64) / 32768, 16000, clip_name="f") == (onset, offset)
    assert detect_onset_offset(np.stack([x, x], axis=1), 16000, clip_name="st") == (onset, offset)


def test_short_blip_is_not_speech() -> None:
    # 50 ms burst = 5 active frames < 10: rejected, so the real burst later wins.
    x = tone_burst(0.3, 0.35, 2.0).astype(np.float64) + tone_burst(1.0, 1.5, 2.0)
    onset, offset = detect_onset_offset(np.clip(x, -32768, 32767).astype(np.int16), SR, clip_name="blip")
    assert abs(onset - 1.0) <= FRAME and abs(offset - 1.5) <= FRAME


@pytest.mark.parametrize("kind", ["zeros", "noise"])
def test_no_speech_rejected_naming_clip(kind: str) -> None:
    x = np.zeros(SR, np.int16) if kind == "zeros" else tone_burst(5.0, 6.0, 1.0)
    with pytest.raises(SourceError, match="silent_clip_7"):
        detect_onset_offset(x, SR, clip_name="silent_clip_7")


def test_span_samples_rounds_clamps_and_rejects_short_spans() -> None:
    assert span_samples(1.66, 4.29, SR, 300000, clip_name="c") == (79680, 205920)
    assert span_samples(-0.1, 1.01, SR, 1000 * 48, clip_name="c") == (0, 48000)  # one 10 ms frame: rounding
    with pytest.raises(SourceError, match=r"clip c: offset_sec 9.000 is past the end of the clip \(1.000 s\)"):
        span_samples(-0.1, 9.0, SR, 1000 * 48, clip_name="c")  # issue 22: no longer cut silently
    assert span_samples(0.0, 0.05, SR, SR, clip_name="c") == (0, 2400)  # exactly one step is fine
    with pytest.raises(SourceError, match="p999_001.*shorter than one 50 ms step"):
        span_samples(1.0, 1.04, SR, 2 * SR, clip_name="p999_001")
    with pytest.raises(SourceError, match="clampy"):
        span_samples(0.98, 1.5, SR, SR, clip_name="clampy")  # clamped to 960 samples


def test_demo_clips_have_speech_spans() -> None:
    src = DemoSource()
    for split in ("test", "train"):
        for clip in src.clips(split):
            pcm = src.read(clip)
            onset, offset = detect_onset_offset(pcm.samples, pcm.sample_rate, clip_name=clip.source_clip_id)
            assert 0.0 <= onset < offset <= len(pcm.samples) / SR
            assert offset - onset >= 0.5
            a, b = span_samples(onset, offset, SR, len(pcm.samples), clip_name=clip.source_clip_id)
            assert b - a >= SR // 2


# --- audio decoding ---------------------------------------------------------------------------------------


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    x = (np.arange(-500, 500) * 60).astype(np.int16)
    write_wav_pcm16(tmp_path / "sub" / "a.wav", x, 22050)
    pcm = read_pcm(tmp_path / "sub" / "a.wav", clip_name="a")
    assert pcm.sample_rate == 22050 and pcm.samples.dtype == np.int16
    np.testing.assert_array_equal(pcm.samples, x)
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["a.wav"]  # no temp file left behind
    with pytest.raises(TypeError):
        write_wav_pcm16(tmp_path / "b.wav", x.astype(np.float32), 22050)


def test_stereo_is_mixed_to_mono_mean_with_warning(tmp_path: Path) -> None:
    stereo = np.array([[1, 2], [2, 3], [-1, -2], [100, -100], [32767, 32766]], dtype=np.int16)
    sf.write(str(tmp_path / "st.wav"), stereo, 16000, subtype="PCM_16")
    with pytest.warns(UserWarning, match=r"st\.wav.*2 channels"):
        pcm = read_pcm(tmp_path / "st.wav", clip_name="st")
    np.testing.assert_array_equal(pcm.samples, np.array([2, 2, -2, 0, 32766], np.int16))  # half-to-even


def test_missing_empty_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"clipA.*not found.*nope\.wav"):
        read_pcm(tmp_path / "nope.wav", clip_name="clipA")
    (tmp_path / "junk.wav").write_bytes(np.random.default_rng(1).bytes(4000))
    with pytest.raises(SourceError, match=r"clipB.*junk\.wav"):
        read_pcm(tmp_path / "junk.wav", clip_name="clipB")
    (tmp_path / "zero.wav").write_bytes(b"")
    with pytest.raises(SourceError, match="clipC"):
        read_pcm(tmp_path / "zero.wav", clip_name="clipC")
    sf.write(str(tmp_path / "empty.wav"), np.zeros(0, np.int16), 48000, subtype="PCM_16")
    with pytest.raises(SourceError, match="clipD.*no samples"):
        read_pcm(tmp_path / "empty.wav", clip_name="clipD")


# --- VCTK -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["test", "train"])
def test_vctk_tree_end_to_end(tmp_path: Path, split: str) -> None:
    ids = build_vctk_tree(tmp_path, n_clips=3, split=split)
    rows = frozen_rows(split, 3)
    src = get_source("vctk", tmp_path)
    clips = src.clips(split)
    assert len(clips) == (100 if split == "test" else 500)
    assert [(c.source_item_id, c.source_clip_id) for c in clips[:3]] == ids
    for clip, row in zip(clips[:3], rows, strict=True):
        assert (clip.onset_sec, clip.offset_sec) == (float(row["onset_sec"]), float(row["offset_sec"]))
        assert clip.text == row["text"] and clip.speaker_id == row["speaker_id"]
        pcm = src.read(clip)
        assert pcm.sample_rate == 48000 and pcm.samples.dtype == np.int16 and pcm.samples.ndim == 1
        assert len(pcm.samples) == round(float(row["audio_duration_sec"]) * 48000)
        assert np.abs(pcm.samples).max() > 1000  # real speech, not silence
    with pytest.raises(SourceError, match=clips[5].source_clip_id):
        src.read(clips[5])  # not built: missing file names the clip


def test_vctk_first_test_ids_match_spec_example(tmp_path: Path) -> None:
    build_vctk_tree(tmp_path, n_clips=1)
    clip = VCTKSource(tmp_path).clips("test")[0]
    assert (clip.source_item_id, clip.source_clip_id) == ("p226_01", "p226_106")
    assert Path(clip.path) == (tmp_path / "wav48" / "p226" / "p226_106.wav").resolve()


def test_vctk_accepts_parent_of_vctk_corpus(tmp_path: Path) -> None:
    build_vctk_tree(tmp_path / "VCTK-Corpus", n_clips=1)
    assert VCTKSource(tmp_path).root == (tmp_path / "VCTK-Corpus").resolve()


def test_vctk_missing_root_and_missing_wav48(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"does_not_exist.*datashare\.ed\.ac\.uk/handle/10283/2651"):
        VCTKSource(tmp_path / "does_not_exist")
    (tmp_path / "empty_corpus").mkdir()
    with pytest.raises(SourceError, match="empty_corpus.*wav48"):
        VCTKSource(tmp_path / "empty_corpus")
    with pytest.raises(SourceError, match="data_dir"):
        get_source("vctk")
    with pytest.raises(SourceError, match="wav48"):
        VCTKSource(tmp_path / "empty_corpus", layout="0.80")


def test_vctk_corrupt_and_wrong_rate_files(tmp_path: Path) -> None:
    build_vctk_tree(tmp_path, n_clips=3)
    src = VCTKSource(tmp_path)
    clips = src.clips("test")
    vctk_wav_path(tmp_path, clips[0].source_clip_id).write_bytes(np.random.default_rng(2).bytes(9000))
    with pytest.raises(SourceError, match=clips[0].source_clip_id):
        src.read(clips[0])
    sf.write(str(vctk_wav_path(tmp_path, clips[1].source_clip_id)), np.zeros(16000, np.int16), 16000)
    with pytest.raises(SourceError, match=rf"{clips[1].source_clip_id}.*16000 Hz.*48000 Hz"):
        src.read(clips[1])


def test_vctk_unknown_split_and_layout(tmp_path: Path) -> None:
    build_vctk_tree(tmp_path, n_clips=1)
    with pytest.raises(ValueError, match="test, train"):
        VCTKSource(tmp_path).clips("dev")
    with pytest.raises(ValueError, match="0.80"):
        VCTKSource(tmp_path, layout="1.0")


def test_vctk_092_layout_warns_and_redetects(tmp_path: Path) -> None:
    build_vctk_tree(tmp_path, n_clips=2, layout="0.92")
    with pytest.warns(UserWarning, match="0.92.*NOT comparable"):
        src = VCTKSource(tmp_path)
    assert src.layout == "0.92"
    clip = src.clips("test")[0]
    assert clip.onset_sec is None and clip.offset_sec is None
    assert clip.path.endswith("wav48_silence_trimmed/p226/p226_106_mic1.flac")
    pcm = src.read(clip)
    onset, offset = detect_onset_offset(pcm.samples, pcm.sample_rate, clip_name=clip.source_clip_id)
    assert onset < offset


def test_download_vctk_verifies_checksum_and_returns_corpus_root(tmp_path: Path) -> None:
    build_vctk_tree(tmp_path / "VCTK-Corpus", n_clips=1)
    archive = tmp_path / "VCTK-Corpus.zip"
    archive.write_bytes(b"stand-in archive bytes")

    class FakeDownloadManager:  # records the URL; nothing is fetched
        urls: list[str] = []

        def download(self, url: str) -> str:
            self.urls.append(url)
            return str(archive)

        def extract(self, path: str) -> str:
            return str(tmp_path)

    dl = FakeDownloadManager()
    assert download_vctk(dl) == tmp_path / "VCTK-Corpus"
    assert dl.urls == ["https://datashare.ed.ac.uk/bitstream/handle/10283/2651/VCTK-Corpus.zip"]
    recorded = (tmp_path / "VCTK-Corpus.zip.sha256").read_text().split()[0]
    assert recorded == hashlib.sha256(b"stand-in archive bytes").hexdigest()
    archive.write_bytes(b"tampered")  # later uses are checked against the recorded digest
    with pytest.raises(SourceError, match="does not match"):
        download_vctk(dl)
    with pytest.raises(SourceError, match="does not match"):
        download_vctk(dl, expected_sha256="0" * 64)


# --- demo -------------------------------------------------------------------------------------------------


def test_demo_splits_speaker_disjoint_and_complete() -> None:
    src = get_source("demo")
    test, train = src.clips("test"), src.clips("train")
    assert len(test) == 3 and len(train) == 5
    assert {c.speaker_id for c in test} == {"arctic_male", "arctic_female", "an4_speaker"}
    assert {c.speaker_id for c in train} == {"librivox_m"}
    wavs = sorted(p.name for p in DEMO_DIR.glob("*.wav"))
    assert sorted(Path(c.path).name for c in test + train) == wavs and len(wavs) == 8
    ids = [c.source_item_id for c in test + train]
    assert len(set(ids)) == 8 and "arctic_male_01" in ids and "librivox_m_05" in ids
    assert all(c.onset_sec is None for c in test + train)
    assert all(c.text for c in test + train)


def test_demo_vendored_files_and_licences() -> None:
    with open(DEMO_DIR / "manifest.tsv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert list(rows[0]) == [
        "file",
        "source_item_id",
        "source_clip_id",
        "speaker_id",
        "split",
        "text",
        "origin",
        "licence",
    ]
    for r in rows:
        info = sf.info(str(DEMO_DIR / r["file"]))
        assert (info.samplerate, info.channels, info.subtype) == (48000, 1, "PCM_16")
        licence_file = r["licence"].split("see ")[-1].split(" ")[0]
        assert (DEMO_DIR / licence_file).is_file()
    assert "8 kHz" in (DEMO_DIR / "README.md").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="test, train"):
        DemoSource().clips("validation")


# --- folder -----------------------------------------------------------------------------------------------


def test_folder_source_round_trip(tmp_path: Path) -> None:
    build_folder(tmp_path, rates=(16000, 48000, 24000))
    src = get_source("folder", tmp_path)
    test, train = src.clips("test"), src.clips("train")
    assert [(c.source_item_id, c.source_clip_id, c.speaker_id, c.text) for c in test] == [
        ("s0_01", "utt00", "s0", "utterance 0"),
        ("s0_02", "utt02", "s0", "utterance 2"),
    ]
    assert [(c.source_item_id, c.source_clip_id) for c in train] == [("s1_01", "utt01")]
    assert [src.read(c).sample_rate for c in test + train] == [16000, 24000, 48000]
    assert all(c.onset_sec is None for c in test + train)


def test_folder_source_optional_columns(tmp_path: Path) -> None:
    build_folder(tmp_path, rates=(48000,), with_split=False)
    (tmp_path / "meta2.csv").write_text(
        "file_name,text,source_item_id,onset_sec,offset_sec\nutt00.wav,hello,item_a,0.25,1.5\n",
        encoding="utf-8",
    )
    clip = FolderSource(tmp_path, metadata="meta2.csv").clips("test")[0]
    assert (clip.source_item_id, clip.speaker_id, clip.text) == ("item_a", "spk", "hello")
    assert (clip.onset_sec, clip.offset_sec) == (0.25, 1.5)
    assert FolderSource(tmp_path).clips("test")[0].source_item_id == "s0_01"


def test_folder_source_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no_such_dir"):
        FolderSource(tmp_path / "no_such_dir")
    with pytest.raises(SourceError, match=r"metadata\.csv"):
        FolderSource(tmp_path)
    with pytest.raises(SourceError, match="needs data_dir"):
        get_source("folder")
    build_folder(tmp_path, rates=(16000,))
    (tmp_path / "bad.csv").write_text("path,text\nutt00.wav,x\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"bad\.csv.*'file_name'"):
        FolderSource(tmp_path, metadata="bad.csv")
    (tmp_path / "gone.csv").write_text("file_name\nutt00.wav\nmissing_07.wav\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"missing_07\.wav"):
        FolderSource(tmp_path, metadata="gone.csv")
    (tmp_path / "sep.csv").write_text("file_name,source_item_id\nutt00.wav,a__b\n", encoding="utf-8")
    with pytest.raises(SourceError, match="'__'"):
        FolderSource(tmp_path, metadata="sep.csv")
    with pytest.raises(ValueError, match="valid: test"):
        FolderSource(tmp_path).clips("train")


# --- registry ---------------------------------------------------------------------------------------------


def test_get_source_suggests_close_name() -> None:
    with pytest.raises(ValueError, match="did you mean 'vctk'"):
        get_source("vctx")
    with pytest.raises(ValueError, match="unknown source 'zzz'"):
        get_source("zzz")
    with pytest.raises(ValueError, match="no data_dir"):
        get_source("demo", "/tmp")


def test_demo_read_emits_no_warnings() -> None:
    src = DemoSource()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pcm = src.read(src.clips("test")[0])
    assert pcm.samples.dtype == np.int16
