"""Lexical-conflict carriers: templates, the vendored claims source, conflict configs and the reversed control."""

from __future__ import annotations

import csv
import hashlib
import shutil
import wave
from collections import Counter
from pathlib import Path

import datasets
import numpy as np
import pytest

from vocalgrad_dataset.categories import CATEGORY_NAMES
from vocalgrad_dataset.cli import main as cli
from vocalgrad_dataset.generate import config_ids, iter_rows, resolve_source
from vocalgrad_dataset.grid import CURVES, TIERS
from vocalgrad_dataset.sources import SourceError, get_source
from vocalgrad_dataset.sources.claims import (
    CLAIMS_DIR,
    ClaimsSource,
    claim_of_text,
    load_templates,
    word_error_rate,
)
from vocalgrad_dataset.sources.onset import detect_onset_offset
from vocalgrad_dataset.tasks import config_spec

MANIFEST = CLAIMS_DIR / "manifest.tsv"
# sha256 of the sorted volume-conflict test ids joined by newlines: frozen on the level-flattened carriers with
# the oracle-selected test carriers (the ids name the voice each test carrier was kept with; changing the
# carriers or the plan changes it; regenerate deliberately and update here and in the README).
VOLUME_CONFLICT_TEST_IDS_SHA256 = "0ca2b97eaf0280d46143eb61a0371a61df997c8fc4e840fa131784f5f51528c4"


def manifest_rows() -> list[dict[str, str]]:
    with open(MANIFEST, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_issue_example_sentences_claim_their_direction() -> None:
    # the issue's own examples, and neutral speech that claims nothing in any category
    assert claim_of_text("My voice keeps getting louder and louder.", "volume") == "increase"
    assert claim_of_text("My voice keeps getting quieter and quieter.", "volume") == "decrease"
    assert claim_of_text("The weather was fine on Tuesday.", "volume") is None
    assert claim_of_text("I speak faster.", "pitch") is None  # another category's word claims nothing here


def test_templates_per_category_and_claim() -> None:
    templates = load_templates()
    count = Counter((t.category, t.claim, t.split) for t in templates)
    for cat in CATEGORY_NAMES:
        for claim in ("increase", "decrease"):
            assert count[(cat, claim, "train")] >= 3 and count[(cat, claim, "test")] >= 2, (cat, claim)
    assert count[("any", "none", "train")] >= 2 and count[("any", "none", "test")] >= 2
    assert len({t.text for t in templates if t.split == "train"} & {t.text for t in templates if t.split == "test"}) == 0
    for t in templates:  # each sentence asserts its own claim and nothing else (neutral ones nothing at all)
        cats = CATEGORY_NAMES if t.claim == "none" else (t.category,)
        for cat in cats:
            assert claim_of_text(t.text, cat) == (None if t.claim == "none" else t.claim), (t.id, cat, t.text)


def test_word_error_rate_by_hand() -> None:
    assert word_error_rate("the cat sat", "the dog sat") == pytest.approx(1 / 3)
    assert word_error_rate("the cat sat", "the cat") == pytest.approx(1 / 3)  # one deletion
    assert word_error_rate("I am here.", "I'm here") == 0.0  # contraction expanded, punctuation dropped
    assert word_error_rate("a b", "a b c d") == pytest.approx(1.0)  # two insertions over two words


def test_vendored_carriers_match_their_manifest() -> None:
    rows = manifest_rows()
    total = 0
    for r in rows:
        path = CLAIMS_DIR / r["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == r["sha256"], r["file"]
        with wave.open(str(path)) as w:  # the stdlib reader: 48 kHz mono 16-bit PCM
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (48000, 1, 2), r["file"]
            assert w.getnframes() == int(r["n_samples"])
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        assert float(r["wer"]) == 0.0 and word_error_rate(r["transcript"], r["whisper"]) == 0.0, r["file"]
        onset, _ = detect_onset_offset(pcm, 48000, clip_name=r["file"])
        assert onset >= 0.25 and not pcm[: int(0.25 * 48000)].any()  # leading digital silence before the speech
        total += path.stat().st_size
    # 43.8 MB for 130 carriers (was 36.9 MB for 126): the test sentences name their claim twice ("... louder,
    # much louder than before.") and are about a second longer than the single-claim ones they replaced
    assert total <= 46e6


def test_voices_and_templates_disjoint_across_splits_both_sexes() -> None:
    rows = manifest_rows()
    by_split = {s: [r for r in rows if r["split"] == s] for s in ("train", "test")}
    voices = {s: {r["voice_id"] for r in rs} for s, rs in by_split.items()}
    assert len(voices["train"]) >= 4 and len(voices["test"]) >= 2 and not voices["train"] & voices["test"]
    assert not {r["template_id"] for r in by_split["train"]} & {r["template_id"] for r in by_split["test"]}
    for split, rs in by_split.items():
        for cat in CATEGORY_NAMES:
            for claim in ("increase", "decrease"):
                sexes = {r["voice_sex"] for r in rs if r["category"] == cat and r["claim"] == claim}
                assert sexes == {"female", "male"}, (split, cat, claim)


def test_modified_carrier_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "claims"
    shutil.copytree(CLAIMS_DIR, folder)
    src = ClaimsSource(folder)
    clip = src.clips("test")[0]
    data = bytearray(Path(clip.path).read_bytes())
    data[-1] ^= 0x01
    Path(clip.path).write_bytes(bytes(data))
    with pytest.raises(SourceError, match=clip.source_clip_id):
        src.read(clip)


def test_conflict_config_names_and_default_source() -> None:
    spec = config_spec("volume-conflict")
    assert (spec.name, spec.recipe.claims, spec.labels) == ("volume-conflict", True, ("decrease", "increase"))
    assert config_spec("background_noise-conflict-reversed").name == "noise-conflict-reversed"
    assert resolve_source("volume-conflict", None) == "claims"
    assert resolve_source("volume", None) == "vctk"
    assert isinstance(get_source("claims"), ClaimsSource)


def test_volume_conflict_build_balanced_and_ids_frozen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["build", "--config", "volume-conflict", "--split", "test", "--out", str(tmp_path), "--quiet"]) == 0
    ds = datasets.load_dataset(str(tmp_path), "volume-conflict", split="test")
    for col in ("claim", "congruent", "template_id", "voice_id", "transcript"):
        assert col in ds.column_names
    rows = ds.remove_columns("audio").to_list()
    labels = ds.features["label"].names
    cells: Counter = Counter()
    for r in rows:
        label = labels[r["label"]]
        if r["claim"] == "none":
            assert r["congruent"] is None
            cells[(r["tier"], r["curve"], "neutral", label)] += 1
        else:
            assert r["congruent"] == (r["claim"] == label)
            assert claim_of_text(r["transcript"], "volume") == r["claim"]
            cells[(r["tier"], r["curve"], "congruent" if r["congruent"] else "incongruent")] += 1
    for tier in TIERS:
        for curve in CURVES:
            assert cells[(tier, curve, "congruent")] == cells[(tier, curve, "incongruent")] > 0
            assert cells[(tier, curve, "neutral", "increase")] == cells[(tier, curve, "neutral", "decrease")] > 0
    # only volume's own carriers and the neutral ones; ids as `ids` lists them
    assert {r["template_id"].split("-")[0] for r in rows} == {"volume", "neutral"}
    assert sorted(r["benchmark_clip_id"] for r in rows) == sorted(config_ids("volume-conflict", "test"))
    capsys.readouterr()
    assert cli(["ids", "--config", "volume-conflict", "--split", "test", "--sha256"]) == 0
    assert capsys.readouterr().out.strip() == VOLUME_CONFLICT_TEST_IDS_SHA256


def test_reversed_control_is_the_opposite_clip_backwards() -> None:
    clip = next(c for c in ClaimsSource().clips("test") if c.category == "volume")
    fwd = {r["benchmark_clip_id"]: r for r in iter_rows("volume-conflict", "test", clips=[clip])}
    rev = list(iter_rows("volume-conflict-reversed", "test", clips=[clip]))
    assert len(rev) == 24
    for r in rev:
        # the reversed "up" row is the forward "down" rendering played backwards: it sounds like a rise
        twin = fwd[r["benchmark_clip_id"].rsplit("__", 1)[0] + "__" + {"up": "down", "down": "up"}[r["direction"]]]
        np.testing.assert_array_equal(r["audio"]["array"], twin["audio"]["array"][::-1])
        assert r["label"] == {"up": "increase", "down": "decrease"}[r["direction"]] != twin["label"]
        assert r["congruent"] == (clip.claim == r["label"])
        dur = r["duration_sec"]
        assert r["onset_sec"] == pytest.approx(dur - twin["offset_sec"]) and r["offset_sec"] == pytest.approx(
            dur - twin["onset_sec"])


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed (regeneration only)")
def test_synthesise_and_carrier_format() -> None:
    from vocalgrad_dataset.sources import synth

    audio, sr = synth.synthesise("Hello there.", "en-us+f2", rate=160, pitch=55)
    assert audio.dtype == np.float32 and audio.ndim == 1 and sr == 22050 and np.abs(audio).max() > 0.01
    pcm = synth.carrier_pcm16(audio, sr)
    lead = int(round(synth.LEAD_SEC * 48000))
    assert pcm.dtype == np.int16 and not pcm[:lead].any() and pcm[lead:].any()
    assert np.abs(pcm).max() == round(synth.PEAK * 32768)  # peak-set: the +18 dB volume tier never clips
    with pytest.raises(synth.SynthError, match="unknown engine"):
        synth.synthesise("x", "slt", engine="festival")


def speech_level_trend(pcm: np.ndarray, sr: int) -> tuple[float, float]:
    """(least-squares level change across the speech, last third minus first third) in dB, over 50 ms frames
    within 30 dB of the loudest: measured here, apart from the vendoring script's own 10 ms contour."""
    onset, offset = detect_onset_offset(pcm, sr, clip_name="carrier")
    x = pcm[int(onset * sr) : int(offset * sr)].astype(np.float64) / 32768.0
    frame = int(0.05 * sr)
    n = len(x) // frame
    db = 10 * np.log10(np.mean(x[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-12)
    keep = db >= db.max() - 30.0
    t = (np.arange(n) + 0.5) / n
    k = n // 3
    return float(np.polyfit(t[keep], db[keep], 1)[0]), float(db[-k:][keep[-k:]].mean() - db[:k][keep[:k]].mean())


def test_vendored_carriers_have_a_flat_level_contour() -> None:
    """Vendoring flattens each carrier's own level contour (scripts/vendor_claims.py, flatten_level), so no
    carrier starts with a level trend of its own: before, flite-awb's sentences fell by up to 14 dB
    (45 of 125 carriers over 3 dB, 15 over 4 dB from first to last third); now none is over 4 dB."""
    trends = {}
    for r in manifest_rows():
        with wave.open(str(CLAIMS_DIR / r["file"])) as w:
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        trends[r["file"]] = speech_level_trend(pcm, 48000)
        assert abs(float(r["rms_trend_db"])) < 6.0 and "rms" not in r["trend_flag"], r["file"]
    worst_slope = max(abs(s) for s, _ in trends.values())
    worst_thirds = max(abs(d) for _, d in trends.values())
    assert worst_slope <= 4.0 and worst_thirds <= 4.0, (worst_slope, worst_thirds)


def test_flatten_level_removes_a_fall_and_keeps_the_pauses() -> None:
    """The vendoring gain on a known signal: noise bursts falling 18 dB come out level (within 1.5 dB end to
    end), the digital silence around and between them stays silent, and the peak is set to synth.PEAK."""
    import importlib.util

    from vocalgrad_dataset.sources import synth

    spec = importlib.util.spec_from_file_location("vendor_claims", Path(__file__).parents[1] / "scripts" / "vendor_claims.py")
    vendor_claims = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vendor_claims)
    sr = 48000
    rng = np.random.default_rng(1)
    parts = [np.zeros(int(0.3 * sr))]
    for i in range(10):  # 0.25 s bursts, 0.05 s pauses, each burst 2 dB quieter
        parts += [rng.standard_normal(int(0.25 * sr)) * 0.05 * 10 ** (-2 * i / 20), np.zeros(int(0.05 * sr))]
    parts.append(np.zeros(int(0.2 * sr)))
    pcm = synth.to_pcm16(np.concatenate(parts))
    onset, offset = int(0.3 * sr), len(pcm) - int(0.2 * sr) - int(0.05 * sr)
    flat = vendor_claims.flatten_level(pcm, sr, onset, offset)
    burst = int(0.3 * sr)
    level = [20 * np.log10(np.sqrt(np.mean((flat[onset + i * burst : onset + i * burst + int(0.25 * sr)] / 32768.0) ** 2)))
             for i in range(10)]
    before = [20 * np.log10(np.sqrt(np.mean((pcm[onset + i * burst : onset + i * burst + int(0.25 * sr)] / 32768.0) ** 2)))
              for i in range(10)]
    assert before[-1] - before[0] == pytest.approx(-18, abs=0.3)
    assert abs(level[-1] - level[0]) <= 1.5 and max(level) - min(level) <= 3.0
    assert not flat[:onset].any() and not flat[offset:].any()
    assert not flat[onset + int(0.26 * sr) : onset + int(0.29 * sr)].any()  # a pause times any gain: silence
    assert np.abs(flat).max() == round(synth.PEAK * 32768)


def _vendor_claims_module():  # the regeneration script, imported by path (scripts/ is no package)
    import importlib.util

    spec = importlib.util.spec_from_file_location("vendor_claims", Path(__file__).parents[1] / "scripts" / "vendor_claims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_selection_rule_counts_the_oracles_misses_on_a_carriers_own_rows() -> None:
    """The test-carrier selection (scripts/vendor_claims.py, oracle_misses): the signal oracle on the 24 rows
    of a carrier's own conflict config. The vendored volume carrier is read right on every row; the same
    carrier with a 20 dB fall of its own imposed (what a level-falling voice would bring) is misread, and only
    on rising rows, whatever its claim: the rule catches a carrier's own trend."""
    from vocalgrad_dataset.sources import synth

    vendor_claims = _vendor_claims_module()
    template = next(t for t in load_templates() if t.id == "volume-inc-te1")
    row = next(r for r in manifest_rows() if r["file"] == "volume-inc-te1-flite-awb.wav")
    voice = next(v for v in (*synth.TEST_VOICES, *synth.TEST_FALLBACK_VOICES) if v.id == row["voice_id"])
    with wave.open(str(CLAIMS_DIR / row["file"])) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    assert vendor_claims.oracle_misses(template, voice, pcm, 48000) == []
    fall = 10 ** (np.linspace(0.0, -20.0, len(pcm)) / 20)
    falling = synth.to_pcm16(pcm / 32768.0 * fall, peak=None)
    misses = vendor_claims.oracle_misses(template, voice, falling, 48000)
    assert misses and all(m.endswith("/up") for m in misses), misses
    assert "low/linear/up" in misses
