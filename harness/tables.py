"""Markdown tables and percentage cells: the one formatting of every report, paper table and card."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def pct(x: Any, digits: int = 1) -> str:
    """A fraction as a percentage cell ("53.1"); "—" for a missing value (None or NaN)."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable as plain text too)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


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
