"""Our generator against the published generator's real outputs (tests/data/published_generator).

Every clip of ten sources x 24 conditions x 9 categories is rendered and its int16 PCM sha256 compared
with the published one. Seven categories are pure arithmetic and must be bit-exact; speed and pitch pass
through a phase vocoder whose float32 trigonometry comes from the C library, so they are bit-exact where
it matches the published machine's and otherwise must stay within one PCM16 step of the lossless copies.
"""

from __future__ import annotations

import csv
import hashlib
import sys
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES
from vocalgrad_dataset.generate import iter_clip_rows
from vocalgrad_dataset.sources import SourceClip, detect_onset_offset
from vocalgrad_dataset.sources.audio_io import read_pcm
from vocalgrad_dataset.sources.demo import DEMO_DIR

REF = Path(__file__).parent / "data" / "published_generator"
VOCODED = ("speed", "pitch")  # bit-exact where the C library's float32 atan2/cos/sin match the published machine's


def reference_sources() -> list[dict[str, str]]:
    """Rows of sources.csv (item id, clip id, file, rate, length, onset/offset seconds, origin)."""
    with open(REF / "sources.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@cache
def published() -> dict[tuple[str, str], tuple[int, str]]:
    """(category, clip id) -> (n_samples, pcm_sha256) of every published clip."""
    with open(REF / "pcm_sha256.csv", newline="", encoding="utf-8") as f:
        return {(r["category"], r["benchmark_clip_id"]): (int(r["n_samples"]), r["pcm_sha256"]) for r in csv.DictReader(f)}


SOURCES = {r["source_item_id"]: r for r in reference_sources()}


def pcm_sha256(pcm: np.ndarray) -> str:
    """sha256 of int16 little-endian samples."""
    return hashlib.sha256(np.asarray(pcm, dtype="<i2").tobytes()).hexdigest()


def source_samples(row: dict[str, str]) -> np.ndarray:
    """A fixture source's int16 samples (the fixture's sources are byte copies of the vendored demo clips)."""
    pcm = read_pcm(DEMO_DIR / Path(row["file"]).name, clip_name=row["source_clip_id"], expected_rate=int(row["sample_rate"]))
    assert len(pcm.samples) == int(row["n_samples"])
    return pcm.samples


def render_ours(category: str, row: dict[str, str]) -> dict[str, np.ndarray]:
    """Our 24 clips of a source (clip id -> int16 PCM), through the package's row renderer."""
    clip = SourceClip(row["source_item_id"], row["source_clip_id"], "spk", "", row["file"], float(row["onset_sec"]), float(row["offset_sec"]))
    rows = list(iter_clip_rows(CATEGORIES[category], clip, source_samples(row), int(row["sample_rate"])))
    # the float32 array is PCM16 / 32768, so scaling back is exact
    return {r["benchmark_clip_id"]: (r["audio"]["array"] * np.float32(32768.0)).astype(np.int16) for r in rows}


def differences(category: str, ours: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    """(clip id, what differs) for every clip whose length or PCM hash differs from the published one."""
    out = []
    for cid, pcm in sorted(ours.items()):
        n, sha = published()[(category, cid)]
        if len(pcm) != n:
            out.append((cid, f"length {len(pcm)} != published {n}"))
        elif pcm_sha256(pcm) != sha:
            out.append((cid, "pcm hash differs"))
    return out


@pytest.mark.parametrize("item", list(SOURCES))
@pytest.mark.parametrize("category", CATEGORY_NAMES)
def test_clips_equal_published_outputs(category: str, item: str) -> None:
    row = SOURCES[item]
    ours = render_ours(category, row)
    expected = {cid for cat, cid in published() if cat == category and cid.startswith(f"{item}__")}
    assert set(ours) == expected and len(expected) == 24
    diffs = differences(category, ours)
    if category not in VOCODED or not diffs:
        assert not diffs, f"{category}/{item}: {len(diffs)} of 24 clips differ from the published generator:\n" + "\n".join(
            f"  {cid}: {why}" for cid, why in diffs
        )
        return
    # speed/pitch on a CPU or C library whose float32 atan2/cos/sin differ from the published machine's:
    # each differing clip must be the same length and within one PCM16 step of its lossless copy
    worst = 0
    for cid, why in diffs:
        copy = REF / "audio" / category / f"{cid}.flac"
        assert why == "pcm hash differs", f"{cid}: {why}"
        assert copy.exists(), f"{cid}: hash differs and no lossless copy bounds the difference"
        ref = sf.read(copy, dtype="int16")[0]
        worst = max(worst, int(np.abs(ref.astype(np.int32) - ours[cid]).max()))
    assert worst <= 1, f"{category}/{item}: max difference {worst} PCM16 steps (allowed: 1)"
    warnings.warn(f"{category}/{item}: {len(diffs)} clips within one PCM16 step of the published outputs, not bit-exact", stacklevel=1)


def test_fixture_covers_the_rare_code_paths() -> None:
    """The edge sources reach what they were chosen for: rounded non-integer distortion rates and a
    post-offset region shorter than one FFT window (short-window rule)."""
    from vocalgrad_dataset.categories.distortion import hold_length
    from vocalgrad_dataset.grid import Condition

    cat = CATEGORIES["distortion"]
    row = SOURCES["edge_02"]
    n = int(row["n_samples"])
    onset, offset = round(float(row["onset_sec"]) * 48000), round(float(row["offset_sec"]) * 48000)
    assert n - offset == 300  # < 512: clarity's post-offset window shrinks n_fft to 300 and keeps hop 128
    sched = cat.schedule(Condition("quad_first_flat", "high", "down"), onset, offset, n, 48000)
    assert sched.values[37] == pytest.approx(19199.72, abs=0.01)
    assert hold_length(sched.values[37], 48000) == 2  # 19199.72 -> 19200 -> 2.5 -> 2 (half to even)
    assert round(48000 / sched.values[37]) == 3  # what an unrounded rate would give


@pytest.mark.parametrize("item", [i for i, r in SOURCES.items() if r["onset_origin"] == "published detector"])
def test_onset_detector_equals_published_detector(item: str) -> None:
    row = SOURCES[item]
    onset, offset = detect_onset_offset(source_samples(row), int(row["sample_rate"]), clip_name=item)
    assert (f"{onset:.6f}", f"{offset:.6f}") == (row["onset_sec"], row["offset_sec"])


BASELINE = Path(__file__).resolve().parents[1] / "benchmarks" / "baseline_generator.py"


def test_baseline_generator_imports_none_of_our_code() -> None:
    """The reference the fast paths are tested against must not share their code (a shared bug would cancel)."""
    import ast

    tree = ast.parse(BASELINE.read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in the baseline"
            roots.add((node.module or "").split(".")[0])
    third_party = roots - {"__future__", "hashlib", "json", "math", "functools", "pathlib", "typing"}
    assert third_party <= {"numpy", "librosa", "scipy"}, third_party
    assert "importlib" not in roots and "__import__" not in BASELINE.read_text(encoding="utf-8")
    # nor runs our code another way (reading a module's source and executing it)
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"exec", "eval", "compile"}, calls & {"exec", "eval", "compile"}


# one condition per curve, mixed tiers and directions, on the sources that reach the rare code paths
BASELINE_CASES = [
    (category, f"{item}__{SOURCES[item]['source_clip_id']}__{cond}")
    for category in CATEGORY_NAMES
    for item, cond in (
        [("arctic_male_01", "jump__high__up"), ("arctic_male_01", "linear__low__down")]
        if category in VOCODED
        else [
            ("edge_02", "quad_first_flat__high__down"),
            ("edge_01", "linear__mid__up"),
            ("an4_speaker_01", "quad_last_flat__low__up"),
        ]
    )
]


@pytest.mark.parametrize(("category", "cid"), BASELINE_CASES)
def test_baseline_generator_reproduces_published_outputs(category: str, cid: str) -> None:
    """The independent baseline is a real reference: it reproduces the published clips (speed/pitch on an
    AVX-512 CPU within one step, as librosa's np.angle differs there) and therefore agrees with ours."""
    sys.path.insert(0, str(BASELINE.parents[1]))
    from benchmarks.baseline_generator import render_condition

    row = SOURCES[cid.split("__")[0]]
    pcm = render_condition(category, source_samples(row), int(row["sample_rate"]), float(row["onset_sec"]), float(row["offset_sec"]), cid)
    n, sha = published()[(category, cid)]
    assert len(pcm) == n
    if category in VOCODED:
        ref = sf.read(REF / "audio" / category / f"{cid}.flac", dtype="int16")[0]
        assert np.abs(ref.astype(np.int32) - pcm).max() <= 1
    else:
        assert pcm_sha256(pcm) == sha
