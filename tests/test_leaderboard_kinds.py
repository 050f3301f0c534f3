"""Leaderboard runs of the kinds with their own sections: a `volume-conflict` run on the claims source and a
`voxparadox-pitch` (MCQ) run on its offline build are submitted, validated, refused when a metric is changed
by 1e-4, and shown in their own sections of the site, never ranked with the nine categories."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness
from harness.leaderboard.build import build
from vocalgrad_dataset.generate import config_ids

CONFLICT = "volume-conflict"
MCQ = "voxparadox-pitch"


def _submit(run: Path, name: str, out: Path) -> dict[str, Any]:
    assert harness(["leaderboard", "submit", str(run), "--model-name", name, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _validate(sub: dict[str, Any], path: Path, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    path.write_text(json.dumps(sub))
    code = harness(["leaderboard", "validate", str(path)])
    seen = capsys.readouterr()
    return code, seen.out + seen.err


@pytest.fixture(scope="module")
def conflict_sub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The random baseline on the whole volume-conflict test split of the claims source (240 clips, ~10 s)."""
    root = tmp_path_factory.mktemp("conflict")
    assert harness(["eval", "--model", "random", "--configs", CONFLICT, "--source", "claims", "--split", "test",
                    "--out", str(root / "run")]) == 0
    _submit(root / "run", "Coin (conflict)", root / "conflict.json")
    return root / "conflict.json"


def test_conflict_run_submits_and_validates(conflict_sub: Path, capsys: pytest.CaptureFixture) -> None:
    sub = json.loads(conflict_sub.read_text())
    # the clips are the claims source's test carriers for volume (and the neutral ones), 24 conditions each
    assert [r["benchmark_clip_id"] for r in sub["samples"][CONFLICT]] == config_ids(CONFLICT, "test", "claims")
    assert sub["results"]["config"]["source"] == "generate:claims"
    assert harness(["leaderboard", "validate", str(conflict_sub)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK ") and "claim-following" in out


def _bump(section: str, key: str) -> Any:
    def tamper(sub: dict[str, Any]) -> None:
        sub["results"][section][CONFLICT if section in ("results", "metrics") else "conflict"][key] += 1e-4
    return tamper


def _gold(sub: dict[str, Any]) -> None:
    row = sub["samples"][CONFLICT][7]
    row["gold"] = "increase" if row["gold"] == "decrease" else "decrease"


def _train_clip(sub: dict[str, Any]) -> None:  # a carrier of the held-out train templates/voices
    sub["samples"][CONFLICT][0]["benchmark_clip_id"] = config_ids(CONFLICT, "train", "claims")[0]


@pytest.mark.parametrize(("tamper", "message"), [
    (_bump("results", "claim_following,none"), "results.volume-conflict.claim_following,none: claimed"),
    (_bump("metrics", "acc_incongruent"), "metrics.volume-conflict.acc_incongruent: claimed"),
    (_bump("group_metrics", "claim_gap"), "group_metrics.conflict.claim_gap: claimed"),
    (_gold, "volume-conflict: 1 row(s) where gold label contradicts the clip id"),
    (_train_clip, "volume-conflict: 1 clip ids not in the dataset"),
])  # fmt: skip
def test_tampered_conflict_submission_is_refused(conflict_sub: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                                 tamper: Any, message: str) -> None:
    sub = copy.deepcopy(json.loads(conflict_sub.read_text()))
    tamper(sub)
    code, out = _validate(sub, tmp_path / "bad.json", capsys)
    assert code == 1 and message in out, out


def test_site_shows_conflict_run_in_its_section_unranked(conflict_sub: Path, tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "conflict.json").write_bytes(conflict_sub.read_bytes())
    rows = build(subs, tmp_path / "site")
    (row,) = [r for r in rows if r.kind == "submission"]
    assert (row.rank, row.official, row.data) == (None, False, "claims test")
    cf = json.loads(conflict_sub.read_text())["results"]["results"][CONFLICT]["claim_following,none"]
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    ranked, _, sections = md.partition("## Listen or read? Lexical-conflict")
    assert "Coin (conflict)" not in ranked  # neither in the nine-category table nor in "Other data"
    assert "| Coin (conflict) | claims test | " in sections and f"| {100 * cf:.1f} |" in sections
    page = (tmp_path / "site" / "index.html").read_text()
    table = page[page.index('<table id="conflict">'):]
    assert "Coin (conflict)" in table[:table.index("</table>")]


@pytest.mark.slow  # the full 100-item VoxParadox-lite build: ~50 s on a loaded machine, the eval ~15 s
def test_mcq_run_submits_validates_and_shows_in_its_section(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data, run = tmp_path / "vp", tmp_path / "run"
    from vocalgrad_dataset.voxparadox.export import build_voxparadox

    build_voxparadox(MCQ, ["test"], data)  # checked against the frozen ids by the builder
    assert harness(["eval", "--model", "mcq-signal-oracle", "--configs", MCQ, "--split", "test",
                    "--dataset", str(data), "--out", str(run)]) == 0
    sub = _submit(run, "Oracle (MCQ)", tmp_path / "subs" / "mcq.json")
    capsys.readouterr()
    assert len(sub["samples"][MCQ]) == 100  # README: the frozen test split holds 100 items
    code, out = _validate(sub, tmp_path / "ok.json", capsys)
    assert code == 0 and "MCQ accuracy 100.0 %" in out, out
    bad = copy.deepcopy(sub)
    bad["results"]["results"][MCQ]["ala,none"] += 1e-4
    code, out = _validate(bad, tmp_path / "bad.json", capsys)
    assert code == 1 and "results.voxparadox-pitch.ala,none: claimed" in out, out
    rows = build(tmp_path / "subs", tmp_path / "site")
    (row,) = [r for r in rows if r.kind == "submission"]
    assert (row.rank, row.official) == (None, False)  # built data, but no nine-category number: never ranked
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    ranked, _, section = md.partition("## Listen or read? Multiple-choice")
    assert "Oracle (MCQ)" not in ranked
    # the signal oracle reads the true order from the signal: GT 100 %, ALA 0 %, Δ −100 %
    assert "| Oracle (MCQ) | voxparadox test (parquet) | 100.0 | 0.0 | -100.0 |" in section
