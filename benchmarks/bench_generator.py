"""Generator speed: ours vs the straightforward per-window generator, in one process, with ratios.

    python benchmarks/bench_generator.py                 # per-category ratios on two real sources (~1 min)
    python benchmarks/bench_generator.py --split test    # + the whole 21,600-clip test split, --num-proc 2
    python benchmarks/bench_generator.py --split train   # + the 108,000-clip train split (~10+ min)
    python benchmarks/bench_generator.py --ours-only --only speed,pitch,clarity --package /tmp/before
                                                         # an older checkout's package (before/after ratios)

Times are CPU seconds of this process (robust to other load) for the per-clip table and wall seconds for
the split builds. The straightforward side (benchmarks/baseline_generator.py, independent of the package)
works as the published generator does: per condition it re-reads the source and calls librosa once per
150 ms window. Published generator's CPU time per output clip on one core: speed ~0.56 s, pitch ~0.63 s,
clarity ~0.15 s, echo and vibration ~0.02 s, the rest 0.005-0.012 s; the "x publ." column divides those by ours.
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


def _package_dir(argv: list[str]) -> str | None:
    """--package DIR, read before vocalgrad_dataset is imported (it decides which copy is imported)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--package", default=None)
    return pre.parse_known_args(argv)[0].package


if _package_dir(sys.argv[1:]):  # e.g. `git archive <commit> vocalgrad_dataset | tar -x -C DIR`
    sys.path.insert(0, str(Path(_package_dir(sys.argv[1:])).resolve()))
from benchmarks.baseline_generator import WINDOW_OPS, render_condition  # noqa: E402
from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES  # noqa: E402
from vocalgrad_dataset.export import build  # noqa: E402
from vocalgrad_dataset.generate import iter_rows, render_clip_rows, speech_span  # noqa: E402
from vocalgrad_dataset.grid import clip_id, conditions  # noqa: E402
from vocalgrad_dataset.sources import Source, SourceClip, get_source  # noqa: E402

PUBLISHED_S_PER_CLIP = {
    "speed": (0.56, 0.56), "pitch": (0.63, 0.63), "clarity": (0.15, 0.15), "echo": (0.02, 0.02),
    "vibration": (0.02, 0.02), "volume": (0.005, 0.012), "noise": (0.005, 0.012),
    "distortion": (0.005, 0.012), "roughness": (0.005, 0.012),
}  # fmt: skip
WHY_NOT_FASTER = {
    "pitch": "each window is resampled by soxr_hq at its own ratio (as librosa.pitch_shift does); the "
    "resampler's per-ratio setup is ~0.1-0.6 ms and cannot be shared between distinct ratios, so about "
    "half of our pitch time is that irreducible resampling.",
}


def real_sources() -> tuple[Source, list[SourceClip]]:
    """Two real ~4-5 s demo sources at 48 kHz (as in the published measurement)."""
    src = get_source("demo")
    wanted = ("arctic_a0007", "sense_and_sensibility_01_austen_64kb-0890")
    return src, [c for s in ("test", "train") for c in src.clips(s) if c.source_clip_id in wanted]


def ours_clip(category: str, source: Source, clip: SourceClip) -> list[np.ndarray]:
    """The package's path: read once, render the 24 conditions together, PCM16 out."""
    pcm = source.read(clip)
    rows = render_clip_rows(CATEGORIES[category], clip, pcm.samples, pcm.sample_rate)
    return [(r["audio"]["array"] * np.float32(32768.0)).astype(np.int16) for r in rows]


def baseline_clip(category: str, source: Source, clip: SourceClip) -> list[np.ndarray]:
    """The straightforward path: per condition, re-read the source and render it on its own."""
    out = []
    for cond in conditions():
        pcm = source.read(clip)  # re-read per condition, as published
        onset, offset = speech_span(clip, pcm.samples, pcm.sample_rate)
        cid = clip_id(clip.source_item_id, clip.source_clip_id, cond)
        sr = pcm.sample_rate
        out.append(render_condition(category, pcm.samples, sr, onset / sr, offset / sr, cid))
    return out


def per_category(names: tuple[str, ...] = CATEGORY_NAMES, with_baseline: bool = True) -> list[dict]:
    """CPU ms per output clip, ours vs the straightforward generator, with the largest output difference."""
    source, clips = real_sources()
    rows = []
    for name in names:
        ours = base = 0.0
        diff: int | None = 0 if with_baseline else None
        n = 0
        for clip in clips:
            ours_clip(name, source, clip)  # warm caches (filter windows, reverb IR, imports)
            t = time.process_time()
            fast = ours_clip(name, source, clip)
            ours += time.process_time() - t
            n += len(fast)
            if not with_baseline:
                continue
            t = time.process_time()
            ref = baseline_clip(name, source, clip)
            base += time.process_time() - t
            diff = max(diff, max(int(np.abs(a.astype(np.int32) - b).max()) for a, b in zip(fast, ref, strict=True)))
        lo, hi = PUBLISHED_S_PER_CLIP[name]
        rows.append({
            "category": name, "ours_ms": 1e3 * ours / n, "baseline_ms": 1e3 * base / n if with_baseline else None,
            "speedup": base / ours if with_baseline else None, "vs_published": (lo + hi) / 2 / (ours / n),
            "max_pcm_diff": diff,
            "baseline_is": "per-window librosa, re-read per condition" if name in WINDOW_OPS else "re-read and render per condition",
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
    p.add_argument("--only", default=None, metavar="CATS", help="comma-separated categories (default: all nine)")
    p.add_argument("--ours-only", action="store_true", help="time only our generator (no baseline, no streaming)")
    p.add_argument("--package", default=None, metavar="DIR",
                   help="time the vocalgrad_dataset inside DIR (an older checkout) instead of this one's")
    args = p.parse_args()
    names = tuple(args.only.split(",")) if args.only else CATEGORY_NAMES
    unknown = sorted(set(names) - set(CATEGORY_NAMES))
    if unknown:
        p.error(f"unknown categories: {', '.join(unknown)}")
    import vocalgrad_dataset

    print(f"package: {Path(vocalgrad_dataset.__file__).parent}")
    if not args.skip_categories:
        print(f"{'category':11s} {'ours ms':>8s} {'base ms':>8s} {'x base':>7s} {'x publ.':>8s} {'max PCM diff':>12s}  baseline")
        for r in per_category(names, with_baseline=not args.ours_only):
            if args.ours_only:
                print(f"{r['category']:11s} {r['ours_ms']:8.1f} {'-':>8s} {'-':>7s} {r['vs_published']:8.1f} {'-':>12s}  (not run)")
                continue
            print(f"{r['category']:11s} {r['ours_ms']:8.1f} {r['baseline_ms']:8.1f} {r['speedup']:7.1f} {r['vs_published']:8.1f} {r['max_pcm_diff']:12d}  {r['baseline_is']}")
            if r["category"] in WHY_NOT_FASTER and r["speedup"] < 10:
                print(f"{'':11s} why not more: {WHY_NOT_FASTER[r['category']]}")
    if args.ours_only:
        return
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
