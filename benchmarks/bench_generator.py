"""Generator speed: ours vs the straightforward per-window generator, in one process, with ratios.

    python benchmarks/bench_generator.py                 # per-category ratios on two real sources (~1 min)
    python benchmarks/bench_generator.py --split test    # + the whole 21,600-clip test split, --num-proc 2
    python benchmarks/bench_generator.py --split train   # + the 108,000-clip train split (~10+ min)

Times are CPU seconds of this process (robust to other load) for the per-clip table and wall seconds for
the split builds. Published reference (one core, two real ~4-5 s sources, per output clip): speed and
pitch 0.34-0.38 s, clarity 0.11-0.16 s, echo and vibration ~0.02 s, the rest 0.005-0.012 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.baseline_generator import BASELINE_OPS, render_baseline  # noqa: E402
from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES  # noqa: E402
from vocalgrad_dataset.export import build  # noqa: E402
from vocalgrad_dataset.generate import iter_rows, speech_span  # noqa: E402
from vocalgrad_dataset.grid import conditions  # noqa: E402
from vocalgrad_dataset.sources import get_source  # noqa: E402

PUBLISHED_S_PER_CLIP = {
    "speed": (0.34, 0.38), "pitch": (0.34, 0.38), "clarity": (0.11, 0.16), "echo": (0.02, 0.02),
    "vibration": (0.02, 0.02), "volume": (0.005, 0.012), "noise": (0.005, 0.012),
    "distortion": (0.005, 0.012), "roughness": (0.005, 0.012),
}  # fmt: skip
WHY_NOT_FASTER = {
    "pitch": "each window is resampled by soxr_hq at its own ratio (as librosa.pitch_shift does); the "
    "resampler's per-ratio setup is ~0.1-0.6 ms and cannot be shared between distinct ratios, so about "
    "half of our pitch time is that irreducible resampling.",
}


def real_sources() -> list[tuple[str, np.ndarray, int, int, int]]:
    """Two real ~4-5 s demo sources at 48 kHz (as in the published measurement)."""
    src = get_source("demo")
    picked = [c for s in ("test", "train") for c in src.clips(s) if c.source_clip_id in ("arctic_a0007", "sense_and_sensibility_01_austen_64kb-0890")]
    out = []
    for clip in picked:
        pcm = src.read(clip)
        onset, offset = speech_span(clip, pcm.samples, pcm.sample_rate)
        out.append((clip.source_clip_id, pcm.float32, pcm.sample_rate, onset, offset))
    return out


def per_category(rounds: int = 1) -> list[dict]:
    """CPU ms per output clip, ours (24 conditions together) vs baseline (each condition, each window)."""
    sources = real_sources()
    grid = conditions()
    rows = []
    for name in CATEGORY_NAMES:
        cat = CATEGORIES[name]
        ours = base = 0.0
        diff = 0.0
        n = 0
        for clip_id, audio, sr, onset, offset in sources:
            ids = [f"{clip_id}__{i}" for i in range(len(grid))]
            cat.render_clip(audio, sr, onset, offset, grid[:2], ids[:2])  # warm caches
            for _ in range(rounds):
                t = time.process_time()
                fast = [y for y, _ in cat.render_clip(audio, sr, onset, offset, grid, ids)]
                ours += time.process_time() - t
                schedules = [cat.schedule(c, onset, offset, len(audio), sr) for c in grid]
                by_tier = [cat.fixed(c.tier) for c in grid]
                t = time.process_time()
                ref = [render_baseline(name, audio, sr, [s], {**f, "seeds": [cat_seed]})[0]
                       for s, f, cat_seed in zip(schedules, by_tier, [__import__("vocalgrad_dataset.categories", fromlist=["noise_seed"]).noise_seed(i) for i in ids], strict=True)]  # fmt: skip
                base += time.process_time() - t
                diff = max(diff, max(float(np.abs(a - b).max()) for a, b in zip(fast, ref, strict=True)))
                n += len(grid)
        lo, hi = PUBLISHED_S_PER_CLIP[name]
        rows.append({
            "category": name, "ours_ms": 1e3 * ours / n, "baseline_ms": 1e3 * base / n, "speedup": base / ours,
            "vs_published": (lo + hi) / 2 / (ours / n), "max_abs_diff": diff, "baseline_is": "per-window librosa" if name in BASELINE_OPS else "same code, one condition at a time",
        })  # fmt: skip
    return rows


def split_build(split: str, num_proc: int) -> dict:
    """Wall time of a whole split (all nine categories) built to Parquet from stand-in sources."""
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        report = build("all", [split], out, source="benchmarks.standin:StandInSource", num_proc=num_proc, progress=True)
        wall = time.perf_counter() - t
    clips = report["written_rows"]
    return {"split": split, "clips": clips, "wall_s": wall, "clips_per_s": clips / wall, "num_proc": num_proc}


def streaming_rate(n_sources: int = 3) -> dict:
    """Clips/s per core for the `all` config streamed in one process (what one DataLoader worker gives)."""
    from benchmarks.standin import StandInSource

    src = StandInSource()
    clips = src.clips("test")[:n_sources]
    t = time.process_time()
    n = sum(1 for _ in iter_rows("all", "test", src, clips=clips))
    cpu = time.process_time() - t
    return {"clips": n, "clips_per_s_per_core": n / cpu, "cores_for_200_clips_per_s": 200 / (n / cpu)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=["test", "train"], default=None)
    p.add_argument("--num-proc", type=int, default=2)
    p.add_argument("--skip-categories", action="store_true")
    args = p.parse_args()
    if not args.skip_categories:
        print(f"{'category':11s} {'ours ms':>8s} {'base ms':>8s} {'x base':>7s} {'x publ.':>8s} {'max|diff|':>10s}  baseline")
        for r in per_category():
            print(f"{r['category']:11s} {r['ours_ms']:8.1f} {r['baseline_ms']:8.1f} {r['speedup']:7.1f} {r['vs_published']:8.1f} {r['max_abs_diff']:10.2e}  {r['baseline_is']}")
            if r["category"] in WHY_NOT_FASTER and r["speedup"] < 10:
                print(f"{'':11s} why not more: {WHY_NOT_FASTER[r['category']]}")
    s = streaming_rate()
    print(f"streaming `all`: {s['clips_per_s_per_core']:.1f} clips/s per core -> {s['cores_for_200_clips_per_s']:.1f} cores for 200 clips/s (16-core host: {16 * s['clips_per_s_per_core']:.0f} clips/s)")
    if args.split:
        r = split_build(args.split, args.num_proc)
        target = {"test": 300, "train": 1500}[args.split]
        print(f"{args.split} split: {r['clips']} clips in {r['wall_s']:.0f} s wall with --num-proc {r['num_proc']} "
              f"({r['clips_per_s']:.0f} clips/s); target < {target} s: {'met' if r['wall_s'] < target else 'MISSED'}")
        print(json.dumps(r))


if __name__ == "__main__":
    main()
