"""Lexical-conflict metrics against hand counts, the transcript reader's decisions, the report and leaderboard."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest

from harness.kinds import task_kind
from harness.metrics import chance_tests, conflict_macro, conflict_metrics, conflict_summary
from harness.models.baselines import (
    READ_PARTS,
    TranscriptReader,
    keyword_direction,
    levelled,
    option_in_text,
    pooled_claim,
    positive_degree,
    reader_keywords,
    reading_views,
)
from harness.models.protocol import AudioClip, Prompt
from harness.results import lm_eval_keys


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


def test_conflict_group_tests_each_configs_claim_following_against_chance() -> None:
    """The group's per-config chance tests count exactly the incongruent rows answered with the claim (3 of 5
    in ROWS, 0 of 2 below) and adjust over the configs tested; the pooled CF has its own p."""
    listener = [row("increase", "increase", "decrease"), row("decrease", "decrease", "increase"),
                row("increase", "increase", "increase")]
    group = conflict_macro({"volume-conflict": ROWS, "pitch-conflict": listener})
    tests = group["claim_following_vs_chance"]
    assert {c: (t["k"], t["n"]) for c, t in tests.items()} == {"volume-conflict": (3, 5), "pitch-conflict": (0, 2)}
    assert tests == chance_tests({"volume-conflict": (3, 5), "pitch-conflict": (0, 2)})
    assert tests["volume-conflict"]["p_adjusted"] == pytest.approx(min(1, 2 * tests["volume-conflict"]["p"]))
    assert group["claim_following_p"] == pytest.approx(math.erfc(abs(3 - 3.5) / math.sqrt(7 / 4) / math.sqrt(2)))
    assert conflict_metrics(ROWS)["claim_following_p"] == pytest.approx(math.erfc(0.5 / math.sqrt(1.25) / math.sqrt(2)))


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
    """Stands in for Whisper tiny.en: returns fixed transcripts in call order (then empty ones), records the
    clips it was given and counts the calls."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.calls, self.heard = list(texts), 0, []

    def transcribe(self, clips: list[AudioClip]) -> list[str]:
        self.calls += 1
        self.heard += clips
        out, self.texts = self.texts[: len(clips)], self.texts[len(clips):]
        return out + [""] * (len(clips) - len(out))


def prompt(cid: str, category: str = "volume") -> Prompt:
    return Prompt(("q", AudioClip(np.zeros(160, np.float32), 16000)), clip_id=cid, meta={"category": category})


def test_transcript_reader_answers_the_words() -> None:
    fake = FakeWhisper(["My voice keeps getting louder and louder.", "The volume of my voice is falling.",
                        "The train to the city leaves at noon."])
    reader = TranscriptReader(whisper=fake)
    prompts = [prompt("a"), prompt("b"), prompt("c")]
    answers = reader.generate(prompts, max_new_tokens=8)
    assert answers[:2] == ["increase", "decrease"] and answers[2] in ("increase", "decrease")
    # the whole clips in one batch; the further reading views only of the clip whose words claimed nothing (c)
    assert fake.calls == 2 and len(fake.heard) == 3 + len(reading_views(prompts[2].segments[-1])) - 1
    reader.generate(prompts, max_new_tokens=8)
    assert fake.calls == 2  # cached per clip
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
    # The words never move the oracle: with every carrier's own level trend flattened when vendored (before,
    # volume-dec-te1-flite-awb fell 10.6 dB by itself and cost low-tier clips on one congruence side only),
    # congruent and incongruent accuracy agree on every tier.
    claiming = [r for r in rows if r["congruent"] is not None]
    by = {c: [r["pred"] == r["gold"] for r in claiming if r["congruent"] is c] for c in (True, False)}
    assert abs(sum(by[True]) / len(by[True]) - sum(by[False]) / len(by[False])) <= 0.02
    assert res["acc_congruent,none"] == res["acc_incongruent,none"] == 1.0
    assert res["claim_following,none"] == pytest.approx(1 - res["acc_incongruent,none"])  # binary: CF = 1 - acc
    assert runs["signal-oracle"]["config"]["source"] == "generate:claims"
    rnd = runs["random"]["metrics"]["volume-conflict"]  # schema 4: intervals live in "metrics"
    assert rnd["claim_following_ci_low"] <= 0.5 <= rnd["claim_following_ci_high"]
    text = report([tmp_path / "signal-oracle", tmp_path / "random"], tmp_path / "report")
    assert "Listen or read?" in text and (tmp_path / "report" / "accuracy_by_congruence.png").is_file()
    # a conflict-only run has no point for the category, tier, curve or bias figures: none is drawn empty
    assert {f.name.split(".")[0] for f in (tmp_path / "report").iterdir() if f.suffix == ".csv"} == {
        "accuracy_by_congruence"}
    # each run's "CF vs 0.5" cell: the oracle never follows the words, random follows them at chance
    for model, verdict in (("signal-oracle", "below"), ("random", "at chance")):
        test = runs[model]["group_metrics"]["conflict"]["claim_following_vs_chance"]["volume-conflict"]
        assert test["vs_chance"] == verdict, model
        cell = f"{verdict} [{100 * test['ci_low']:.1f}, {100 * test['ci_high']:.1f}] (p {test['p']:.2g}"
        assert cell in text, (model, cell)
    # the page's own section (validate does not know the conflict configs yet: rows are rendered directly)
    row = submission_row(make_submission(tmp_path / "signal-oracle", model_name="Oracle"), "oracle.json")
    write_site([row], tmp_path / "site")
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    assert "Listen or read?" in md and f"{100 * res['acc_congruent,none']:.1f}" in md


def level_db(x: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(np.asarray(x, dtype=np.float64) ** 2)))


def test_levelled_lifts_a_fading_clip_to_one_level() -> None:
    """The reader's gain control: speech-like bursts fading by 24 dB come out within 3 dB of each other; the
    pauses between them stay (near) silent."""
    sr = 16000
    rng = np.random.default_rng(0)
    bursts = []
    for i in range(8):  # 0.2 s of noise, 0.1 s of silence, 8 times, each 3 dB quieter than the last
        bursts += [rng.standard_normal(int(0.2 * sr)) * 0.3 * 10 ** (-3 * i / 20), np.zeros(int(0.1 * sr))]
    x = np.concatenate(bursts).astype(np.float32)
    y = levelled(x, sr)
    burst = int(0.3 * sr)
    first, last = y[: int(0.2 * sr)], y[7 * burst : 7 * burst + int(0.2 * sr)]
    assert level_db(x[7 * burst : 7 * burst + int(0.2 * sr)]) - level_db(x[: int(0.2 * sr)]) == pytest.approx(-21, abs=0.5)
    assert abs(level_db(last) - level_db(first)) <= 3.0
    assert np.abs(y).max() == pytest.approx(0.5)
    assert not y[int(0.2 * sr) + 800 : burst - 800].any()  # silence times any gain is silence


def test_reading_views_are_the_clip_levelled_and_overlapping_parts() -> None:
    x = np.linspace(-0.1, 0.1, 16000, dtype=np.float32)
    views = reading_views(AudioClip(x, 16000))
    assert len(views) == 2 + len(READ_PARTS)
    np.testing.assert_array_equal(views[0].array, x)
    assert [len(v.array) for v in views[2:]] == [9600, 9600]  # 0-60 % and 40-100 %: they overlap by 20 %
    np.testing.assert_array_equal(views[3].array, views[1].array[6400:])


def test_fuzzy_keywords_and_pooled_claims() -> None:
    from vocalgrad_dataset.sources.claims import claim_words

    volume = claim_words("volume")
    assert keyword_direction("quieter", volume) == "decrease"
    assert keyword_direction("quitter", volume) == "decrease"  # Whisper's near miss of a keyword
    assert keyword_direction("loudder", volume) == "increase"
    assert keyword_direction("lauder", volume) is None  # not similar enough to "louder" (ratio 0.83)
    assert keyword_direction("squieter", volume) is None  # another first letter
    assert keyword_direction("quiet", volume) is None  # short words never match by similarity
    # pooled over views: one view that lost the keyword does not matter, a tie claims nothing
    assert pooled_claim(["My voice keeps getting", "getting quieter and", ""], "volume") == "decrease"
    assert pooled_claim(["louder", "quieter"], "volume") is None
    assert pooled_claim(["louder and louder", "quieter"], "volume") == "increase"
    assert pooled_claim(["The train to the city leaves at noon."], "volume") is None


def test_fuzzy_reading_of_every_template_claims_what_it_says() -> None:
    """Similarity matching adds no claim to any carrier sentence: each template read alone claims its own
    direction in its category, and the neutral ones claim nothing in any category."""
    from vocalgrad_dataset.categories import CATEGORY_NAMES
    from vocalgrad_dataset.sources.claims import load_templates

    for t in load_templates():
        for cat in CATEGORY_NAMES if t.claim == "none" else (t.category,):
            assert pooled_claim([t.text], cat) == (None if t.claim == "none" else t.claim), (t.id, cat)


def test_reader_pools_the_views_and_never_listens() -> None:
    """The whole clip's transcript lost the keyword, a part heard it: the reader answers the claim. The same
    words over a rising and a falling clip give the same answer (it reads, never listens)."""
    sr = 16000
    t = np.arange(sr * 2) / sr
    rising = (np.sin(2 * np.pi * 200 * t) * np.linspace(0.01, 0.3, len(t))).astype(np.float32)
    words = ["My voice keeps getting", "My voice keeps getting", "My voice keeps", "getting quieter and quieter"]
    answers = []
    for clip in (rising, rising[::-1].copy()):
        reader = TranscriptReader(whisper=FakeWhisper(list(words)))
        p = Prompt(("q", AudioClip(clip, sr)), clip_id="x", meta={"category": "volume"})
        answers.append(reader.generate([p], max_new_tokens=8)[0])
        assert reader.transcribe_views([p])[0] == words
    assert answers == ["decrease", "decrease"]


def test_reader_lexicon_adds_the_plain_adjectives() -> None:
    """Whisper drops the comparative ending of a faint last word ("Each word comes out quiet"): the reader's
    lexicon has the plain adjective of each comparative keyword, never one that stands for both directions."""
    assert [positive_degree(w) for w in ("quieter", "bigger", "steadier", "duller", "louder", "clean", "rising")] == [
        "quiet", "big", "steady", "dull", "loud", None, None]
    volume = reader_keywords("volume")
    assert {"quiet", "soft"} <= set(volume["decrease"]) and "loud" in volume["increase"]
    assert pooled_claim(["Each word come out quiet"], "volume") == "decrease"
    assert pooled_claim(["Each word comes out loud, you're number left"], "volume") == "increase"
    assert pooled_claim(["The sound gets clear"], "clarity") == "increase"
    assert pooled_claim(["Each word comes out quiet"], "pitch") is None  # another category's word
    assert pooled_claim(["No, my voice, sense dryer."], "echo") == "decrease"  # another spelling of "drier"
    # roughness's "softer" and volume's "softer" are decrease words; the plain forms never cross directions
    for cat in ("speed", "pitch", "volume", "distortion", "roughness", "noise", "echo", "clarity", "vibration"):
        words = reader_keywords(cat)
        assert not set(words["increase"]) & set(words["decrease"]), cat


@functools.cache
def _incongruent_test_rows(category: str) -> list[tuple[str, str]]:
    """(clip id, claim) of a conflict config's incongruent test rows, from the carriers and the grid (no audio)."""
    from vocalgrad_dataset.generate import config_clips, source_clips, unit_ids
    from vocalgrad_dataset.grid import parse_clip_id
    from vocalgrad_dataset.tasks import config_spec

    spec = config_spec(f"{category}-conflict")
    out = []
    for clip in config_clips(spec, source_clips("test", "claims")):
        for cid in unit_ids(spec, clip.source_item_id, clip.source_clip_id):
            if clip.claim != "none" and parse_clip_id(cid)[2].label != clip.claim:
                out.append((cid, clip.claim))
    return out


@functools.cache
def _random_follows(seed: int) -> dict[str, tuple[int, int]]:
    """Category -> (incongruent test rows `random` answers with the claim, rows) at `seed`, by the harness's own
    seeded_draw on prompts as the harness makes them (cached: both tests below walk the same 400 seeds)."""
    from harness.models.baselines import seeded_draw
    from vocalgrad_dataset.categories import CATEGORY_NAMES

    labels = ("increase", "decrease")
    out = {}
    for c in CATEGORY_NAMES:
        rows = _incongruent_test_rows(c)
        out[c] = (sum(seeded_draw(seed, Prompt((), clip_id=cid, meta={"category": c}), labels) == claim
                      for cid, claim in rows), len(rows))
    return out



def test_random_claim_following_is_chance_over_seeds_and_its_default_seed_gives_the_readme_counts() -> None:
    """`random` ignores the words: over 400 seeds on the nine configs' incongruent test rows, its CF averages
    0.5 and its Wilson 95 % interval excludes 0.5 at the nominal ~5 % rate per config (so some config of nine
    misses at ~37 % of seeds, as roughness does at the default seed 1234, the README's 53 of 84)."""
    from harness.metrics import wilson_interval
    from vocalgrad_dataset.categories import CATEGORY_NAMES

    assert _random_follows(1234)["roughness"] == (53, 84)  # the README's miss, reproduced
    misses = seeds_with_a_miss = 0
    shares = []
    for seed in range(400):
        missed = False
        for c in CATEGORY_NAMES:
            k, n = _random_follows(seed)[c]
            lo, hi = wilson_interval(k / n, n)
            missed |= not lo <= 0.5 <= hi
            misses += not lo <= 0.5 <= hi
            shares.append(k / n)
        seeds_with_a_miss += missed
    assert abs(float(np.mean(shares)) - 0.5) < 0.005
    assert 0.03 < misses / (400 * len(CATEGORY_NAMES)) < 0.07  # nominal 0.05
    assert 0.25 < seeds_with_a_miss / 400 < 0.50  # 1 - 0.95**9 = 0.37


def test_random_claim_following_is_at_chance_on_all_nine_configs_tested_together() -> None:
    """The issue's "random: CF within its 95 % CI of 0.5" for nine configs at once: at the default seed every
    config's joint interval (chance_tests, family-wise 95 %) holds 0.5, roughness's own 95 % interval does
    not (p 0.016, x9 = 0.15); over 400 seeds some config is called off chance for at most ~5 % of seeds."""
    from vocalgrad_dataset.categories import CATEGORY_NAMES

    default = chance_tests(_random_follows(1234))
    assert {c: t["vs_chance"] for c, t in default.items()} == dict.fromkeys(CATEGORY_NAMES, "at chance")
    assert all(t["ci_low"] <= 0.5 <= t["ci_high"] for t in default.values())
    assert default["roughness"]["p"] < 0.05 < default["roughness"]["p_adjusted"]
    off = sum(any(t["vs_chance"] != "at chance" for t in chance_tests(_random_follows(seed)).values())
              for seed in range(400))
    assert 0.01 < off / 400 < 0.08  # Bonferroni holds the family at <= 0.05 (discrete: a little under)
