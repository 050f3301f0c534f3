"""Lexical-conflict metrics against hand counts, the transcript reader's decisions, the report and leaderboard."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.metrics import conflict_metrics, conflict_summary
from harness.models.baselines import TranscriptReader, option_in_text
from harness.models.protocol import AudioClip, Prompt
from harness.results import lm_eval_keys
from harness.tasks import task_kind


def row(gold: str, pred: str | None, claim: str) -> dict:
    return {"gold": gold, "pred": pred, "claim": claim, "congruent": None if claim == "none" else claim == gold,
            "source_clip_id": "c", "raw": pred}


# 4 congruent (3 right), 5 incongruent (1 right, 3 follow the claim, 1 unparsed), 2 neutral (1 right)
ROWS = [
    row("increase", "increase", "increase"), row("decrease", "decrease", "decrease"),
    row("increase", "increase", "increase"), row("decrease", "increase", "decrease"),
    row("increase", "increase", "decrease"), row("increase", "decrease", "decrease"),
    row("decrease", "increase", "increase"), row("decrease", "increase", "increase"), row("decrease", None, "increase"),
    row("increase", "increase", "none"), row("decrease", "increase", "none"),
]


def test_conflict_metrics_by_hand() -> None:
    m = conflict_metrics(ROWS)
    assert m["acc_congruent"] == pytest.approx(3 / 4) and m["acc_congruent_n"] == 4
    assert m["acc_incongruent"] == pytest.approx(1 / 5) and m["acc_incongruent_n"] == 5
    assert m["acc_neutral"] == pytest.approx(1 / 2)
    assert m["claim_following"] == pytest.approx(3 / 5)
    assert m["claim_following_stderr"] == pytest.approx(math.sqrt(0.6 * 0.4 / 5))
    # per-row differences [follows] - [right]: -1 (right), +1, +1, +1 (follow), 0 (unparsed) -> mean 0.4
    d = np.array([-1, 1, 1, 1, 0], dtype=float)
    assert m["claim_gap"] == pytest.approx(0.6 - 0.2) == pytest.approx(d.mean())
    assert m["claim_gap_stderr"] == pytest.approx(d.std(ddof=1) / math.sqrt(5))
    # Wilson 95 % interval of 3/5 (hand formula)
    z = 1.959963984540054
    centre, half = (0.6 + z * z / 10) / (1 + z * z / 5), z * math.sqrt(0.24 / 5 + z * z / 100) / (1 + z * z / 5)
    assert m["claim_following_ci_low"] == pytest.approx(centre - half, abs=1e-9)


def test_conflict_kind_writes_lm_eval_keys() -> None:
    kind = task_kind("volume-conflict")
    summary = kind.metrics(ROWS)
    keys = lm_eval_keys(summary, kind.lm_eval_metrics)
    for m in ("acc_congruent", "acc_incongruent", "acc_neutral", "claim_following", "claim_gap"):
        assert keys[f"{m},none"] == pytest.approx(conflict_summary(ROWS)[m])
        assert isinstance(keys[f"{m}_stderr,none"], float)
    assert "claim" in kind.sample_fields and "congruent" in kind.sample_fields


def test_option_in_text() -> None:
    assert option_in_text("I am speaking at a high pitch.", ["low", "high", "medium"]) == 1
    assert option_in_text("first high then low", ["high-low-medium", "high"]) == 1  # medium never said
    assert option_in_text("it went high, low, medium", ["high-low-medium", "high"]) == 0  # the longer one
    assert option_in_text("high and low", ["high", "low"]) is None  # two equally long: no decision
    assert option_in_text("nothing here", ["yes", "no"]) is None


class FakeWhisper:
    """Stands in for Whisper tiny.en: returns fixed transcripts in call order and counts the calls."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.calls = list(texts), 0

    def transcribe(self, clips: list[AudioClip]) -> list[str]:
        self.calls += 1
        out, self.texts = self.texts[: len(clips)], self.texts[len(clips):]
        return out


def prompt(cid: str, category: str = "volume") -> Prompt:
    return Prompt(("q", AudioClip(np.zeros(160, np.float32), 16000)), clip_id=cid, meta={"category": category})


def test_transcript_reader_answers_the_words() -> None:
    fake = FakeWhisper(["My voice keeps getting louder and louder.", "The volume of my voice is falling.",
                        "The train to the city leaves at noon."])
    reader = TranscriptReader(whisper=fake)
    prompts = [prompt("a"), prompt("b"), prompt("c")]
    answers = reader.generate(prompts, max_new_tokens=8)
    assert answers[:2] == ["increase", "decrease"] and answers[2] in ("increase", "decrease")
    assert fake.calls == 1  # one batched transcription, cached per clip
    reader.generate(prompts, max_new_tokens=8)
    assert fake.calls == 1
    # a claim about another category says nothing about this one
    assert TranscriptReader.read("I keep talking faster and faster.", "volume", ("increase", "decrease")) is None
    assert TranscriptReader.read("I keep talking faster and faster.", "speed", ("increase", "decrease")) == "increase"


def test_volume_conflict_eval_report_and_leaderboard(tmp_path: Path) -> None:
    """The acceptance run: results.json carries the five conflict metrics with stderr; report and leaderboard
    show them; the oracle listens (congruent and incongruent alike), random ignores the words."""
    import json

    from harness.cli import main as harness_cli
    from harness.leaderboard.build import submission_row, write_site
    from harness.leaderboard.submit import make_submission
    from harness.report import report

    runs = {}
    for model in ("signal-oracle", "random"):
        out = tmp_path / model
        assert harness_cli(["eval", "--model", model, "--configs", "volume-conflict", "--out", str(out)]) == 0
        runs[model] = json.loads((out / "results.json").read_text())
    res = runs["signal-oracle"]["results"]["volume-conflict"]
    for m in ("acc_congruent", "acc_incongruent", "acc_neutral", "claim_following", "claim_gap"):
        assert isinstance(res[f"{m},none"], float) and isinstance(res[f"{m}_stderr,none"], float), m
    rows = [json.loads(line) for line in (tmp_path / "signal-oracle" / "samples_volume-conflict.jsonl").open()]
    high = [r["pred"] == r["gold"] for r in rows if r["tier"] == "high"]
    assert sum(high) / len(high) >= 0.95
    # The words never move the oracle; its few misses are low-tier clips of a carrier whose own level already
    # falls 10.6 dB (volume-dec-te1-flite-awb, flagged rms-down): above the low tier the two agree exactly.
    strong = [r for r in rows if r["tier"] != "low" and r["congruent"] is not None]
    by = {c: [r["pred"] == r["gold"] for r in strong if r["congruent"] is c] for c in (True, False)}
    assert abs(sum(by[True]) / len(by[True]) - sum(by[False]) / len(by[False])) <= 0.02
    assert res["claim_following,none"] == pytest.approx(1 - res["acc_incongruent,none"])  # binary: CF = 1 - acc
    assert runs["signal-oracle"]["config"]["source"] == "generate:claims"
    rnd = runs["random"]["metrics"]["volume-conflict"]  # schema 4: intervals live in "metrics"
    assert rnd["claim_following_ci_low"] <= 0.5 <= rnd["claim_following_ci_high"]
    text = report([tmp_path / "signal-oracle", tmp_path / "random"], tmp_path / "report")
    assert "Listen or read?" in text and (tmp_path / "report" / "accuracy_by_congruence.png").is_file()
    # the page's own section (validate does not know the conflict configs yet: rows are rendered directly)
    row = submission_row(make_submission(tmp_path / "signal-oracle", model_name="Oracle"), "oracle.json")
    write_site([row], tmp_path / "site")
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    assert "Listen or read?" in md and f"{100 * res['acc_congruent,none']:.1f}" in md
