"""Markdown tables and percentage cells: the one formatting of every report, paper table and card."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any


def pct(x: Any, digits: int = 1) -> str:
    """A fraction as a percentage cell ("53.1"); "—" for a missing value (None or NaN)."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def interval(summary: Mapping[str, Any], name: str = "accuracy") -> str:
    """A metric's 95 % interval cell in % ("[48.2, 57.9]") from its `<name>_ci_low` and `<name>_ci_high` keys."""
    return f"[{pct(summary.get(f'{name}_ci_low'))}, {pct(summary.get(f'{name}_ci_high'))}]"


_BARE_PIPE = re.compile(r"(?<!\\)\|")


def markdown_cell(text: Any) -> str:
    """A table cell that cannot end its cell or row: a `|` not yet escaped gets its backslash, line breaks become
    spaces (task and model names are outside text)."""
    return " ".join(_BARE_PIPE.sub(r"\\|", str(text)).splitlines())


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable as plain text too)."""
    lines = ["| " + " | ".join(map(markdown_cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(markdown_cell, r)) + " |" for r in rows]
    return "\n".join(lines)


def markdown_safe(text: str) -> str:
    """Markdown whose outside text (task, label, model names) cannot open an HTML tag: every `<` as `&lt;`.

    A Markdown renderer passes raw HTML through; with no `<` left, `<img src=x onerror=...>` shows as text.
    """
    return text.replace("<", "&lt;")


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets read as the start of a formula


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string starting like a formula gets a leading `'` (OWASP);
    numbers (a negative one too) stay as they are."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START) or _is_number(value):
        return value
    return "'" + value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Text safe inside a LaTeX table cell (model names carry _, &, %)."""
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def latex_table(header: Sequence[str], rows: Sequence[Sequence[str] | None], caption: str, label: str) -> str:
    """A booktabs table (cells already LaTeX; a None row is a \\midrule); needs \\usepackage{booktabs}."""
    lines = [r"\begin{table*}[t]", r"\centering", r"\small",
             r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
             " & ".join(header) + r" \\", r"\midrule"]
    lines += [r"\midrule" if r is None else " & ".join(r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", rf"\label{{{label}}}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str] | None], caption: str) -> str:
    """An HTML table (cells already HTML-escaped); a None row starts a new tbody (the rule between groups)."""
    out = [f"<table>\n<caption>{caption}</caption>",
           "<thead><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr></thead>", "<tbody>"]
    for r in rows:
        out.append("</tbody><tbody>" if r is None else "<tr>" + "".join(
            f"<th scope=\"row\">{c}</th>" if i == 0 else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody>\n</table>")
    return "\n".join(out) + "\n"
