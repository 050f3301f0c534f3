"""`harness leaderboard build SUBS_DIR --out OUT`: validated submissions -> a ranked static site.

OUT/index.html    one self-contained page (no external resources): the official rows ranked with the
                  reference rows of the paper's Table 2 (SPEC §7) and human accuracy, rows on other data
                  in their own section below (never ranked), sortable columns that fit 1,400 px (details
                  behind a row click; phones get model and mean), filters by model family and prompt
OUT/leaderboard.md, OUT/leaderboard.csv   the same rows (the CSV says which are comparable)
OUT/README.md     Space metadata (`sdk: static`), so OUT can be pushed to a Hugging Face Space as it is
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from harness.data import CONFIGS
from harness.kinds import Kind, all_kinds, result_kind
from harness.leaderboard.validate import validate_file
from harness.reference import MODEL_DISPLAY, PUBLISHED_STEM, table2
from harness.results import atomic_write_text, group_metrics, task_metrics
from harness.tables import csv_cell, markdown_table

TITLE = "VocalGrad leaderboard"
OTHER_DATA_TITLE = "Other data: not comparable with the benchmark"

@dataclass
class Row:
    """One leaderboard line: a validated submission or a published reference row."""

    kind: str  # submission | reference | human
    model: str
    data: str
    accuracy: dict[str, float] = field(default_factory=dict)  # config -> %, only the configs evaluated
    average: float = math.nan  # % over the evaluated configs
    complete: bool = False
    official: bool = True  # on the official benchmark (VCTK test clips); otherwise shown apart, never ranked
    family: str = ""  # model family, for the page's filter
    params: int | None = None
    precision: str = ""
    adapter: str = ""
    prompt: str = ""
    scoring: str = ""
    clips: int | None = None
    notes: str = ""
    rank: int | None = None
    file: str = ""
    protocol: str = ""  # a human row: annotators, completeness, exclusions (and "below its design")
    below_design: bool = False
    # kind name -> its board's group metrics (%), for the kinds with an unranked section the run has
    sections: dict[str, dict[str, float]] = field(default_factory=dict)
    # results.json model_info "not_paper_protocol": the speed opt-ins that ran (bf16, TF32, another attention)
    not_paper_protocol: tuple[str, ...] = ()

    @property
    def section_only(self) -> bool:
        """A run of only sectioned kinds' configs: no nine-category number, shown in its own sections only."""
        return not self.accuracy and any(self.sections.values())


def is_official(source: str, split: str) -> bool:
    """True for runs on the benchmark itself: the VCTK test clips, generated, built or released (validate has
    checked the clip ids of built and released data against the frozen VCTK list)."""
    kind, _, name = source.partition(":")
    return split == "test" and ((kind == "generate" and name == "vctk") or kind in ("parquet", "release"))


def data_label(source: str, split: str) -> str:
    """Where a run's clips came from, as the table shows it."""
    kind, _, name = source.partition(":")
    if is_official(source, split):
        return f"VCTK {split} (official)" if kind == "generate" else f"VCTK {split} (official, {kind})"
    if kind in ("parquet", "release") or (kind == "generate" and name == "vctk"):
        return f"VCTK {split} (not the benchmark split)"
    return f"{name or source} {split} (not comparable)"


def section_data_label(source: str, split: str, configs: Sequence[str]) -> str:
    """Where a conflict / MCQ run's clips came from: the generator source (claims), else the configs' builder
    family and the data's kind (never a local path)."""
    from vocalgrad_dataset.tasks import resolve

    def family(config: str) -> str:
        try:
            return resolve(config).family
        except ValueError:  # a mapped multiple-choice benchmark's task
            return "mapped MCQ"

    kind, _, name = source.partition(":")
    if kind == "generate":
        return f"{name} {split}"
    return f"{', '.join(sorted({family(c) for c in configs}))} {split} ({kind})"


def model_family(registry_name: str) -> str:
    """The family a registry model belongs to (qwen2-audio, kimi-audio, baseline, ...): the family of a
    transformers entry (checkpoints of one architecture share it), "baseline" for the baselines, else the
    name itself (external and API models, plugins, package.module:Factory)."""
    from harness.models.registry import registry

    entry = registry().get(registry_name)
    if entry is None:
        return registry_name
    family = getattr(entry.factory, "fixed", {}).get("family")
    if family:
        return str(family)
    return "baseline" if entry.kind == "baseline" else registry_name


def listening_summary(listening: dict[str, Any]) -> tuple[str, bool]:
    """A human row's protocol line from its export's `listening` block, and whether the study is below its
    design (an export that predates the design check says what it lacks)."""
    design = listening.get("design")
    if not design:
        n = len(listening.get("annotators") or [])
        return f"{n} annotator(s); completeness and exclusions not recorded (export predates the check)", True
    excluded = design.get("excluded") or {}
    text = (f"{len(design['complete'])} of {design['annotators']} annotators complete and included, "
            f"{100 * design['completeness']:.0f} % of the answers; excluded: "
            + (", ".join(f"{k} ({v})" for k, v in sorted(excluded.items())) or "none"))
    below = not design.get("meets_design")
    return (text + "; BELOW ITS DESIGN: " + "; ".join(design.get("problems") or []) if below else text), below


def submission_row(sub: dict[str, Any], file: str) -> Row:
    """The leaderboard line of a validated submission."""
    res, model, run = sub["results"], sub["model"], sub["results"]["config"]
    metrics = task_metrics(res)
    acc = {c: 100 * float(metrics[c]["accuracy"]) for c in CONFIGS
           if c in metrics and result_kind(res, c).grid}  # a mapped multiple-choice task may be named "pitch"
    human = model["scoring_mode"] == "listening"  # a `vocalgrad-listen export`
    source, split = str(run.get("source")), str(run.get("split"))
    model = {k: clean_text(v) if isinstance(v, str) else v for k, v in model.items()}  # also for the HTML page
    protocol, below = listening_summary(run.get("listening") or {}) if human else ("", False)
    # a run without any of the nine categories (conflict, MCQ) is never ranked with them, whatever its data
    data = data_label(source, split) if acc or human else section_data_label(source, split, list(metrics))
    return Row(
        kind="human" if human else "submission", model=model["name"], data=data,
        accuracy=acc, average=sum(acc.values()) / len(acc) if acc else math.nan,
        complete=bool(group_metrics(res).get("complete")), official=is_official(source, split) and bool(acc or human),
        family="human" if human else model_family(str(model["registry_name"])), params=model.get("params"),
        precision=model.get("precision") or "", adapter=model.get("adapter") or "",
        prompt=model["prompt_variant"], scoring=model["scoring_mode"],
        clips=sum(int(r["n"]) for r in metrics.values()), notes=model.get("notes") or "", file=file,
        protocol=protocol, below_design=below,
        sections=board_metrics(res),
        not_paper_protocol=tuple(clean_text(x) for x in (res.get("model_info") or {}).get("not_paper_protocol") or ()),
    )


def board_metrics(res: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per kind with a leaderboard section: its group's metrics in % (the kinds the run has only)."""
    out = {}
    for kind in all_kinds():
        if kind.board is not None and (group := group_metrics(res, kind.group)):
            out[kind.name] = {m: 100 * float(v) for m, _ in kind.board.fields if (v := group.get(m)) is not None}
    return {k: v for k, v in out.items() if v}


def reference_rows() -> list[Row]:
    """SPEC §7: human accuracy and the published models (default prompt, generate scoring, 2,400 clips each)."""
    stem_of = {display: stem for stem, display in MODEL_DISPLAY.items()}
    registry_of = {stem: name for name, stem in PUBLISHED_STEM.items()}
    rows = []
    for name, values in table2().items():
        human = name == "Human"
        family = "human" if human else model_family(registry_of.get(stem_of.get(name, ""), name))
        rows.append(Row(
            kind="human" if human else "reference", model=f"{name} (paper)", data="VCTK test (paper, Table 2)",
            accuracy={c: values[c] for c in CONFIGS}, average=values["avg"], complete=True, family=family,
            prompt="—" if human else "default", scoring="listening test" if human else "generate",
            clips=None if human else 2400 * len(CONFIGS),
        ))
    return rows


def rank(rows: list[Row]) -> list[Row]:
    """Official rows first, then the rows on other data, which are never ranked.

    Official submissions are ranked by mean accuracy, complete (all nine categories) ones first; the
    reference rows are interleaved by their mean so the table reads top to bottom, and rows with fewer
    categories (a mean over fewer) come after the complete ones.
    """
    official = [r for r in rows if r.official]
    subs = sorted((r for r in official if r.kind == "submission"),
                  key=lambda r: (not r.complete, -_num(r.average), r.model))
    for i, r in enumerate(subs, 1):
        r.rank = i
    for r in rows:
        if not r.official:
            r.rank = None
    top = sorted(official, key=lambda r: (not r.complete, -_num(r.average), r.kind != "human", r.rank or 0, r.model))
    rest = sorted((r for r in rows if not r.official), key=lambda r: (not r.complete, -_num(r.average), r.model))
    return top + rest


def _num(x: float | None) -> float:
    return -math.inf if x is None or math.isnan(x) else x


def _fmt(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


# Columns of leaderboard.md (and the details of a page row); the page shows PAGE_COLUMNS, the rest on click.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("#", "num"), ("model", "text"), ("data", "text"), ("avg", "num"), *((c, "num") for c in CONFIGS),
    ("params", "num"), ("precision", "text"), ("adapter", "text"), ("prompt", "text"), ("scoring", "text"),
    ("clips", "num"),
)
PAGE_COLUMNS: tuple[str, ...] = ("#", "model", "avg", *CONFIGS, "prompt")
DETAIL_FIELDS: tuple[str, ...] = ("data", "family", "prompt", "params", "precision", "adapter", "scoring", "clips",
                                  "protocol", "notes", "file")


PROTOCOL_MARK = "‡"


def protocol_note(r: Row) -> str:
    """The line that explains a row's ‡ (empty for a run under the paper's protocol)."""
    return f"{PROTOCOL_MARK} {r.model}: not the paper's protocol: {'; '.join(r.not_paper_protocol)}" if (
        r.not_paper_protocol) else ""


def _cells(r: Row) -> list[tuple[str, str | None]]:
    """(display text, numeric sort key or None) per column."""
    avg = _fmt(r.average) + ("" if r.complete else "*")
    return [
        (str(r.rank) if r.rank else "—", str(r.rank) if r.rank else ""),
        (r.model + (f" {PROTOCOL_MARK}" if r.not_paper_protocol else ""), None), (r.data, None),
        (avg, _fmt(r.average)),
        *((_fmt(r.accuracy.get(c)), _fmt(r.accuracy.get(c))) for c in CONFIGS),
        (f"{r.params / 1e9:.2f} B" if r.params else "", str(r.params) if r.params else ""),
        (r.precision, None), (r.adapter, None), (r.prompt, None), (r.scoring, None),
        (f"{r.clips:,}" if r.clips else "", str(r.clips) if r.clips else ""),
    ]


def _details(r: Row, cells: dict[str, tuple[str, str | None]]) -> str:
    """The hidden line under a row: what the narrow table leaves out (all categories again for phones)."""
    values = {**{k: v[0] for k, v in cells.items()}, "family": r.family, "notes": r.notes, "file": r.file,
              "protocol": r.protocol}
    items = [f"<div><dt>{html.escape(k)}</dt><dd>{html.escape(values[k])}</dd></div>" for k in DETAIL_FIELDS
             if values.get(k)]
    cats = "".join(f"<div><dt>{html.escape(c)}</dt><dd>{html.escape(cells[c][0]) or '—'}</dd></div>" for c in CONFIGS)
    return (f'<dl class="facts">{"".join(items)}</dl>'
            f'<dl class="per-category" aria-label="accuracy per category (%)">{cats}</dl>')


def _page_row(r: Row, index: int) -> str:
    cells = dict(zip([name for name, _ in COLUMNS], _cells(r), strict=True))
    types = dict(COLUMNS)
    tds = []
    for name in PAGE_COLUMNS:
        text, key = cells[name]
        cls = [types[name], "cat" if name in CONFIGS else "", "col-prompt" if name == "prompt" else ""]
        if name in CONFIGS or name == "avg":
            value = r.accuracy.get(name) if name in CONFIGS else r.average
            if value is not None and not math.isnan(value):
                cls.append("chance" if value < 55 else "good" if value >= 80 else "")
        sort = f' data-sort="{html.escape(key)}"' if key is not None else ""
        if name == "model":
            sub = "" if r.official else f'<span class="sub">{html.escape(r.data)}</span>'
            if r.protocol:  # a human row says who answered and who was left out, on the row itself
                sub += f'<span class="sub protocol">{html.escape(r.protocol)}</span>'
            if r.not_paper_protocol:
                sub += f'<span class="sub not-paper-protocol">{html.escape(protocol_note(r))}</span>'
            tds.append(f'<td class="text model">{html.escape(text)}{sub}</td>')
            continue
        tds.append(f'<td class="{" ".join(c for c in cls if c)}"{sort}>{html.escape(text)}</td>')
    section = "official" if r.official else "other"
    below = " below-design" if r.below_design else ""
    attrs = (f'class="row {r.kind} {section}{below}" data-model="{html.escape(r.model)}" '
             f'data-family="{html.escape(r.family)}" data-prompt="{html.escape(r.prompt)}" '
             f'data-details="d{index}" tabindex="0" aria-expanded="false"')
    details = (f'<tr class="details" id="d{index}" hidden><td colspan="{len(PAGE_COLUMNS)}">'
               f"{_details(r, cells)}</td></tr>")
    return f"<tr {attrs}>{''.join(tds)}</tr>\n{details}"


def _options(values: Sequence[str]) -> str:
    return "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in sorted(set(values)) if v)


def render_html(rows: Sequence[Row], notes: str) -> str:
    """The index.html page (every text escaped: model names come from submitters): official rows in one
    section, rows on other data in their own below it (sorting never mixes them), a filter by model family
    and by prompt, and each row's details (data, precision, adapter, clips, ...) behind a click."""
    types = dict(COLUMNS)
    head = "".join(
        f'<th scope="col" class="{types[name]}{" cat" if name in CONFIGS else ""}'
        f'{" col-prompt" if name == "prompt" else ""}" data-type="{types[name]}" data-col="{i}" tabindex="0" '
        f'aria-sort="none">{html.escape(name)}</th>'
        for i, name in enumerate(PAGE_COLUMNS))
    official = [r for r in rows if r.official]
    other = [r for r in rows if not r.official and not r.section_only]
    body_official = "\n".join(_page_row(r, i) for i, r in enumerate(official))
    body_other = "\n".join(_page_row(r, len(official) + i) for i, r in enumerate(other))
    other_head = (f'<tr class="section"><th colspan="{len(PAGE_COLUMNS)}" scope="rowgroup">'
                  f"{html.escape(OTHER_DATA_TITLE)} (other clips than the VCTK test set; not ranked)</th></tr>")
    page = files("harness.leaderboard").joinpath("template.html").read_text(encoding="utf-8")
    return (page.replace("{{TITLE}}", html.escape(TITLE)).replace("{{HEAD}}", head)
            .replace("{{CONFLICT}}", "".join(board_html(kind, rows) for kind in all_kinds() if kind.board))
            .replace("{{BODY}}", body_official)
            .replace("{{OTHER}}", other_head + "\n" + body_other if other else "")
            .replace("{{FAMILIES}}", _options([r.family for r in rows]))
            .replace("{{PROMPTS}}", _options([r.prompt for r in rows]))
            .replace("{{NOTES}}", html.escape(notes)))


def render_markdown(rows: Sequence[Row], notes: str) -> str:
    """leaderboard.md: the official table, then the rows on other data in their own table."""
    header = [name for name, _ in COLUMNS]

    def table(part: Sequence[Row]) -> str:
        return markdown_table(header, [[markdown_cell(t) for t, _ in _cells(r)] for r in part])

    text = f"# {TITLE}\n\n" + table([r for r in rows if r.official])
    other = [r for r in rows if not r.official and not r.section_only]
    if other:
        text += f"\n\n## {OTHER_DATA_TITLE}\n\n" + table(other)
    if flagged := [protocol_note(r) for r in rows if r.not_paper_protocol]:
        text += "\n\n" + "\n".join(f"- {markdown_cell(line)}" for line in flagged)
    humans = [f"- {r.model}: {r.protocol}" for r in rows if r.protocol]
    if humans:
        text += "\n\nListening tests (annotators, completeness, exclusions):\n\n" + "\n".join(humans)
    for kind in all_kinds():
        if kind.board is not None and (lines := board_rows(kind, rows)):
            text += f"\n\n## {kind.board.title}\n\n" + markdown_table(
                ["model", "data", *(name for _, name in kind.board.fields)], [[markdown_cell(c) for c in r] for r in lines])
    return text + f"\n\n{notes}\n"


def board_rows(kind: Kind, rows: Sequence[Row]) -> list[list[str]]:
    """A kind's section lines (model, data, its board's metrics in %), one per run that has them."""
    fields = kind.board.fields if kind.board else ()
    return [[r.model, r.data, *(_fmt(r.sections[kind.name].get(m)) for m, _ in fields)]
            for r in rows if r.sections.get(kind.name)]


def section_html(title: str, note: str, table_id: str, fields: Sequence[tuple[str, str]],
                 body: Sequence[Sequence[str]]) -> str:
    """One unranked section of the page (lexical conflict, multiple choice): a heading, a note, a table."""
    if not body:
        return ""
    head = "".join(f'<th scope="col">{html.escape(n)}</th>' for n in ("model", "data", *(n for _, n in fields)))
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>\n" for r in body)
    return (f'<h2>{html.escape(title)}</h2>\n<p class="note">{note}</p>\n'
            f'<div class="wrap"><table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>\n{trs}</tbody></table></div>')


def board_html(kind: Kind, rows: Sequence[Row]) -> str:
    """The page's own table for a kind's metrics (empty when no submission has them)."""
    board = kind.board
    return section_html(board.title, board.note, kind.name, board.fields, board_rows(kind, rows)) if board else ""


def render_csv(rows: Sequence[Row]) -> str:
    """leaderboard.csv with raw numbers (accuracy in %)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "kind", "model", "family", "data", "comparable", "complete", "avg", *CONFIGS, "params",
                "precision", "adapter", "prompt", "scoring", "clips", "file", "not_paper_protocol"])
    for r in rows:
        text = [csv_text(x) for x in (r.model, r.family, r.data)]
        w.writerow([r.rank or "", r.kind, *text, r.official, r.complete, _fmt(r.average),
                    *(_fmt(r.accuracy.get(c)) for c in CONFIGS), r.params or "",
                    *(csv_text(x) for x in (r.precision, r.adapter, r.prompt, r.scoring)), r.clips or "",
                    csv_text(r.file), csv_text("; ".join(r.not_paper_protocol))])
    return buf.getvalue()


_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


# Markdown that would turn submitter text into a link, an image, emphasis or code, and the pipe that splits a row
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # NUL, escapes, DEL...; not tab/CR/LF


def clean_text(text: Any) -> str:
    """Submitter text without control characters (a NUL in a name would cut or corrupt the page and the CSV)."""
    return _CONTROL.sub("", str(text))


def markdown_cell(text: str) -> str:
    """Submitter text as one Markdown table cell: no raw HTML, no link, image or emphasis syntax, no pipe that
    splits the row, no line break, no control character."""
    one_line = _LINE_BREAKS.sub(" ", clean_text(text))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))


def csv_text(text: Any) -> str:
    """Submitter text as a CSV cell a spreadsheet shows as text: one line, a formula start defused by a
    leading apostrophe."""
    value = _LINE_BREAKS.sub(" ", clean_text(text))
    return csv_cell(value)


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
    return write_site(rows + reference_rows(), out_dir)


def write_site(rows: Sequence[Row], out_dir: str | Path) -> list[Row]:
    """Rank `rows` and write index.html, leaderboard.md, leaderboard.csv and the Space README into out_dir."""
    ranked = rank(list(rows))
    notes = ("* mean over the categories evaluated, not all nine. Reference rows: Ryu & Yanaka (2026), Table 2 "
             "(default prompt, parsed answers, 2,400 clips per category); Human: the paper's listening test. "
             "Rows on other data than the official VCTK test clips are listed apart and not ranked: their "
             "numbers are not comparable with the benchmark's.")
    out = Path(out_dir)
    atomic_write_text(out / "index.html", render_html(ranked, notes))
    atomic_write_text(out / "leaderboard.md", render_markdown(ranked, notes))
    atomic_write_text(out / "leaderboard.csv", render_csv(ranked))
    atomic_write_text(out / "README.md", SPACE_README)
    return ranked
