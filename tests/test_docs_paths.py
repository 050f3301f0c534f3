"""Every repository path the docs name exists: code spans and relative links in README.md and docs/*.md.

A code span counts as a path when it starts with a top-level folder of the repository (`harness/...`) or
ends in .py / .yaml / .md with a slash in it; a relative link counts always. Placeholders (`DIR`,
`runs/...`, `my_pkg/...`, `<task>`) are skipped; a glob (`data/configs/*.json`) must match a file. Fenced
blocks are left to tests/test_readme_commands.py, which runs or parses their commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_LEVEL = ("harness/", "vocalgrad_dataset/", "finetune/", "probing/", "listening/", "tests/", "scripts/",
             "benchmarks/", "docs/")  # fmt: skip
SUFFIXES = (".py", ".yaml", ".md")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# words and characters that make a path a placeholder, not a file: DIR, OUT, PATH, runs/..., my_pkg/, <task>
PLACEHOLDER = re.compile(r"[<>{}]|\.\.\.|\b(?:DIR|OUT|PATH|D)\b|^runs/|(?:^|/)my[_-]")
# files of other repositories that a page names on purpose: the published release's runtime (evaluating.md)
EXTERNAL = ("plic/",)


def _looks_like_path(token: str) -> bool:
    return token.startswith(TOP_LEVEL) or ("/" in token and token.endswith(SUFFIXES))


def _span_paths(text: str) -> list[str]:
    """The repository paths named in a page's code spans (outside fenced blocks), root-relative."""
    found = []
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        for token in span.split():
            token = re.sub(r"(\.py):\w+$", r"\1", token.strip("(),;:'\"").split("#")[0].split("::")[0])  # file.py:Name
            if _looks_like_path(token) and not PLACEHOLDER.search(token) and not token.startswith(EXTERNAL):
                found.append(token)
    return found


def _link_paths(text: str, page: Path) -> list[str]:
    """The targets of a page's relative links (outside fenced blocks), made root-relative."""
    found = []
    for target in LINK.findall(FENCE.sub("", text)):
        target = target.split("#")[0]
        if target and not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            found.append(str((page.parent / target).resolve().relative_to(ROOT)))
    return found


def _exists(path: str) -> bool:
    if "*" in path or "?" in path:
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


def missing_paths(text: str, page: Path) -> list[str]:
    """The paths a page names that are not in the repository."""
    return [p for p in dict.fromkeys(_span_paths(text) + _link_paths(text, page)) if not _exists(p)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page: Path) -> None:
    assert missing_paths(page.read_text(encoding="utf-8"), page) == []


def test_the_check_finds_a_stale_path_and_skips_placeholders() -> None:
    page = ROOT / "docs" / "x.md"
    text = ("`harness/no_such.py` moved; `vocalgrad_dataset/dsp/` stays; see [it](gone.md), [tasks](tasks.md),\n"
            "`data/configs/*_benchmark.json` and `vocalgrad_dataset/data/configs/*_nope.json`; `--out DIR`,\n"
            "`runs/lora/adapter.md`, `my_pkg/hum.py`, `ids/<task>-<split>.md`, `harness eval`,\n"
            "`harness/models/base.py:BaseAudioLM`, `harness/models/nope.py:BaseAudioLM` and\n"
            "```\nharness/in_a_fence.py\n```\n")  # fmt: skip
    assert missing_paths(text, page) == ["harness/no_such.py", "vocalgrad_dataset/data/configs/*_nope.json",
                                         "harness/models/nope.py", "docs/gone.md"]
