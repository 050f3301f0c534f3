"""Leaderboard: submit a real harness run, reject tampered submissions, build the site, and use the page in
headless Debian chromium (Playwright driving /usr/bin/chromium; no browser download)."""

from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness
from harness.leaderboard.build import build
from harness.leaderboard.schema import SUBMISSION_SCHEMA, SUBMISSION_SCHEMA_VERSION
from harness.leaderboard.validate import validate_submission
from harness.runner import EvalSettings, run_eval

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two complete runs (two categories of the demo test split) and one cut short with --limit."""
    root = tmp_path_factory.mktemp("lb")
    out = {}
    for model in ("random", "always-increase"):
        out[model] = root / model
        run_eval(EvalSettings(model, ["volume", "noise"], str(out[model]), source="demo", batch_size=24))
    out["limited"] = root / "limited"
    run_eval(EvalSettings("random", ["volume"], str(out["limited"]), source="demo", limit=10))
    return out


@pytest.fixture(scope="module")
def submission(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("subs") / "random.json"
    assert harness(["leaderboard", "submit", str(runs["random"]), "--model-name", "Coin <b>flip</b>",
                    "--params", "0", "--out", str(path)]) == 0
    return path


def _validate(sub: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(sub))
    code = harness(["leaderboard", "validate", str(path)])
    seen = capsys.readouterr()
    return code, seen.out + seen.err


def test_submission_validates(submission: Path, capsys: pytest.CaptureFixture) -> None:
    assert harness(["leaderboard", "validate", str(submission)]) == 0
    assert "OK" in capsys.readouterr().out
    sub = json.loads(submission.read_text())
    assert sub["schema_version"] == SUBMISSION_SCHEMA_VERSION
    assert sub["model"] == {"name": "Coin <b>flip</b>", "registry_name": "random", "params": 0, "precision": "n/a",
                            "revision": None, "adapter": None, "prompt_variant": "default",
                            "scoring_mode": "generate", "notes": None}
    assert [len(sub["samples"][c]) for c in ("volume", "noise")] == [72, 72]
    assert harness(["leaderboard", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == SUBMISSION_SCHEMA


def _metric(sub: dict[str, Any]) -> None:
    sub["results"]["results"]["volume"]["accuracy"] += 0.25


def _group(sub: dict[str, Any]) -> None:
    sub["results"]["groups"]["vocalgrad"]["accuracy"] = 0.99


def _missing(sub: dict[str, Any]) -> None:
    del sub["samples"]["volume"][5:8]


def _parser_version(sub: dict[str, Any]) -> None:
    sub["results"]["versions"]["parser"] = "0"
    for row in sub["samples"]["noise"]:
        row["parser"] = "main-unique-direction-v0"


def _pred(sub: dict[str, Any]) -> None:
    row = sub["samples"]["volume"][0]
    row["pred"] = row["gold"] if row["pred"] != row["gold"] else ("increase" if row["gold"] == "decrease" else "decrease")


def _gold(sub: dict[str, Any]) -> None:
    row = sub["samples"]["noise"][3]
    row["gold"] = "increase" if row["gold"] == "decrease" else "decrease"


def _tier(sub: dict[str, Any]) -> None:
    row = sub["samples"]["volume"][2]
    row["tier"] = "high" if row["tier"] != "high" else "low"


def _margin(sub: dict[str, Any]) -> None:  # a choices row whose pred is not the sign of its margin
    row = sub["samples"]["volume"][4]
    row["mode"], row["margin"] = "choices", -1.0 if row["pred"] == "increase" else 1.0


def _parsed_flag(sub: dict[str, Any]) -> None:
    row = sub["samples"]["noise"][6]
    row["parsed"] = not row["parsed"]


def _foreign_id(sub: dict[str, Any]) -> None:
    sub["samples"]["volume"][0]["benchmark_clip_id"] = "p999__p999_001__linear__low__up"


def _version(sub: dict[str, Any]) -> None:
    sub["schema_version"] = "99"


def _no_model(sub: dict[str, Any]) -> None:
    del sub["model"]


@pytest.mark.parametrize(("tamper", "message"), [
    (_metric, "results.volume.accuracy: claimed"),
    (_group, "groups.vocalgrad.accuracy: claimed 0.99"),
    (_missing, "volume: 3 of 72 clips missing"),
    (_parser_version, "parser version '0'"),
    (_pred, "pred does not follow from the raw answer"),
    (_gold, "gold label contradicts the clip id"),
    (_tier, "volume: 1 row(s) where tier/curve/direction contradict the clip id"),
    (_margin, "volume: 1 row(s) where pred does not follow the choice margin"),
    (_parsed_flag, "noise: 1 row(s) where parsed flag contradicts pred"),
    (_foreign_id, "clip ids not in the dataset"),
    (_version, "schema version '99' is not supported"),
    (_no_model, "missing 'model'"),
])  # fmt: skip
def test_tampered_submissions_are_rejected(submission: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                          tamper: Any, message: str) -> None:
    sub = json.loads(submission.read_text())
    tamper(sub)
    code, text = _validate(sub, tmp_path, capsys)
    assert code == 1 and "INVALID" in text and message in text, text


def test_altered_samples_break_the_digest_even_when_metrics_are_fixed(submission: Path) -> None:
    sub = json.loads(submission.read_text())
    forged = copy.deepcopy(sub)
    flipped = "increase" if forged["samples"]["volume"][0]["pred"] == "decrease" else "decrease"
    forged["samples"]["volume"][0]["raw"] = flipped  # consistent pred, recomputed metrics: only the digest
    forged["samples"]["volume"][0]["pred"] = flipped
    from harness.results import build_results

    res = forged["results"]
    fixed = build_results(forged["samples"], run_config=res["config"], task_configs=res["configs"],
                          n_original={c: 72 for c in forged["samples"]}, date=res["date"])
    forged["results"] = {**res, **{k: fixed[k] for k in ("results", "groups", "breakdowns", "n-samples")}}
    assert validate_submission(forged) == ["volume: samples altered after submission (sha256 mismatch)"]


def test_submit_refuses_an_incomplete_run(runs: dict[str, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "limited.json"
    assert harness(["leaderboard", "submit", str(runs["limited"]), "--model-name", "x", "--out", str(out)]) == 1
    assert "62 of 72 clips missing" in capsys.readouterr().err and not out.exists()
    assert harness(["leaderboard", "submit", str(tmp_path / "nope"), "--model-name", "x", "--out", str(out)]) == 2
    assert "no results.json" in capsys.readouterr().err


@pytest.fixture(scope="module")
def site(runs: dict[str, Path], submission: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    subs = submission.parent
    assert harness(["leaderboard", "submit", str(runs["always-increase"]), "--model-name", "Always up",
                    "--out", str(subs / "always.json")]) == 0
    out = tmp_path_factory.mktemp("site")
    assert harness(["leaderboard", "build", str(subs), "--out", str(out)]) == 0
    return out


def test_build_writes_page_markdown_csv_and_space_card(site: Path, submission: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    md = (site / "leaderboard.md").read_text()
    for name in ("Coin &lt;b&gt;flip&lt;/b&gt;", "Always up", "Human (paper)", "Kimi-Audio (paper)",
                 "MiMo-Audio (paper)", "Gemini 3 Flash (paper)", "Step-Audio 2 mini (paper)", "Audio Flamingo 3 (paper)"):
        assert name in md, name
    rows = list(csv.DictReader((site / "leaderboard.csv").open()))
    assert len(rows) == 8 and [r["kind"] for r in rows].count("submission") == 2
    human = next(r for r in rows if r["kind"] == "human")
    assert human["avg"] == "94.4" and human["volume"] == "100.0"
    assert {r["rank"] for r in rows if r["kind"] == "submission"} == {"1", "2"}
    page = (site / "index.html").read_text()
    assert "Coin &lt;b&gt;flip&lt;/b&gt;" in page and "<b>flip" not in page  # submitter text is escaped
    assert "sdk: static" in (site / "README.md").read_text()
    bad = tmp_path / "subs"
    shutil.copytree(submission.parent, bad)
    sub = json.loads((bad / "random.json").read_text())
    _metric(sub)
    (bad / "random.json").write_text(json.dumps(sub))
    assert harness(["leaderboard", "build", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "random.json" in capsys.readouterr().err
    rows = build(bad, tmp_path / "o2", skip_invalid=True)
    assert [r.model for r in rows if r.kind == "submission"] == ["Always up"]


def test_page_in_headless_chromium(site: Path, submission: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(site.joinpath("index.html").as_uri())
            assert page.title() == "VocalGrad leaderboard"
            names = page.locator("#leaderboard tbody tr td:nth-child(2)")
            assert names.count() == 8
            shown = names.all_inner_texts()
            for name in ("Coin <b>flip</b>", "Always up", "Human (paper)", "Audio Flamingo 3 (paper)"):
                assert name in shown, name
            header = page.locator("#leaderboard thead th")
            header.filter(has_text="model").click()  # text: A to Z
            assert names.all_inner_texts() == sorted(shown, key=str.lower)
            avg_col = [c for c, t in enumerate(header.all_inner_texts()) if t.strip() == "avg"][0]
            avg = page.locator(f"#leaderboard tbody tr td:nth-child({avg_col + 1})")

            def values() -> list[float]:
                return [float(t.rstrip("*")) for t in avg.all_inner_texts()]

            header.nth(avg_col).click()  # numbers: high to low first
            assert values() == sorted(values(), reverse=True) and values()[0] == 94.4
            assert header.nth(avg_col).get_attribute("aria-sort") == "descending"
            header.nth(avg_col).click()
            assert values() == sorted(values())
            assert header.nth(avg_col).get_attribute("aria-sort") == "ascending"
            assert not errors, errors
        finally:
            browser.close()
