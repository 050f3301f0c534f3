"""`harness report A B`: one table with every model beside the paper's rows, and figures whose plotted data
(read back from the matplotlib Axes) equal counts taken straight from the samples files."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.cli import main as harness
from harness.plots import plot_accuracy, plot_breakdown
from harness.reference import HUMAN_TABLE2, reference
from harness.report import report, write_figures
from harness.runner import EvalSettings, run_eval

Z = 1.959963984540054


def _rows(run: Path, config: str) -> list[dict]:
    return [json.loads(line) for line in (run / f"samples_{config}.jsonl").read_text().splitlines()]


def _right(r: dict) -> bool:
    return not r["error"] and r["pred"] == r["gold"]


def _wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre, half = p + Z * Z / (2 * n), Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return ((centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """random (volume, noise, volume-ternary; limited to half) and a run relabelled as Kimi-Audio."""
    root = tmp_path_factory.mktemp("report")
    out = {"random": root / "random", "base": root / "always"}
    run_eval(EvalSettings("random", ["volume", "noise", "volume-ternary"], str(out["random"]), source="demo",
                          limit=0.5, batch_size=64))
    run_eval(EvalSettings("always-increase", ["volume", "volume-ternary"], str(out["base"]), source="demo",
                          batch_size=64))
    # the same answers under a published model's name: the report must put the paper's values beside it
    kimi = out["kimi"] = root / "kimi"
    shutil.copytree(out["base"], kimi)
    for f in kimi.glob("samples_*.jsonl"):
        f.write_text("".join(json.dumps({**json.loads(x), "model": "kimi-audio"}) + "\n" for x in f.read_text().splitlines()))
    res = json.loads((kimi / "results.json").read_text())
    res["config"]["model"] = "kimi-audio"
    (kimi / "results.json").write_text(json.dumps(res))
    return out


def test_two_runs_one_table(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert harness(["report", str(runs["random"]), str(runs["kimi"]), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text.rstrip("\n") == (tmp_path / "report.md").read_text().rstrip("\n")
    table = text.split("## Models side by side")[1].split("\n\n")[1].splitlines()
    assert table[0].startswith("| model | avg | speed | pitch | volume |")
    acc = {c: 100 * sum(map(_right, _rows(runs["random"], c))) / len(_rows(runs["random"], c)) for c in ("volume", "noise")}
    assert table[2] == (f"| **random** † | — | — | — | {acc['volume']:.1f} | — | — | {acc['noise']:.1f} | — | — | — |")
    assert table[3] == "| **kimi-audio** | — | — | — | 50.0 | — | — | — | — | — | — |"
    assert table[4].startswith("| Human (paper) | 94.4 |") and table[6].startswith("| Kimi-Audio (paper) | 51.8 |")
    assert "LIMITED RUN (--limit 0.5, seed 1234)" in text and "volume 36/72" in text
    assert "## VocalGrad report — random" in text and "## VocalGrad report — kimi-audio" in text
    for stem in ("accuracy_by_category", "accuracy_by_tier", "accuracy_by_curve", "increase_bias_by_category",
                 "confusion_volume-ternary"):
        assert (tmp_path / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
        assert b"<svg" in (tmp_path / f"{stem}.svg").read_bytes()[:400]


def test_figures_plot_the_samples(runs: dict[str, Path], tmp_path: Path) -> None:
    from harness.report import load_runs

    loaded = load_runs([runs["random"], runs["kimi"]])
    figs = write_figures(loaded, tmp_path)
    acc = figs["accuracy_by_category"]
    assert acc["xticklabels"] == ["volume", "noise"]
    for label, run in (("random", runs["random"]), ("kimi-audio", runs["kimi"])):
        for i, c in enumerate(acc["xticklabels"]):
            if not (run / f"samples_{c}.jsonl").exists():  # not evaluated: no bar, no interval
                assert math.isnan(acc["bars"][label][i]) and all(map(math.isnan, acc["intervals"][label][i]))
                continue
            rows = _rows(run, c)
            k = sum(map(_right, rows))
            assert acc["bars"][label][i] == pytest.approx(100 * k / len(rows))
            lo, hi = _wilson(k, len(rows))
            assert acc["intervals"][label][i] == pytest.approx((100 * lo, 100 * hi))
    assert acc["markers"]["human (paper)"] == [(0.0, HUMAN_TABLE2["volume"]), (1.0, HUMAN_TABLE2["noise"])]
    kimi_volume = 100 * reference("volume", "kimi-audio").accuracy
    # the paper's Kimi-Audio value sits over the kimi-audio bar (the second of two in the volume slot)
    assert acc["markers"]["Kimi-Audio (paper)"][0] == (pytest.approx(0.2), pytest.approx(kimi_volume))
    tops = [hi for ivs in acc["intervals"].values() for _, hi in ivs if not math.isnan(hi)]
    tops += [y for m in acc["markers"].values() for _, y in m]
    assert acc["ylim"][0] == 0 and acc["ylim"][1] > max(tops) >= 100  # no cap or mark is cut
    assert acc["legend"] == ["human (paper)", "Kimi-Audio (paper)", "chance (50 %)", "random", "kimi-audio",
                             "95 % Wilson CI"]  # one CI entry for every run's intervals
    assert acc["title"] == "Accuracy by category"  # short: the runs are in the legend (issue 23)

    tiers = figs["accuracy_by_tier"]
    assert tiers["xticklabels"] == ["low", "mid", "high"]
    pooled = [r for c in ("volume", "noise") for r in _rows(runs["random"], c)]
    for i, t in enumerate(("low", "mid", "high")):
        cell = [r for r in pooled if r["tier"] == t]
        assert tiers["markers"]["random"][i][1] == pytest.approx(100 * sum(map(_right, cell)) / len(cell))
    curves = figs["accuracy_by_curve"]
    assert curves["xticklabels"] == ["linear", "quad first flat", "quad last flat", "jump"]
    # categories, not a continuum: markers, never a line joining them (issue 23)
    assert [y for _, y in curves["markers"]["kimi-audio"]] == [50.0] * 4  # always "increase": half of each curve
    assert set(curves["lines"]) == set(tiers["lines"]) == {"chance (50 %)"}  # the only line: chance

    bias = figs["increase_bias_by_category"]
    rows = _rows(runs["random"], "volume")
    parsed = [r for r in rows if r["pred"] is not None]
    assert bias["bars"]["random"][0] == pytest.approx(100 * sum(r["pred"] == "increase" for r in parsed) / len(parsed) - 50)
    n_inc = sum(r["pred"] == "increase" for r in parsed)
    lo, hi = _wilson(n_inc, len(parsed))  # the share's interval, over the parsed answers, in points from 50
    assert bias["intervals"]["random"][0] == pytest.approx((100 * lo - 50, 100 * hi - 50))
    assert bias["bars"]["kimi-audio"][0] == 50.0 and math.isnan(bias["bars"]["kimi-audio"][1])  # no noise run
    assert bias["markers"]["Kimi-Audio (paper)"][0][1] == pytest.approx(
        100 * reference("volume", "kimi-audio").increase_ratio - 50)
    assert "random" in bias["legend"]

    conf = figs["confusion_volume-ternary"]
    assert conf["columns"] == ["decrease", "increase", "constant", "unparsed"]
    rows = _rows(runs["random"], "volume-ternary")
    want = Counter((r["gold"], r["pred"] if r["pred"] in conf["labels"] else "unparsed") for r in rows)
    assert conf["counts"]["random"] == [[want[(g, p)] for p in conf["columns"]] for g in conf["labels"]]
    assert conf["counts"]["kimi-audio"] == [[0, 36, 0, 0], [0, 36, 0, 0], [0, 3, 0, 0]]  # 3 unmodified sources


def test_axis_never_cuts_an_upper_cap(tmp_path: Path) -> None:
    s = {"accuracy": 1.0, "accuracy_ci_low": 0.6, "accuracy_ci_high": 1.0}
    data = plot_accuracy({"m": {"volume": s}}, tmp_path / "a", published={"P": {"volume": 100.0}})
    assert data["intervals"]["m"] == [(60.0, 100.0)]
    assert data["ylim"][1] > 100.0
    assert (tmp_path / "a.png").exists() and (tmp_path / "a.svg").exists()
    line = plot_breakdown({"m": {"high": s}}, "tier", tmp_path / "b", ("low", "mid", "high"))
    assert line["xticklabels"] == ["high"] and line["intervals"]["m"] == [(60.0, 100.0)] and line["ylim"][1] > 100.0


def test_warns_when_samples_are_fewer_than_expected(runs: dict[str, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "cut"
    shutil.copytree(runs["base"], run)
    lines = (run / "samples_volume.jsonl").read_text().splitlines(keepends=True)
    (run / "samples_volume.jsonl").write_text("".join(lines[:50]))
    text = report(run, tmp_path / "out", figures=False)
    warning = "volume: 50 samples but the run expected 72 clips; the samples file is incomplete"
    assert f"**Warning:** {warning}" in text and warning in capsys.readouterr().err
    assert "LIMITED" not in text  # a full run, cut afterwards: incomplete, not limited


def test_runs_of_one_model_get_labels_that_tell_them_apart(runs: dict[str, Path], tmp_path: Path) -> None:
    from harness.report import load_runs

    again = tmp_path / "again"
    shutil.copytree(runs["random"], again)
    assert [r.label for r in load_runs([runs["random"], again])] == ["random [random]", "random [again]"]
    other_prompt = tmp_path / "swapped"
    shutil.copytree(runs["random"], other_prompt)
    for f in other_prompt.glob("samples_*.jsonl"):
        f.write_text("".join(json.dumps({**json.loads(x), "prompt_variant": "swap_order"}) + "\n"
                             for x in f.read_text().splitlines()))
    res = json.loads((other_prompt / "results.json").read_text())
    res["config"]["prompt_variant"] = "swap_order"
    (other_prompt / "results.json").write_text(json.dumps(res))
    labels = [r.label for r in load_runs([runs["random"], other_prompt, runs["base"]])]
    assert labels == ["random (prompt default)", "random (prompt swap_order)", "always-increase"]


def test_the_published_row_of_audio_flamingo_3_is_shown(tmp_path: Path) -> None:
    """The registry name "audio-flamingo-3" is the paper's "audioflamingo3" (an exact mapping, not a substring
    match), so its report carries the published per-config values beside ours."""
    from harness.models.baselines import AlwaysIncrease
    from harness.reference import published_stem, reference
    from harness.report import report

    assert published_stem("audio-flamingo-3") == "audioflamingo3" and published_stem("kimi-audio-lora") is None
    run = tmp_path / "af3"
    run_eval(EvalSettings("audio-flamingo-3", ["volume"], str(run), source="demo", limit=6), model=AlwaysIncrease())
    text = report([run], tmp_path / "rep", figures=False)
    published = reference("volume", "audioflamingo3")
    assert "published" in text.lower() and f"| volume | 50.0 | {100 * published.accuracy:.1f} |" in text


def _pdf_page_and_fonts(path: Path) -> tuple[tuple[float, float], list[float]]:
    """The page size in points and every font size a PDF's content streams set (`<size> Tf`), read with zlib
    and regular expressions, independent of matplotlib."""
    import re
    import zlib

    data = path.read_bytes()
    box = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]", data)
    assert box, path
    sizes = []
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            text = zlib.decompress(m.group(1))
        except zlib.error:
            continue
        sizes += [float(x) for x in re.findall(rb"/F\d+\s+([\d.]+)\s+Tf", text)]
    return (float(box.group(1)), float(box.group(2))), sizes


def test_figures_at_print_size(tmp_path: Path) -> None:
    """Issue 23: 7 in and 3.5 in wide, no text under 7 pt at that size, PDF beside PNG and SVG, n per point."""
    import csv

    from harness.plots import plot_increase_bias

    configs = ["speed", "pitch", "volume", "tempo", "reverb", "noise", "distortion", "lowpass", "highpass"]
    runs = {name: {c: {"accuracy": 0.5 + 0.04 * i, "accuracy_ci_low": 0.45, "accuracy_ci_high": 0.6 + 0.04 * i,
                       "n": 2400 - i, "increase_ratio": 0.7, "n_parsed": 2000} for i, c in enumerate(configs)}
            for name in ("qwen2-audio-7b-instruct + lora", "kimi-audio", "random")}
    plot_accuracy(runs, tmp_path / "acc", human={c: 95.0 for c in configs}, published={"Kimi (paper)": {"pitch": 60.0}})
    plot_breakdown({r: {"low": s["speed"], "high": s["pitch"]} for r, s in runs.items()}, "tier", tmp_path / "tier")
    plot_increase_bias(runs, tmp_path / "bias")
    for stem in ("acc", "tier", "bias"):
        for suffix, inches in (("", 7.0), ("_1col", 3.5)):
            for fmt in ("pdf", "png", "svg"):
                assert (tmp_path / f"{stem}{suffix}.{fmt}").stat().st_size > 0
            (width, _), sizes = _pdf_page_and_fonts(tmp_path / f"{stem}{suffix}.pdf")
            assert width == pytest.approx(72 * inches, abs=0.5), (stem, suffix)
            assert sizes and min(sizes) >= 7.0, (stem, suffix, sorted(set(sizes)))
            svg = (tmp_path / f"{stem}{suffix}.svg").read_text()
            assert f'width="{72 * inches:g}pt"' in svg
    with (tmp_path / "acc.csv").open(newline="") as f:
        points = list(csv.DictReader(f))
    kimi = [p for p in points if p["series"] == "kimi-audio"]
    assert [int(p["n"]) for p in kimi] == [2400 - i for i in range(9)] and kimi[2]["x"] == "volume"
    assert any(p["series"] == "human (paper)" for p in points)
    # the human marker's hue is none of the runs' (Okabe & Ito's bluish green, not a bar colour)
    svg = (tmp_path / "acc.svg").read_text().lower()
    bar_fills = {"#0072b2", "#d55e00", "#56b4e9"}
    assert all(c in svg for c in bar_fills) and "#009e73" in svg


def _latex_rows(tex: str) -> list[list[str]]:
    """The cells of every tabular row (split on unescaped &), read without LaTeX."""
    import re

    body = tex.split(r"\toprule", 1)[1].split(r"\bottomrule")[0]
    rows = [ln.strip()[: -len(r"\\")].strip() for ln in body.splitlines() if ln.strip().endswith(r"\\")]
    return [[c.strip() for c in re.split(r"(?<!\\)&", r)] for r in rows]


class _Cells(HTMLParser):
    """Rows of cells and the caption of an HTML table."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.caption = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th", "caption"):
            self._in = tag
            if tag != "caption":
                self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "caption"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "caption":
            self.caption += data
        elif self._in:
            self.rows[-1][-1] += data



def test_latex_and_html_table2(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 23: `harness report --format latex` (booktabs; compiled when a TeX is installed, else checked
    structurally) and `--format html`, in the paper's Table 2 layout with the mean and the CI."""
    import shutil
    import subprocess

    from harness.tables import latex_escape

    assert harness(["report", str(runs["random"]), str(runs["kimi"]), "--out", str(tmp_path), "--no-figures",
                    "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert tex.strip() == (tmp_path / "table2.tex").read_text().strip()
    assert tex.count(r"\begin{table*}") == tex.count(r"\end{table*}") == 1
    assert tex.count(r"\begin{tabular}{lrrrrrrrrrr}") == 1 and tex.count(r"\end{tabular}") == 1
    order = [tex.index(k) for k in (r"\toprule", r"\midrule", r"\bottomrule", r"\caption", r"\label")]
    assert order == sorted(order) and r"\hline" not in tex  # booktabs rules only
    rows = _latex_rows(tex)
    assert all(len(r) == 11 for r in rows), rows  # model, avg, nine categories
    assert rows[0][0] == "Model" and rows[0][4] == "volume"
    kimi = next(r for r in rows if r[0] == "kimi-audio")
    lo, hi = _wilson(36, 72)  # always "increase" on 72 volume clips: 36 right
    assert kimi[4] == rf"50.0 {{\scriptsize[{100 * lo:.1f}, {100 * hi:.1f}]}}" and kimi[1] == "--"
    assert next(r for r in rows if r[0] == "Human (paper)")[1] == "94.4"
    assert latex_escape("qwen_2 & co 100% #1") == r"qwen\_2 \& co 100\% \#1"
    if shutil.which("pdflatex"):  # a TeX is installed: the table must compile
        doc = tmp_path / "t.tex"
        doc.write_text("\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n" + tex + "\\end{document}\n")
        subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                       check=True, capture_output=True, timeout=120)
    assert harness(["report", str(runs["random"]), str(runs["kimi"]), "--out", str(tmp_path), "--no-figures",
                    "--format", "html"]) == 0
    page = capsys.readouterr().out

    parsed = _Cells()
    parsed.feed(page)
    assert all(len(r) == 11 for r in parsed.rows) and parsed.rows[0][:2] == ["Model", "avg"]
    kimi_html = next(r for r in parsed.rows if r[0] == "kimi-audio")
    assert kimi_html[4] == f"50.0 [{100 * lo:.1f}, {100 * hi:.1f}]" and "95 % Wilson" in parsed.caption
    assert (tmp_path / "table2.html").read_text() == page.rstrip("\n") + "\n"


# ---- classification runs (issue 35) and the opt-ins that are not the paper's protocol (issue 37) -------------
@pytest.fixture(scope="module")
def classify_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """random on the MELD-shaped fixture (classify kind, choices mode): 36 items, seven emotions."""
    from tests.helpers.meld import build_meld_shaped

    root = tmp_path_factory.mktemp("classify")
    folder = build_meld_shaped(root)
    out = root / "run"
    assert harness(["eval", "--model", "random", "--dataset", str(folder / "items.csv"), "--task-kind", "classify",
                    "--columns", "audio=wav,label=emotion,id=utt", "--mode", "choices", "--out", str(out),
                    "--no-preflight"]) == 0
    return out


def _md_rows(text: str, heading: str) -> dict[str, list[str]]:
    """First cell -> the other cells of the Markdown table under `heading`."""
    table = next(p for p in text.split(heading)[1].split("\n\n") if p.startswith("|")).splitlines()[2:]
    return {r.strip("| ").split(" | ")[0]: r.strip("| ").split(" | ")[1:] for r in table}


def _sk_confusion(rows: list[dict], labels: list[str]) -> list[list[int]]:
    """gold x (labels + unparsed) counts by scikit-learn: an unparsed or failed answer is the extra column."""
    from sklearn.metrics import confusion_matrix

    none = "<unparsed>"
    pred = [none if r["error"] or r["pred"] not in labels else r["pred"] for r in rows]
    cm = confusion_matrix([r["gold"] for r in rows], pred, labels=[*labels, none])
    return cm[: len(labels)].tolist()


def test_classify_report_table_equals_the_run_metrics(classify_run: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    from harness.tables import pct

    assert harness(["report", str(classify_run), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    m = json.loads((classify_run / "results.json").read_text())["metrics"]["classify"]
    rows = _md_rows(text, "## Classification: classify")
    labels = m["labels"]
    assert list(rows) == [*labels, "**macro F1**", "**weighted F1**", "**accuracy**"]
    ci = lambda key: f"[{pct(m[f'{key}_ci_low'])}, {pct(m[f'{key}_ci_high'])}]"  # noqa: E731
    for lab in labels:
        assert rows[lab] == [pct(m[f"precision_{lab}"]), ci(f"precision_{lab}"), pct(m[f"recall_{lab}"]),
                             ci(f"recall_{lab}"), pct(m[f"f1_{lab}"]), ci(f"f1_{lab}"), str(m[f"support_{lab}"])]
    for name, key in (("**macro F1**", "macro_f1"), ("**weighted F1**", "weighted_f1"), ("**accuracy**", "accuracy")):
        assert rows[name][4:] == [pct(m[key]), ci(key), str(m["n"])]
    # the printed numbers are the run's, and they are scikit-learn's macro / weighted F1 of the samples
    from sklearn.metrics import f1_score

    samples = _rows(classify_run, "classify")
    gold, pred = [r["gold"] for r in samples], [r["pred"] or "<unparsed>" for r in samples]
    assert rows["**macro F1**"][4] == pct(f1_score(gold, pred, labels=labels, average="macro", zero_division=0))
    assert rows["**weighted F1**"][4] == pct(f1_score(gold, pred, labels=labels, average="weighted", zero_division=0))
    assert (tmp_path / "confusion_classify.png").read_bytes()[:4] == b"\x89PNG"
    assert "not the paper's protocol" not in text  # model_info has no opt-ins


def test_classify_confusion_figure_counts_equal_scikit_learn(classify_run: Path, tmp_path: Path) -> None:
    from harness.report import load_runs

    # a second run with unparsed and failed answers: they land in the unparsed column, not in a class
    broken = tmp_path / "broken"
    shutil.copytree(classify_run, broken)
    rows = _rows(classify_run, "classify")
    for i in (0, 7):
        rows[i] = {**rows[i], "pred": None, "parsed": False}
    rows[3] = {**rows[3], "error": "CUDA out of memory"}
    (broken / "samples_classify.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_runs([classify_run, broken])
    figs = write_figures(loaded, tmp_path)
    conf = figs["confusion_classify"]
    labels = json.loads((classify_run / "results.json").read_text())["metrics"]["classify"]["labels"]
    assert conf["labels"] == labels and conf["columns"] == [*labels, "unparsed"]
    for run in loaded:
        want = _sk_confusion(_rows(run.path, "classify"), labels)
        assert conf["counts"][run.label] == want
    assert sum(row[-1] for row in conf["counts"][loaded[1].label]) == 3
    assert set(figs) == {"confusion_classify"}  # no VocalGrad figure for a classification-only run
    for stem in ("confusion_classify", "confusion_classify_1col"):
        assert (tmp_path / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"


def test_opt_ins_are_flagged_as_not_the_papers_protocol(runs: dict[str, Path], classify_run: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    """Issue 37: a run whose model_info lists `not_paper_protocol` says so in the report, the comparison table
    (‡) and the LaTeX Table 2; a run without the list (or with an empty one) says nothing."""
    opted = tmp_path / "opted"
    shutil.copytree(runs["base"], opted)
    res = json.loads((opted / "results.json").read_text())
    items = ["dtype bfloat16 (the paper: float32)", "tf32", "attn_implementation flash_attention_2"]
    res["model_info"] = {**res.get("model_info", {}), "not_paper_protocol": items}
    (opted / "results.json").write_text(json.dumps(res))
    line = "not the paper's protocol: dtype bfloat16 (the paper: float32); tf32; attn_implementation flash_attention_2"

    assert harness(["report", str(opted), "--out", str(tmp_path / "one"), "--no-figures"]) == 0
    out = capsys.readouterr()
    assert f"> **{line}**" in out.out and line in out.err
    assert f"> **{line}**" in (tmp_path / "one" / "report.md").read_text()

    empty = tmp_path / "empty"
    shutil.copytree(runs["base"], empty)
    res["model_info"]["not_paper_protocol"] = []
    (empty / "results.json").write_text(json.dumps(res))
    assert harness(["report", str(opted), str(empty), str(classify_run), "--out", str(tmp_path / "all"),
                    "--no-figures"]) == 0
    text = capsys.readouterr().out
    table = _md_rows(text, "## Models side by side")
    marked = [k for k in table if "‡" in k]
    assert len(marked) == 1 and "[opted]" in marked[0]
    assert "rows marked ‡ are not the paper's protocol" in text
    assert text.count(f"  - {line}") == 1 and text.count(f"> **{line}**") == 1  # its notes and its own report
    assert text.count("not the paper's protocol:") == 2  # nothing for the empty list or the classify run
    macro = _md_rows(text, "## Classification tasks: macro-F1 % [95% CI]")
    m = json.loads((classify_run / "results.json").read_text())["metrics"]["classify"]
    assert macro["random"][0].startswith(f"{100 * m['macro_f1']:.1f} [") and macro["always-increase [opted]"] == ["—"]

    assert harness(["report", str(opted), str(empty), "--out", str(tmp_path / "tex"), "--no-figures",
                    "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert sum("‡" in r[0] for r in _latex_rows(tex)) == 1 and "not the paper's protocol" in tex
