"""Listening-test analysis on textbook inputs, and the export into the harness's samples format: `harness
report` and the leaderboard read the human row like a model's."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness
from harness.leaderboard.build import build
from harness.report import compute
from listening.analysis import analyze, careless, cohen_kappa, fleiss_kappa, format_analysis, wilson_interval
from listening.cli import main as listen
from listening.store import Store
from listening.study import answer_options, create_study

# Fleiss (1971) as reproduced on Wikipedia's "Fleiss' kappa" page: 10 subjects, 14 raters, 5 categories;
# P-bar = 0.378, P_e = 0.213, kappa = 0.210.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_textbook_example() -> None:
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(0.20993, abs=5e-5)
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    assert math.isnan(fleiss_kappa([[1, 0]]))  # no item with two raters


def test_cohen_kappa_and_wilson() -> None:
    # Wikipedia's Cohen's kappa example: 50 proposals, yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    lo, hi = wilson_interval(48, 48)  # the normal approximation would give [1, 1]
    assert hi == pytest.approx(1.0) and lo == pytest.approx(48 / (48 + 1.959963984540054**2))
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-5)


def _fill(store: Store, answer_of: dict[str, Callable[[dict[str, Any]], str]]) -> None:
    """Answer every item for each annotator through the real protocol (nonce, audio served first)."""
    for name, token in store.add_annotators(list(answer_of)):
        store.mark(store.annotator(token), "consented")
        store.mark(store.annotator(token), "trained")
        ann = store.annotator(token)
        while (cur := store.current(ann)) is not None:
            item = store.item(cur.position)
            store.serve_audio(ann, cur.seq, cur.nonce)
            labels = [lab for lab, _ in answer_options(item["config"])]
            store.answer(ann, cur.seq, cur.nonce, answer_of[name](item), labels, 900.0, 1)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """24 demo volume items answered by three annotators: perfect, wrong on every 'low' item, always 'increase'."""
    store = create_study(tmp_path_factory.mktemp("study") / "s.sqlite", "volume", 24, 0, source="demo",
                         headphone_trials=0, catch_per_config=0)
    flip = {"increase": "decrease", "decrease": "increase"}
    _fill(store, {
        "A01": lambda it: it["gold"],
        "A02": lambda it: flip[it["gold"]] if it["tier"] == "low" else it["gold"],
        "A03": lambda it: "increase",
    })
    return store


def test_analysis_of_known_answers(study: Store) -> None:
    result = analyze(study.answers())["volume"]
    acc = {a: v["accuracy"] for a, v in result["annotators"].items()}
    assert acc == {"A01": 1.0, "A02": pytest.approx(16 / 24), "A03": 0.5}
    assert result["pooled"]["n"] == 72 and result["pooled"]["correct"] == 24 + 16 + 12
    assert result["by"]["tier"]["low"]["correct"] == 8 + 0 + 4  # 8 low items: A01 all, A02 none, A03 the 4 ups
    assert result["by"]["direction"]["up"]["correct"] == 12 + 8 + 12
    assert result["by"]["direction"]["down"]["correct"] == 12 + 8 + 0
    pairs = {(p["a"], p["b"]): p for p in result["agreement"]["pairs"]}
    assert pairs[("A01", "A02")]["agreement"] == pytest.approx(16 / 24)
    assert pairs[("A01", "A03")]["agreement"] == 0.5 and pairs[("A01", "A03")]["cohen_kappa"] == 0.0
    assert result["agreement"]["fleiss_items"] == 24
    flagged = {a: v["flagged"] for a, v in result["attention"].items()}
    assert flagged == {"A01": False, "A02": False, "A03": True}  # A03 gets half of the high tier right
    assert careless({"volume": result}) == ["A03"]


def test_export_reaches_report_and_leaderboard(study: Store, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run, sub = tmp_path / "run", tmp_path / "subs" / "human.json"
    # A03 is flagged careless: the study is below its design, so a plain export is refused
    assert listen(["export", "--db", str(study.path), "--out", str(run)]) == 2
    assert "below its design: A03 is flagged careless" in capsys.readouterr().err and not run.exists()
    assert listen(["export", "--db", str(study.path), "--out", str(run), "--submission", str(sub),
                   "--allow-incomplete"]) == 0
    assert "MARKED below its design: A03 is flagged careless" in capsys.readouterr().out
    rows = [json.loads(line) for line in (run / "samples_volume.jsonl").read_text().splitlines()]
    answers = {(a["annotator"], a["benchmark_clip_id"]): a["answer"] for a in study.answers()}
    assert {(r["annotator"], r["benchmark_clip_id"]): r["pred"] for r in rows} == answers and len(rows) == 72
    assert {r["model"] for r in rows} == {"human"} and {r["raw"] for r in rows} == {"increase", "decrease"}
    # lm-eval's per-sample keys: the document (and its sha256, as lm-eval hashes it) is the clip's, whoever answered
    hashes: dict[str, set[str]] = {}
    for r in rows:
        hashes.setdefault(r["benchmark_clip_id"], set()).add(r["doc_hash"])
        assert r["doc_hash"] == hashlib.sha256(json.dumps(r["doc"], indent=2, ensure_ascii=False).encode()).hexdigest()
        assert r["resps"] == [[r["raw"]]] and r["target"] == r["gold"] and "annotator" not in r["doc"]
    assert all(len(h) == 1 for h in hashes.values()) and len(hashes) == 72 // len({r["annotator"] for r in rows})
    results = compute(run)  # `harness report` recomputes from the samples alone
    assert results["metrics"]["volume"]["accuracy"] == pytest.approx(52 / 72)
    assert harness(["report", str(run), "--no-figures"]) == 0
    assert "| volume | 72 | 72.2 |" in capsys.readouterr().out
    with (run / "answers.csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == 72
    assert harness(["leaderboard", "validate", str(sub)]) == 0
    # a model's run on the same source beside it: `harness report RUNS...` and the leaderboard page show both
    model_run = tmp_path / "model"
    assert harness(["eval", "--model", "always-increase", "--configs", "volume", "--source", "demo",
                    "--out", str(model_run)]) == 0  # the 72 demo clips (a limited run cannot be submitted)
    assert harness(["leaderboard", "submit", str(model_run), "--model-name", "Always increase",
                    "--out", str(sub.parent / "model.json")]) == 0
    capsys.readouterr()
    assert harness(["report", str(model_run), str(run), "--no-figures"]) == 0
    side_by_side = capsys.readouterr().out.split("## Models side by side")[1].split("\n## ")[0]
    assert "| **always-increase** | — | — | — | 50.0 |" in side_by_side
    assert "| **human** | — | — | — | 72.2 |" in side_by_side and "| Human (paper) | 94.4 |" in side_by_side
    site = build(sub.parent, tmp_path / "site")
    human = next(r for r in site if r.model == "Human (our annotators)")
    assert human.kind == "human" and human.accuracy == {"volume": pytest.approx(100 * 52 / 72)}
    assert next(r for r in site if r.model == "Always increase").kind == "submission"
    page = (tmp_path / "site" / "index.html").read_text()
    # demo data: both rows in the page's "other data" section; the scoring mode is in the row's details
    row, details = page.split('<tr class="row human other below-design" data-model="Human (our annotators)"')[1].split(
        "</tr>")[:2]
    assert ">Human (our annotators)" in row and ">72.2*</td>" in row and "<dd>listening</dd>" in details
    assert "3 of 3 annotators complete and included, 100 % of the answers; excluded: none; BELOW ITS DESIGN" in row
    assert '<tr class="row submission other" data-model="Always increase"' in page
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    assert "| — | Human (our annotators) | demo test (not comparable) | 72.2\\* |" in md  # the mark, escaped for Markdown
    assert harness(["leaderboard", "build", str(sub.parent), "--out", str(tmp_path / "site2")]) == 0
    assert "(1 submission(s), 1 human baseline(s), 6 reference rows)" in capsys.readouterr().out
    capsys.readouterr()
    assert listen(["export", "--db", str(study.path), "--out", str(tmp_path / "run2"), "--drop-careless"]) == 0
    out = capsys.readouterr().out
    assert "left out: A03 (left out by hand)" in out and "MARKED" not in out
    assert json.loads((tmp_path / "run2" / "results.json").read_text())["metrics"]["volume"]["n"] == 48
    assert listen(["analyze", "--db", str(study.path)]) == 0
    assert "careless (high-tier accuracy < 0.75): A03" in capsys.readouterr().out


def test_ternary_study_three_buttons_and_export(tmp_path: Path) -> None:
    from listening.export import samples_rows
    from listening.study import question

    store = create_study(tmp_path / "t.sqlite", "volume-ternary", 12, 0, source="demo", headphone_trials=0,
                         catch_per_config=0, min_annotators=1)
    assert answer_options("volume-ternary") == [("increase", "increase"), ("decrease", "decrease"),
                                                ("constant", "constant")]
    assert question("volume-ternary") == "How does the volume vary with time?"
    assert [lab for lab, _ in answer_options("pitch-yesno")] == ["yes", "no"]
    gold = sorted(it["gold"] for it in store.items())
    assert gold.count("constant") == 2 and gold.count("increase") == gold.count("decrease") == 5
    first_up = next(it["position"] for it in store.items() if it["direction"] == "up")
    _fill(store, {"T1": lambda it: "increase" if it["direction"] == "none" else
                  "constant" if it["position"] == first_up else it["gold"]})
    assert {a["answer"] for a in store.answers()} == {"increase", "decrease", "constant"}
    conf = analyze(store.answers())["volume-ternary"]["confusion"]
    assert conf == {"increase": {"increase": 4, "decrease": 0, "constant": 1}, "decrease": {"increase": 0, "decrease": 5,
                    "constant": 0}, "constant": {"increase": 2, "decrease": 0, "constant": 0}}
    text = format_analysis(analyze(store.answers()))
    assert "| gold \\ answer | increase | decrease | constant |\n|---|---|---|---|\n| increase | 4 | 0 | 1 |" in text
    rows = samples_rows(store)["volume-ternary"]
    assert {r["parser"] for r in rows} == {"ternary-unique-answer-v1"} and len(rows) == 12
    run = tmp_path / "run"
    assert listen(["export", "--db", str(store.path), "--out", str(run)]) == 0
    res = compute(run)["metrics"]["volume-ternary"]
    assert res["accuracy"] == pytest.approx(9 / 12)  # the two unmodified clips "increase", one up "constant"
    assert 0 < res["macro_f1"] < 1


def test_audio_from_a_parquet_build_equals_the_generator(tmp_path: Path) -> None:
    from listening.study import AudioProvider
    from vocalgrad_dataset.build.export import build as build_dataset

    build_dataset("volume", ["test"], tmp_path / "ds", source="demo", progress=False)
    from_build = create_study(tmp_path / "p.sqlite", "volume", 6, 2, dataset=str(tmp_path / "ds"))
    generated = create_study(tmp_path / "g.sqlite", "volume", 6, 2, source="demo")
    items = [it["benchmark_clip_id"] for it in from_build.items()]
    assert items == [it["benchmark_clip_id"] for it in generated.items()]  # same pool, same draw
    a, b = AudioProvider(from_build), AudioProvider(generated)
    for cid in items[:2]:
        wav = a.wav("volume", cid)
        assert wav[:4] == b"RIFF" and wav == b.wav("volume", cid)
    assert len(list(a.cache_dir.glob("*.wav"))) == 2 and not any(cid in p.name for p in a.cache_dir.iterdir()
                                                                 for cid in items)


def test_bad_databases_fail_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite")
    assert listen(["analyze", "--db", str(junk)]) == 2
    assert "not a listening-study database" in capsys.readouterr().err
    assert listen(["export", "--db", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "o")]) == 2
    assert "no study database" in capsys.readouterr().err and not (tmp_path / "o").exists()
    made = tmp_path / "s.sqlite"
    assert listen(["init", "--db", str(made), "--config", "volume", "--source", "demo", "--n", "100"]) == 2
    assert "but the source has only 3" in capsys.readouterr().err and not list(tmp_path.glob("s.sqlite*"))
    assert listen(["init", "--db", str(made), "--config", "volume", "--source", "demo", "--n", "4",
                   "--annotators", "1"]) == 0
    out = capsys.readouterr().out
    assert "A01: http://127.0.0.1:8000/#token=" in out
    token = out.split("#token=")[1].split()[0]
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("s.sqlite*"))  # database and its WAL
    assert token.encode() not in stored and hashlib.sha256(token.encode()).hexdigest().encode() in stored
    assert listen(["init", "--db", str(made), "--config", "volume", "--source", "demo", "--n", "4"]) == 2
    assert "exists" in capsys.readouterr().err
