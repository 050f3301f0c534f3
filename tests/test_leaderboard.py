"""Leaderboard: submit a real harness run, reject tampered submissions, build the site, and use the page in
headless Debian chromium (Playwright driving /usr/bin/chromium; no browser download)."""

from __future__ import annotations

import copy
import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness
from harness.data import CONFIGS
from harness.leaderboard.build import (
    Row,
    build,
    data_label,
    is_official,
    model_family,
    reference_rows,
    write_site,
)
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
    sub["results"]["results"]["volume"]["accuracy,none"] += 0.25


def _group(sub: dict[str, Any]) -> None:
    sub["results"]["group_metrics"]["vocalgrad"]["accuracy"] = 0.99


def _missing(sub: dict[str, Any]) -> None:
    del sub["samples"]["volume"][5:8]


def _parser_version(sub: dict[str, Any]) -> None:
    sub["results"]["vocalgrad_versions"]["parser"] = "0"
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
    (_metric, "results.volume.accuracy,none: claimed"),
    (_group, "group_metrics.vocalgrad.accuracy: claimed 0.99"),
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
    forged["results"] = {**res, **{k: fixed[k] for k in ("results", "groups", "metrics", "group_metrics",
                                                               "breakdowns", "n-samples")}}
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
    assert human["avg"] == "94.4" and human["volume"] == "100.0" and human["family"] == "human"
    # demo-source runs: listed after every official row, not comparable, never ranked
    assert [r["comparable"] for r in rows] == ["True"] * 6 + ["False"] * 2
    assert {(r["rank"], r["family"], r["data"]) for r in rows if r["kind"] == "submission"} == {
        ("", "baseline", "demo test (not comparable)")}
    assert next(r for r in rows if r["model"] == "Kimi-Audio (paper)")["family"] == "kimi-audio"
    assert next(r for r in rows if r["model"] == "Audio Flamingo 3 (paper)")["family"] == "audio-flamingo-3"
    official, other = md.split("## Other data: not comparable with the benchmark")
    assert "Human (paper)" in official and "Always up" in other and "Always up" not in official
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


def _acc(base: float) -> dict[str, float]:
    return {c: base + i % 3 for i, c in enumerate(CONFIGS)}


def _demo_rows() -> list[Row]:
    """Official submissions of two families and two prompts, one incomplete; two rows on other data, one
    of them with the highest mean of all (it must still come after every official row)."""
    return reference_rows() + [
        Row("submission", "Qwen2-Audio LoRA (volume, all_linear, r16)", "VCTK test (official)", _acc(60), 61.0,
            True, True, "qwen2-audio", 8_400_000_000, "bfloat16", "org/qwen2-audio-lora-volume", "default",
            "generate", 21600),
        Row("submission", "Qwen2-Audio-7B-Instruct", "VCTK test (official)", _acc(51), 52.0, True, True,
            "qwen2-audio", 8_400_000_000, "bfloat16", "", "swap_order+audio_ref", "choices", 21600),
        Row("submission", "Granite speech", "VCTK test (official, parquet)", {"volume": 58.0}, 58.0, False, True,
            "granite-speech", None, "bfloat16", "", "default", "generate", 2400),
        Row("submission", "Too good on demo data", "demo test (not comparable)", _acc(98), 99.0, True, False,
            "baseline", 0, "n/a", "", "default", "generate", 648),
        Row("human", "Human (our annotators)", "demo test (not comparable)", {"volume": 72.2}, 72.2, False, False,
            "human", None, "", "", "default", "listening", 72),
    ]


def test_ranking_keeps_other_data_apart(tmp_path: Path) -> None:
    ranked = write_site(_demo_rows(), tmp_path)
    names = [r.model for r in ranked]
    assert names[:3] == ["Human (paper)", "Qwen2-Audio LoRA (volume, all_linear, r16)", "Qwen2-Audio-7B-Instruct"]
    assert names[-3:] == ["Granite speech", "Too good on demo data", "Human (our annotators)"]  # incomplete last
    assert [(r.model, r.rank) for r in ranked if r.rank] == [
        ("Qwen2-Audio LoRA (volume, all_linear, r16)", 1), ("Qwen2-Audio-7B-Instruct", 2), ("Granite speech", 3)]
    assert (data_label("generate:vctk", "test"), is_official("generate:vctk", "train")) == ("VCTK test (official)", False)
    assert (model_family("hf-qwen2-audio"), model_family("tiny-qwen2-audio"), model_family("random")) == (
        "qwen2-audio", "qwen2-audio", "baseline")


CHECK_LAYOUT = """() => {
  const wrap = document.querySelector('.wrap');
  const heads = Array.from(document.querySelectorAll('#leaderboard thead th')).filter(th => th.offsetParent);
  return {doc: document.scrollingElement.scrollWidth, view: window.innerWidth,
          wrap: wrap.scrollWidth, wrapView: wrap.clientWidth,
          right: Math.max(...heads.map(th => th.getBoundingClientRect().right)),
          heads: heads.map(th => th.textContent.trim())};
}"""


def _open_page(browser: Any, site: Path, width: int, height: int, errors: list[str]) -> Any:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(site.joinpath("index.html").as_uri())
    return page


def _visible_rows(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('#leaderboard tr.row'))
      .filter(tr => !tr.hidden).map(tr => ({model: tr.dataset.model, family: tr.dataset.family,
        prompt: tr.dataset.prompt, section: tr.parentElement.id, y: tr.getBoundingClientRect().top,
        avg: tr.cells[2].textContent.trim(), rank: tr.cells[0].textContent.trim()}))""")


def _official_first(rows: list[dict[str, Any]]) -> bool:
    official = [r["y"] for r in rows if r["section"] == "official"]
    other = [r["y"] for r in rows if r["section"] == "other"]
    return not official or not other or max(official) < min(other)


def test_page_in_headless_chromium(site: Path, submission: Path, tmp_path: Path) -> None:
    """Official rows ranked first, rows on other data apart (also after sorting), no horizontal scroll at
    1,400 px nor on a 390 px phone, the family and prompt filters, details behind a row click."""
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    demo = tmp_path / "demo-site"
    write_site(_demo_rows(), demo)
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            # the site built from real submissions (demo-source runs: the section of other data)
            page = _open_page(browser, site, 1400, 900, errors)
            assert page.title() == "VocalGrad leaderboard"
            rows = _visible_rows(page)
            assert len(rows) == 8 and _official_first(rows)
            other = [r for r in rows if r["section"] == "other"]
            assert {r["model"] for r in other} == {"Always up", "Coin <b>flip</b>"} and {r["rank"] for r in other} == {"—"}
            assert [r["avg"] for r in other] == sorted((r["avg"] for r in other), reverse=True)
            assert page.locator("#other tr.section").is_visible()
            page.locator("#leaderboard thead th").filter(has_text="model").click()  # text: A to Z, per section
            names = [r["model"] for r in _visible_rows(page)]
            assert names[:6] == sorted(names[:6], key=str.lower) and names[6:] == ["Always up", "Coin <b>flip</b>"]

            page = _open_page(browser, demo, 1400, 900, errors)
            layout = page.evaluate(CHECK_LAYOUT)
            assert layout["doc"] <= layout["view"] and layout["wrap"] <= layout["wrapView"], layout
            assert layout["right"] <= 1400 and layout["heads"] == ["#", "model", "avg", *CONFIGS, "prompt"]
            rows = _visible_rows(page)
            assert [r["rank"] for r in rows[:3]] == ["—", "1", "2"] and rows[-2]["avg"] == "99.0"
            assert _official_first(rows) and rows[-2]["section"] == "other"
            header = page.locator("#leaderboard thead th")
            avg_col = header.filter(has_text="avg")
            for direction in ("descending", "ascending"):
                avg_col.click()
                assert avg_col.get_attribute("aria-sort") == direction
                rows = _visible_rows(page)
                assert _official_first(rows), rows  # 99.0 on other data never climbs above an official row
                official = [float(r["avg"].rstrip("*")) for r in rows if r["section"] == "official"]
                assert official == sorted(official, reverse=direction == "descending")
            assert rows[0]["model"] == "Audio Flamingo 3 (paper)"  # ascending: the lowest official mean first

            page.select_option("#filter-family", "qwen2-audio")
            rows = _visible_rows(page)
            assert {r["family"] for r in rows} == {"qwen2-audio"} and len(rows) == 2
            assert not page.locator("#other tr.section").is_visible()  # no row on other data left
            page.select_option("#filter-prompt", "swap_order+audio_ref")
            assert [r["model"] for r in _visible_rows(page)] == ["Qwen2-Audio-7B-Instruct"]
            assert page.locator("#shown").inner_text() == "1 of 11 rows"
            page.select_option("#filter-family", "")
            page.select_option("#filter-prompt", "default")
            rows = _visible_rows(page)
            assert {r["prompt"] for r in rows} == {"default"} and len(rows) == 9  # 5 paper, 2 official, 2 other
            page.select_option("#filter-prompt", "")
            assert len(_visible_rows(page)) == 11

            row = page.locator('tr.row[data-model="Qwen2-Audio LoRA (volume, all_linear, r16)"]')
            details = page.locator(f"#{row.get_attribute('data-details')}")
            assert not details.is_visible()
            row.click()
            assert details.is_visible() and row.get_attribute("aria-expanded") == "true"
            assert "org/qwen2-audio-lora-volume" in details.inner_text() and "8.40 B" in details.inner_text()
            assert not details.locator(".per-category").is_visible()  # the wide table has the categories
            assert page.evaluate(CHECK_LAYOUT)["doc"] <= 1400  # the open details do not widen the page

            phone = _open_page(browser, demo, 390, 844, errors)
            layout = phone.evaluate(CHECK_LAYOUT)
            assert layout["doc"] <= 390 and layout["wrap"] <= layout["wrapView"], layout
            assert layout["heads"] == ["#", "model", "avg"] and layout["right"] <= 390
            phone_row = phone.locator('tr.row[data-model="Granite speech"]')
            phone_row.click()
            per_category = phone.locator(f"#{phone_row.get_attribute('data-details')} .per-category")
            assert per_category.is_visible() and "volume\n58.0" in per_category.inner_text()  # categories moved here
            assert not errors, errors
        finally:
            browser.close()


def test_free_text_cannot_break_the_markdown_or_run_in_a_spreadsheet(tmp_path: Path) -> None:
    from harness.leaderboard.build import render_csv, render_markdown

    evil = Row("submission", '=HYPERLINK("http://x","y")\nsecond | line', "VCTK test (official)", _acc(55), 56.0,
               True, True, "qwen2-audio", 1, "+bf16", "@org/adapter", "-default", "generate", 21600)
    md = render_markdown([evil], "notes")
    line = next(x for x in md.splitlines() if "HYPERLINK" in x)
    assert "second \\| line" in line and line.count(" | ") == len(line.split(" | ")) - 1  # one row, pipe escaped
    assert line.startswith("| ") and line.endswith(" |") and "\nsecond" not in md
    row = next(csv.DictReader(io.StringIO(render_csv([evil]))))
    assert row["model"] == "'=HYPERLINK(\"http://x\",\"y\") second | line"
    assert (row["precision"], row["adapter"], row["prompt"]) == ("'+bf16", "'@org/adapter", "'-default")
    assert row["scoring"] == "generate" and row["avg"] == "56.0"  # plain text and numbers stay as they are


def test_a_blank_model_name_is_refused(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    code = harness(["leaderboard", "submit", str(runs["random"]), "--model-name", "  ", "--out", str(tmp_path / "s.json")])
    assert code == 2 and "--model-name must not be empty" in capsys.readouterr().err and not (tmp_path / "s.json").exists()


def _small_metric(sub: dict[str, Any]) -> None:  # within 1e-2 of the truth: only a tight tolerance sees it
    sub["results"]["metrics"]["volume"]["accuracy"] += 1e-4


def test_a_tamper_of_one_in_ten_thousand_is_refused(submission: Path, tmp_path: Path, capsys) -> None:
    sub = json.loads(submission.read_text())
    _small_metric(sub)
    code, text = _validate(sub, tmp_path, capsys)
    assert code == 1 and "metrics.volume.accuracy: claimed" in text, text


def test_model_fields_are_bounded_and_deep_json_is_one_line(submission: Path, tmp_path: Path, capsys) -> None:
    sub = json.loads(submission.read_text())
    sub["model"]["name"] = "x" * 200_000
    code, text = _validate(sub, tmp_path, capsys)
    assert code == 1 and "model.name: 200,000 characters, at most 120 allowed" in text
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert harness(["leaderboard", "validate", str(deep)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "nested too deeply" in err


def test_link_image_and_control_characters_in_names_reach_no_page(submission: Path) -> None:
    from harness.leaderboard.build import render_csv, render_html, render_markdown, submission_row

    sub = json.loads(submission.read_text())
    sub["model"]["name"] = "![pic](http://evil/x.png) [click](http://evil) *big* `code`\x00\x1b[31m"
    sub["model"]["notes"] = "a\x00b"
    row = submission_row(sub, "s.json")
    md, page, table = render_markdown([row], "n"), render_html([row], "n"), render_csv([row])
    for text in (md, page, table):
        assert "\x00" not in text and "\x1b" not in text
    line = next(x for x in md.splitlines() if "evil" in x)
    assert "](" not in line.replace("\\](", "") and "!\\[pic\\]" in line and "\\[click\\]" in line
    assert "\\*big\\*" in line and "\\`code\\`" in line
    assert next(csv.DictReader(io.StringIO(table)))["model"].endswith("`code`[31m")


def test_precision_is_what_the_model_loaded_in(runs: dict[str, Path], tmp_path: Path) -> None:
    """Issue 23: a float32 run showed precision "auto"; the dtype the loaded model reported (results.json
    model_info) wins over the wrapper's default."""
    import shutil

    from harness.leaderboard.submit import make_submission

    run = tmp_path / "run"
    shutil.copytree(runs["random"], run)
    results = json.loads((run / "results.json").read_text())
    results["model_info"] = {**results.get("model_info", {}), "dtype": "float32"}
    results["config"]["model"] = "tiny-qwen2-audio"  # a transformers wrapper: dtype "auto" unless reported
    (run / "results.json").write_text(json.dumps(results))
    assert make_submission(run, model_name="x")["model"]["precision"] == "float32"
    del results["model_info"]["dtype"]
    (run / "results.json").write_text(json.dumps(results))
    assert make_submission(run, model_name="x")["model"]["precision"].startswith("auto")


def test_a_run_off_the_papers_protocol_is_flagged(submission: Path) -> None:
    """Issue 37: a run with speed opt-ins (results.json model_info "not_paper_protocol") gets ‡ and the list
    in leaderboard.md, the page and the CSV; a run under the paper's protocol gets none."""
    from harness.leaderboard.build import render_csv, render_html, render_markdown, submission_row

    sub = json.loads(submission.read_text())
    plain = submission_row(sub, "random.json")
    sub["results"].setdefault("model_info", {})["not_paper_protocol"] = ["tf32 matmuls", "dtype bfloat16"]
    flagged = submission_row(sub, "flagged.json")
    assert plain.not_paper_protocol == () and flagged.not_paper_protocol == ("tf32 matmuls", "dtype bfloat16")
    md = render_markdown([plain], "")
    assert "‡" not in md and "not the paper's protocol" not in md
    md = render_markdown([flagged], "")
    assert "| Coin &lt;b&gt;flip&lt;/b&gt; ‡ |" in md  # the row itself, then the line that explains it
    assert "not the paper's protocol: tf32 matmuls; dtype bfloat16" in md
    page = render_html([flagged], "")
    assert 'class="sub not-paper-protocol"' in page and "tf32 matmuls; dtype bfloat16" in page
    rows = list(csv.DictReader(io.StringIO(render_csv([plain, flagged]))))
    assert [r["not_paper_protocol"] for r in rows] == ["", "tf32 matmuls; dtype bfloat16"]
