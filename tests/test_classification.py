"""The classify kind: metrics against scikit-learn, the MELD-shaped fixture end to end, the MELD loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

from harness.classification import classification_metrics
from harness.kinds.choice import CLASSIFY
from harness.mcq_source import parse_column_map
from harness.meld import MELD_EMOTIONS, meld_items, video_audio
from tests.helpers.meld import COUNTS, build_meld_shaped

LABELS = ["anger", "joy", "neutral", "sadness"]


def test_metrics_equal_scikit_learn_on_known_predictions() -> None:
    rng = np.random.default_rng(3)
    gold = [LABELS[i] for i in rng.integers(0, 4, 60)]
    pred: list[str | None] = [LABELS[i] for i in rng.integers(0, 4, 60)]
    pred[0] = pred[5] = None  # unparsed: a miss of the true class, nobody's false positive
    pred[1] = "sadness" if gold[1] != "sadness" else "anger"
    m = classification_metrics(gold, pred, LABELS, samples=200)
    sk_pred = [p if p is not None else "<none>" for p in pred]
    p, r, f, s = precision_recall_fscore_support(gold, sk_pred, labels=LABELS, zero_division=0)
    for i, lab in enumerate(LABELS):
        assert m[f"precision_{lab}"] == pytest.approx(p[i]) and m[f"recall_{lab}"] == pytest.approx(r[i])
        assert m[f"f1_{lab}"] == pytest.approx(f[i]) and m[f"support_{lab}"] == s[i]
    assert m["macro_f1"] == pytest.approx(f1_score(gold, sk_pred, labels=LABELS, average="macro", zero_division=0))
    assert m["weighted_f1"] == pytest.approx(f1_score(gold, sk_pred, labels=LABELS, average="weighted",
                                                      zero_division=0))
    assert m["accuracy"] == pytest.approx(accuracy_score(gold, sk_pred))
    assert m["macro_f1_ci_low"] < m["macro_f1"] < m["macro_f1_ci_high"]
    assert m["confusion"][LABELS.index(gold[0])][4] >= 1  # the unparsed column


def test_a_class_never_predicted_has_precision_zero() -> None:
    m = classification_metrics(["joy", "anger", "joy"], ["joy", "joy", "joy"], ["anger", "joy"], samples=0)
    assert m["precision_anger"] == 0.0 and m["recall_anger"] == 0.0 and m["f1_joy"] == pytest.approx(0.8)
    assert m["macro_f1"] == pytest.approx(0.4)


def test_columns_need_audio_and_label() -> None:
    with pytest.raises(ValueError, match="no column given for label"):
        parse_column_map("audio=wav", "--columns", *CLASSIFY.columns)
    with pytest.raises(ValueError, match="did you mean 'label'"):
        parse_column_map("audio=wav,labl=x", "--columns", *CLASSIFY.columns)


def test_random_on_the_meld_shaped_fixture_matches_the_analytic_expectation(tmp_path: Path) -> None:
    from harness.cli import main

    folder = build_meld_shaped(tmp_path)
    out = tmp_path / "run"
    main(["eval", "--model", "random", "--dataset", str(folder / "items.csv"), "--kind", "classify",
          "--columns", "audio=wav,label=emotion,id=utt", "--mode", "choices", "--out", str(out), "--no-preflight"])
    res = json.loads((out / "results.json").read_text())
    keys = res["results"]["classify"]
    assert {f"f1_{e},none" for e in MELD_EMOTIONS} <= set(keys) and "macro_f1,none" in keys
    m = res["metrics"]["classify"]
    # Uniform guesser over K labels: recall_c = 1/K, precision_c = prevalence p_c, so
    # F1_c = 2·p_c·(1/K)/(p_c + 1/K); the expected macro-F1 is their mean (first order in the counts).
    k, n = len(MELD_EMOTIONS), sum(COUNTS.values())
    expected = np.mean([2 * (COUNTS[e] / n) / k / (COUNTS[e] / n + 1 / k) for e in MELD_EMOTIONS])
    assert m["macro_f1_ci_low"] <= expected <= m["macro_f1_ci_high"]
    assert m["support_neutral"] == COUNTS["neutral"] and m["n"] == n
    sample = json.loads((out / "samples_classify.jsonl").read_text().splitlines()[0])
    assert sample["options"] == list(MELD_EMOTIONS) and sample["answer_words"] == list("ABCDEFG")


def test_meld_layout_is_read_without_columns(tmp_path: Path) -> None:

    folder = build_meld_shaped(tmp_path, {"joy": 2, "neutral": 1})
    src = CLASSIFY.mapped_source(str(folder), "test", None)
    assert src.config_names(None) == ["meld"]
    rows = list(src.rows("meld", src.units("meld")))
    assert [r["benchmark_clip_id"] for r in rows] == ["dia0_utt0", "dia0_utt1", "dia0_utt2"]
    assert [r["label"] for r in rows] == ["joy", "joy", "neutral"] and rows[0]["options"] == list(MELD_EMOTIONS)  # the protocol's 7
    assert rows[0]["audio"]["sampling_rate"] == 16000 and len(rows[0]["audio"]["array"]) == 16000


def test_missing_audio_names_the_csv_row(tmp_path: Path) -> None:
    folder = build_meld_shaped(tmp_path, {"joy": 2})
    (folder / "output_repeated_splits_test" / "dia0_utt1.wav").unlink()
    with pytest.raises(ValueError, match=r"test_sent_emo.csv: row 3: no audio dia0_utt1"):
        meld_items(folder, "test")


def test_a_video_without_ffmpeg_says_how_to_extract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.meld as meld

    video = tmp_path / "dia0_utt0.mp4"
    video.write_bytes(b"\x00")
    monkeypatch.setattr(meld.shutil, "which", lambda _name: None)
    with pytest.raises(ValueError, match=r"is a video; install FFmpeg, or extract its audio first: ffmpeg -i"):
        video_audio(video, "x")


def test_a_mapped_video_is_read_through_ffmpeg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A --columns dataset whose audio column names a video: the source hands it to FFmpeg (here missing),
    never to soundfile, whose error would not say how to extract the audio."""
    import harness.meld as meld

    (tmp_path / "a.mp4").write_bytes(b"\x00")
    (tmp_path / "b.mp4").write_bytes(b"\x00")
    (tmp_path / "test.csv").write_text("utt,wav,emotion\nu0,a.mp4,joy\nu1,b.mp4,anger\n", encoding="utf-8")
    monkeypatch.setattr(meld.shutil, "which", lambda _name: None)
    src = CLASSIFY.mapped_source(str(tmp_path / "test.csv"), "test", "audio=wav,label=emotion,id=utt")
    with pytest.raises(ValueError, match=r"is a video; install FFmpeg"):
        list(src.rows("classify", src.units("classify")))
