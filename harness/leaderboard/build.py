"""`harness leaderboard build SUBS_DIR --out OUT`: validated submissions -> a ranked static site.

OUT/index.html    one self-contained page (no external resources), sortable columns, the reference rows
                  of the paper's Table 2 (SPEC §7) and human accuracy beside the submissions
OUT/leaderboard.md, OUT/leaderboard.csv   the same table
OUT/README.md     Space metadata (`sdk: static`), so OUT can be pushed to a Hugging Face Space as it is
"""

from __future__ import annotations

import csv
import html
import io
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from harness.data import CONFIGS
from harness.leaderboard.validate import validate_file
from harness.reference import table2
from harness.results import atomic_write_text
from harness.tables import markdown_table

TITLE = "VocalGrad leaderboard"


@dataclass
class Row:
    """One leaderboard line: a validated submission or a published reference row."""

    kind: str  # submission | reference | human
    model: str
    data: str
    accuracy: dict[str, float] = field(default_factory=dict)  # config -> %, only the configs evaluated
    average: float = math.nan  # % over the evaluated configs
    complete: bool = False
    params: int | None = None
    precision: str = ""
    adapter: str = ""
    prompt: str = ""
    scoring: str = ""
    clips: int | None = None
    rank: int | None = None
    file: str = ""


def data_label(source: str, split: str) -> str:
    """Where a run's clips came from, as the table shows it."""
    kind, _, name = source.partition(":")
    if kind == "generate" and name == "vctk":
        return f"VCTK {split} (official)"
    if kind in ("parquet", "release"):
        return f"VCTK {split} (official, {kind})"
    return f"{name or source} {split} (not comparable)"


def submission_row(sub: dict[str, Any], file: str) -> Row:
    """The leaderboard line of a validated submission."""
    res, model, run = sub["results"], sub["model"], sub["results"]["config"]
    acc = {c: 100 * float(res["results"][c]["accuracy"]) for c in CONFIGS if c in res["results"]}
    kind = "human" if model["scoring_mode"] == "listening" else "submission"  # a `vocalgrad-listen export`
    return Row(
        kind=kind, model=model["name"], data=data_label(str(run.get("source")), str(run.get("split"))),
        accuracy=acc, average=sum(acc.values()) / len(acc) if acc else math.nan,
        complete=bool(res["groups"]["vocalgrad"].get("complete")), params=model.get("params"),
        precision=model.get("precision") or "", adapter=model.get("adapter") or "",
        prompt=model["prompt_variant"], scoring=model["scoring_mode"],
        clips=sum(int(r["n"]) for r in res["results"].values()), file=file,
    )


def reference_rows() -> list[Row]:
    """SPEC §7: human accuracy and the published models (default prompt, generate scoring, 2,400 clips each)."""
    rows = []
    for name, values in table2().items():
        human = name == "Human"
        rows.append(Row(
            kind="human" if human else "reference", model=f"{name} (paper)", data="VCTK test (paper, Table 2)",
            accuracy={c: values[c] for c in CONFIGS}, average=values["avg"], complete=True,
            prompt="—" if human else "default", scoring="listening test" if human else "generate",
            clips=None if human else 2400 * len(CONFIGS),
        ))
    return rows


def rank(rows: list[Row]) -> list[Row]:
    """Submissions ranked by mean accuracy, complete (all nine categories) ones first; references interleaved
    by their mean so the table reads top to bottom."""
    subs = sorted((r for r in rows if r.kind == "submission"), key=lambda r: (not r.complete, -_num(r.average), r.model))
    for i, r in enumerate(subs, 1):
        r.rank = i
    return sorted(rows, key=lambda r: (-_num(r.average), r.kind != "human", r.rank or 0, r.model))


def _num(x: float | None) -> float:
    return -math.inf if x is None or math.isnan(x) else x


def _fmt(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


COLUMNS: tuple[tuple[str, str], ...] = (
    ("#", "num"), ("model", "text"), ("data", "text"), ("avg", "num"), *((c, "num") for c in CONFIGS),
    ("params", "num"), ("precision", "text"), ("adapter", "text"), ("prompt", "text"), ("scoring", "text"),
    ("clips", "num"),
)


def _cells(r: Row) -> list[tuple[str, str | None]]:
    """(display text, numeric sort key or None) per column."""
    avg = _fmt(r.average) + ("" if r.complete else "*")
    return [
        (str(r.rank) if r.rank else "—", str(r.rank) if r.rank else ""), (r.model, None), (r.data, None),
        (avg, _fmt(r.average)),
        *((_fmt(r.accuracy.get(c)), _fmt(r.accuracy.get(c))) for c in CONFIGS),
        (f"{r.params / 1e9:.2f} B" if r.params else "", str(r.params) if r.params else ""),
        (r.precision, None), (r.adapter, None), (r.prompt, None), (r.scoring, None),
        (f"{r.clips:,}" if r.clips else "", str(r.clips) if r.clips else ""),
    ]


def render_html(rows: Sequence[Row], notes: str) -> str:
    """The index.html page (every text escaped: model names come from submitters)."""
    head = "".join(
        f'<th scope="col" class="{t}" data-type="{t}" tabindex="0" aria-sort="none">{html.escape(name)}</th>'
        for name, t in COLUMNS)
    body = []
    for r in rows:
        tds = []
        for (text, key), (name, t) in zip(_cells(r), COLUMNS, strict=True):
            cls = [t]
            if name in CONFIGS or name == "avg":
                value = r.accuracy.get(name) if name in CONFIGS else r.average
                if value is not None and not math.isnan(value):
                    cls.append("chance" if value < 55 else "good" if value >= 80 else "")
            sort = f' data-sort="{html.escape(key)}"' if key is not None else ""
            tds.append(f'<td class="{" ".join(c for c in cls if c)}"{sort}>{html.escape(text)}</td>')
        body.append(f'<tr class="{r.kind}" data-model="{html.escape(r.model)}">{"".join(tds)}</tr>')
    page = files("harness.leaderboard").joinpath("template.html").read_text(encoding="utf-8")
    return (page.replace("{{TITLE}}", html.escape(TITLE)).replace("{{HEAD}}", head)
            .replace("{{BODY}}", "\n".join(body)).replace("{{NOTES}}", html.escape(notes)))


def render_markdown(rows: Sequence[Row], notes: str) -> str:
    """leaderboard.md."""
    header = [name for name, _ in COLUMNS]
    cells = [[html.escape(t, quote=False).replace("|", "\\|") for t, _ in _cells(r)] for r in rows]  # no raw HTML
    return f"# {TITLE}\n\n" + markdown_table(header, cells) + f"\n\n{notes}\n"


def render_csv(rows: Sequence[Row]) -> str:
    """leaderboard.csv with raw numbers (accuracy in %)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "kind", "model", "data", "complete", "avg", *CONFIGS, "params", "precision", "adapter",
                "prompt", "scoring", "clips", "file"])
    for r in rows:
        w.writerow([r.rank or "", r.kind, r.model, r.data, r.complete, _fmt(r.average),
                    *(_fmt(r.accuracy.get(c)) for c in CONFIGS), r.params or "", r.precision, r.adapter, r.prompt,
                    r.scoring, r.clips or "", r.file])
    return buf.getvalue()


SPACE_README = """---
title: VocalGrad Leaderboard
emoji: 🔊
colorFrom: blue
colorTo: green
sdk: static
app_file: index.html
pinned: false
---

The VocalGrad leaderboard, built by `harness leaderboard build` from validated submissions
(`harness leaderboard submit RUN_DIR`, checked with `harness leaderboard validate`).
"""


def build(subs_dir: str | Path, out_dir: str | Path, *, skip_invalid: bool = False) -> list[Row]:
    """Validate every *.json in subs_dir and write the site into out_dir; returns the rows shown.

    An invalid submission stops the build (naming its problems) unless skip_invalid, which leaves it out.
    """
    subs_path = Path(subs_dir)
    if not subs_path.is_dir():
        raise FileNotFoundError(f"no submissions directory {subs_path}")
    rows: list[Row] = []
    problems: list[str] = []
    for path in sorted(subs_path.glob("*.json")):
        try:
            sub, errors = validate_file(path)
        except ValueError as err:
            sub, errors = None, [str(err)]
        if errors:
            problems.append(f"{path.name}:\n  " + "\n  ".join(errors))
            continue
        rows.append(submission_row(sub, path.name))
    if problems and not skip_invalid:
        raise ValueError("invalid submissions (fix them or pass --skip-invalid):\n" + "\n".join(problems))
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    ranked = rank(rows + reference_rows())
    notes = ("* mean over the categories evaluated, not all nine. Reference rows: Ryu & Yanaka (2026), Table 2 "
             "(default prompt, parsed answers, 2,400 clips per category); Human: the paper's listening test. "
             "Rows on other data than the official VCTK benchmark are not comparable with them.")
    out = Path(out_dir)
    atomic_write_text(out / "index.html", render_html(ranked, notes))
    atomic_write_text(out / "leaderboard.md", render_markdown(ranked, notes))
    atomic_write_text(out / "leaderboard.csv", render_csv(ranked))
    atomic_write_text(out / "README.md", SPACE_README)
    return ranked
