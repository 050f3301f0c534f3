"""Listening-test sampler: the CLI contract, direction balanced in every tier x curve cell (so the published
coupling of direction with curve cannot occur), spreading over speakers, reproducibility, variants, own sources."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from listening.cli import main as listen
from listening.sampler import balanced_sample, candidate_pool, draw
from tests.helpers.sources import build_folder
from vocalgrad_dataset import grid

# the published tool's sampled volume items, copied unchanged from the release (shared/reference/human_eval/)
PUBLISHED = Path(__file__).parent / "data" / "published_human_eval" / "volume_shared_annotation_50.csv"
TIERS, CURVES = ("low", "mid", "high"), ("linear", "quad_first_flat", "quad_last_flat", "jump")


def direction_split(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Counter[str]]:
    """Directions per (tier, curve) cell of items carrying tier/curve/direction keys (unmodified clips left out)."""
    cells: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for it in items:
        if it["direction"] != grid.NO_CONDITION:
            cells[(it["tier"], it["curve"])][it["direction"]] += 1
    return dict(cells)


def balance_problems(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every tier x curve cell whose directions do not split evenly, and every curve tied to one direction
    (the published coupling); [] for a balanced sample."""
    items = list(items)
    problems = [f"cell {t}/{c}: up {k['up']} vs down {k['down']}" for (t, c), k in sorted(direction_split(items).items())
                if k["up"] != k["down"]]
    per_curve: dict[str, set[str]] = defaultdict(set)
    for it in items:
        if it["direction"] != grid.NO_CONDITION:
            per_curve[it["curve"]].add(it["direction"])
    problems += [f"curve {c} always {next(iter(d))}" for c, d in sorted(per_curve.items()) if len(d) == 1]
    return problems


def _cli_items(capsys: pytest.CaptureFixture, *args: str) -> list[dict[str, str]]:
    assert listen(["sample", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_contract_volume_48_seed_0(capsys: pytest.CaptureFixture) -> None:
    items = _cli_items(capsys, "--config", "volume", "--n", "48", "--seed", "0")
    assert len(items) == 48 and len({i["benchmark_clip_id"] for i in items}) == 48
    for it in items:
        assert {"benchmark_clip_id", "tier", "curve", "direction"} <= set(it)
        item, clip, curve, tier, direction = it["benchmark_clip_id"].split("__")
        assert (it["curve"], it["tier"], it["direction"]) == (curve, tier, direction)
        assert it["gold"] == {"up": "increase", "down": "decrease"}[direction]
    cells = Counter((i["tier"], i["curve"], i["direction"]) for i in items)
    assert cells == {(t, c, d): 2 for t in TIERS for c in CURVES for d in ("up", "down")}
    # 100 frozen VCTK test clips of 50 speakers: 48 items use 48 different speakers and sources
    assert len({i["speaker_id"] for i in items}) == 48 and len({i["source_item_id"] for i in items}) == 48
    again = _cli_items(capsys, "--config", "volume", "--n", "48", "--seed", "0")
    assert again == items  # seeded and reproducible
    other = _cli_items(capsys, "--config", "volume", "--n", "48", "--seed", "1")
    assert {i["benchmark_clip_id"] for i in other} != {i["benchmark_clip_id"] for i in items}


def test_published_sample_is_coupled_and_ours_cannot_be() -> None:
    with PUBLISHED.open(newline="", encoding="utf-8") as f:
        published = [{"tier": r["difficulty"], "curve": r["trajectory"],
                      "direction": "up" if r["label"] == "increase" else "down"} for r in csv.DictReader(f)]
    problems = balance_problems(published)
    for curve, direction in (("linear", "up"), ("quad_last_flat", "up"), ("quad_first_flat", "down"), ("jump", "down")):
        assert f"curve {curve} always {direction}" in problems
    assert any(p.startswith("cell low/linear: up 5 vs down 0") for p in problems)
    pool = candidate_pool("volume")
    for n in range(2, 98, 2):  # every even size, several seeds: the directions split evenly in every cell
        for seed in range(3):
            items = [i.as_dict() for i in balanced_sample(pool, "volume", n, seed)]
            assert len(items) == n and balance_problems(items) == []
            cells = Counter((i["tier"], i["curve"], i["direction"]) for i in items)  # counted here, not by our code
            assert all(cells[(t, c, "up")] == cells[(t, c, "down")] for t in TIERS for c in CURVES), (n, seed)
            assert all({d for (_, c2, d) in cells if c2 == c} in ({"up", "down"}, set()) for c in CURVES)
            tiers = Counter(i["tier"] for i in items)
            curves = Counter(i["curve"] for i in items)
            assert max(tiers.values()) - min(tiers[t] for t in TIERS) <= 2  # one extra pair at most
            assert max(curves.values()) - min(curves[c] for c in CURVES) <= 2


def test_small_sizes_and_bad_sizes(capsys: pytest.CaptureFixture) -> None:
    items = [i.as_dict() for i in draw("pitch", 10, 3)]
    cells = direction_split(items)
    assert len(cells) == 5 and all(k == {"up": 1, "down": 1} for k in cells.values())
    assert len({i["tier"] for i in items}) == 3 and len({i["curve"] for i in items}) == 4
    assert listen(["sample", "--config", "volume", "--n", "47"]) == 2
    assert "--n must be even" in capsys.readouterr().err
    assert listen(["sample", "--config", "volume", "--n", "200", "--source", "demo"]) == 2
    assert "but the source has only 3" in capsys.readouterr().err
    assert listen(["sample", "--config", "volum", "--n", "4"]) == 2
    assert "did you mean 'volume'" in capsys.readouterr().err


def test_demo_source_spreads_speakers_evenly() -> None:
    items = draw("noise", 48, 0, source="demo")
    assert Counter(i.speaker_id for i in items) == {s: 16 for s in {i.speaker_id for i in items}}
    assert len({i.speaker_id for i in items}) == 3
    assert balance_problems([i.as_dict() for i in items]) == []


def test_ternary_and_yesno_add_unmodified_clips(capsys: pytest.CaptureFixture) -> None:
    tern = draw("volume-ternary", 48, 0)
    gold = Counter(i.gold for i in tern)
    assert gold == {"constant": 16, "increase": 16, "decrease": 16}
    assert all(i.benchmark_clip_id.endswith("__source") for i in tern if i.gold == "constant")
    assert balance_problems([i.as_dict() for i in tern]) == []
    yesno = draw("pitch-yesno", 24, 0)
    assert Counter(i.gold for i in yesno) == {"yes": 12, "no": 12}
    small = draw("volume-ternary", 24, 0, source="demo")  # 3 unmodified clips only: capped, with a warning
    assert Counter(i.gold for i in small)["constant"] == 2 and len(small) == 24
    assert "under-represented" in capsys.readouterr().err


def test_own_folder_source_and_beep(tmp_path: Path) -> None:
    build_folder(tmp_path, rates=(48000, 48000, 48000, 48000), with_split=False)
    items = draw("echo", 24, 0, source="folder", data_dir=str(tmp_path))
    assert Counter(i.speaker_id for i in items) == {"s0": 12, "s1": 12}
    assert Counter(i.source_item_id for i in items).most_common(1)[0][1] == 6
    assert balance_problems([i.as_dict() for i in items]) == []
    beep = draw("beep-pitch", 24, 0)
    assert len({i.source_item_id for i in beep}) == 10 and all(i.config == "beep-pitch" for i in beep)


def test_every_subcommand_has_a_description_and_shows_its_defaults(capsys: pytest.CaptureFixture) -> None:
    from listening.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == {"sample", "init", "serve", "annotators", "export", "analyze"}
    for name, parser in sub.choices.items():
        assert parser.description and len(parser.description) > 40, name
        with pytest.raises(SystemExit):
            listen([name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for action in parser._actions:
            if action.default not in (None, False, [], "==SUPPRESS==") and not action.required:
                assert f"{action.option_strings[-1]}" in text and f"(default: {action.default})" in text, (name, action.dest)
    with pytest.raises(SystemExit):
        listen(["sample", "--help"])
    assert "--n N items per config" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("args", "says"), [
    (["sample", "--config", "volume", "--n", "47"], "error: --n must be even for 'volume'"),
    (["sample", "--config", "volum"], "error: unknown config 'volum'"),
    (["sample"], "error: --config is required"),
    (["sample", "--config", "volume", "--n", "0"], "argument --n: 0 is not a positive integer"),
    (["sample", "--config", "volume", "--split", "val"], "argument --split: invalid choice: 'val'"),
    (["sample", "--config", "volume", "--source", "nosuch"], "error: unknown source 'nosuch'"),
    (["analyze", "--db", "/nonexistent/s.sqlite"], "error: no study database /nonexistent/s.sqlite"),
    (["export", "--db", str(Path(__file__)), "--out", "/nonexistent/o"], "not a listening-study database"),
    (["init", "--config", "volume-source", "--source", "demo", "--db", "/nonexistent/s.sqlite"],
     "error: volume-source holds unmodified clips only"),
])
def test_errors_are_one_line(args: list[str], says: str, capsys: pytest.CaptureFixture) -> None:
    try:
        rc = listen(args)
    except SystemExit as stop:  # argparse: usage + one error line
        rc = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and says in err[-1] and "Traceback" not in "".join(err), err
    assert len(err) == 1 or err[0].startswith("usage:"), err
