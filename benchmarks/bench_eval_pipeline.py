"""The evaluation path's CPU front end overlapped with the model, against the serial path, in one run.

Both paths are the real runner (harness.runner.run_eval) over the same generated rows (the demo speech through
vocalgrad_dataset.generate, 48 kHz): serial (--data-workers 0 --frontend-workers 0: rows, template, resampling
and log-mels in the model's thread) and ours (--data-workers N: a RowPool of N processes, one BLAS thread each,
builds rows, prompts and per-clip features in the serial path's order while the model answers; plus
--frontend-workers threads). Both sides are measured warm: the serial process has run the front end once
(front_end_seconds), the pool has run every config once (warm_pool); the pool's start-up is printed apart and
also counted in (a real run starts it before the model loads, so loading hides it). Two models:

  standin  benchmarks/standin.py:StandInModel: Whisper log-mels on the CPU (prepare_prompts), then a fixed
           wait per clip (the accelerator's share; a wait, so the ratio holds on a busy machine). The wait is
           --model-share x the measured front-end time per clip (default 0.9: a GPU slightly faster than its
           front end, the case the overlap exists for). Ideal ratio: (front end + model) / max(front end / N,
           model) = 2.1 at the default 0.9 with no gain from the threads themselves, more where they run in
           parallel.
  tiny     the random tiny Qwen2-Audio (harness/models/tiny.py) through HFAudioLM, greedy: real processor and
           model on the CPU (both compete for the cores here, so its ratio is reported, not required).

Prints clips/s per path and ours/serial; exits 2 when any samples file differs by a byte between the two paths,
else 1 when the stand-in's ratio is under --min-ratio (1.8).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.standin import StandInModel  # noqa: E402
from harness import results as res  # noqa: E402
from harness.data import GeneratorSource  # noqa: E402
from harness.prefetch import RowPool  # noqa: E402
from harness.prompts import build_prompt, get_variant  # noqa: E402
from harness.runner import EvalSettings, row_front_end, run_eval  # noqa: E402


class OneProcess:
    """The runner's view of a single process (no accelerate state needed for a benchmark)."""

    rank, world_size, device, is_main = 0, 1, "cpu", True

    def barrier(self) -> None:
        """Nothing to wait for."""


def front_end_seconds(model: StandInModel, source: GeneratorSource, configs: list[str]) -> float:
    """Seconds per clip of the serial front end (row generation, template, log-mels) over every row of the
    configs (row generation is lumpy: pitch renders a whole source clip's rows at once), after a warm-up."""
    variant = get_variant("default")
    warm = source.rows(configs[0], source.units(configs[0])[:1])
    model.prepare_prompts([build_prompt(next(warm), variant)[0]])  # first-call costs: resampler, FFT plans
    start = time.perf_counter()
    n = 0
    for config in configs:
        for row in source.rows(config, source.units(config)):
            model.prepare_prompts([build_prompt(row, variant)[0]])
            n += 1
    return (time.perf_counter() - start) / n


def timed_run(model: Any, source: GeneratorSource, out: Path, configs: list[str], workers: int, batch: int,
              limit: int | None, max_new_tokens: int, frontend_workers: int = 1) -> dict[str, Any]:
    """One full run_eval into `out`; wall seconds, clips/s and the samples files' bytes. workers 0: the serial
    path (no processes, no threads); else a RowPool of `workers` processes, started and timed first (in a
    real run it starts before the model loads and overlaps the loading), and `frontend_workers` threads."""
    settings = EvalSettings(model=model.name, configs=configs, out=str(out), batch_size=batch, limit=limit,
                            preflight=False, frontend_workers=frontend_workers if workers else 0,
                            data_workers=workers, max_new_tokens=max_new_tokens, retry_max_new_tokens=0)
    start = time.perf_counter()
    pool = RowPool(workers) if workers else None
    if pool is not None:
        pool.wait_ready()
        warm_pool(pool, model, source, configs)
    started = time.perf_counter()
    try:
        results = run_eval(settings, model=model, source=source, dist=OneProcess(), pool=pool)  # type: ignore[arg-type]
    finally:
        seconds = time.perf_counter() - started
        if pool is not None:
            pool.close()
    n = sum(m["n"] for m in res.task_metrics(results).values())
    files = {c: res.samples_path(out, c).read_bytes() for c in configs}
    files.update({f"{c}.predictions": predictions(res.samples_path(out, c)) for c in configs})
    return {"workers": workers, "clips": n, "seconds": round(seconds, 2), "clips_per_s": round(n / seconds, 2),
            "pool_start_s": round(started - start, 2),
            "clips_per_s_with_start": round(n / (seconds + started - start), 2), "_files": files}


def warm_pool(pool: RowPool, model: Any, source: GeneratorSource, configs: list[str]) -> None:
    """One pass of every config's rows through the pool, discarded: the processes' first-use costs (source
    speech, FFT plans, fresh memory) warmed as front_end_seconds warms the serial side's process, so both
    sides are measured warm, as in a paper-sized run (21,600 clips a model) where start-up is amortised."""
    front_end = row_front_end(model, get_variant("default"))
    for config in configs:
        for _row in pool.rows(source, pool.tasks(config, source.units(config)), front_end):
            pass


def predictions(path: Path) -> bytes:
    """The predictions alone (clip id, pred, raw) of a samples file, as bytes."""
    return "".join(json.dumps([r["benchmark_clip_id"], r["pred"], r["raw"]]) + "\n"
                   for r in res.read_jsonl(path)).encode()


def compare(name: str, serial: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """The pair's summary row: clips/s, ratio, and whether every samples file is byte-identical."""
    same = serial.pop("_files") == ours.pop("_files")
    ratio = ours["clips_per_s"] / serial["clips_per_s"]
    with_start = ours["clips_per_s_with_start"] / serial["clips_per_s"]
    print(f"{name:8s} serial {serial['clips_per_s']:7.2f} clips/s | ours ({ours['workers']} processes) "
          f"{ours['clips_per_s']:7.2f} clips/s | ours/serial {ratio:.2f}x | pool start-up "
          f"{ours['pool_start_s']:.2f} s (outside the window; counted in: {with_start:.2f}x) | "
          f"predictions and samples byte-identical: {same}")
    return {"model": name, "serial": serial, "ours": ours, "ratio": round(ratio, 3),
            "ratio_with_pool_start": round(with_start, 3), "identical": same}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="volume,pitch",
                    help="comma-separated configs (default: %(default)s, 72 clips each)")
    ap.add_argument("--workers", type=int, default=2,
                    help="row processes of our path (--data-workers; default: %(default)s)")
    ap.add_argument("--frontend-workers", type=int, default=1,
                    help="front-end threads of our path (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=8, help="rows per model call (default: %(default)s)")
    ap.add_argument("--model-share", type=float, default=0.9,
                    help="the stand-in's wait per clip as a share of the measured front end (default: %(default)s)")
    ap.add_argument("--min-ratio", type=float, default=1.8, help="stand-in ours/serial below this: exit 1")
    ap.add_argument("--tiny-limit", type=int, default=16, help="clips per config for the tiny model (0: skip it)")
    ap.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    args = ap.parse_args(argv)
    configs = args.configs.split(",")
    source = GeneratorSource("test", "demo")
    probe = StandInModel(0.0, batch_size=args.batch)
    per_clip = front_end_seconds(probe, source, configs)
    wait = args.model_share * per_clip
    print(f"front end {per_clip * 1000:.1f} ms/clip (serial, measured); stand-in model waits {wait * 1000:.1f} ms/clip")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pair = [timed_run(StandInModel(wait, args.batch), source, root / f"standin-{w}", configs, w, args.batch,
                          None, 128, args.frontend_workers) for w in (0, args.workers)]
        rows.append(compare("standin", *pair))
        if args.tiny_limit:
            from harness.models.tiny import tiny_model

            lm = tiny_model("qwen2-audio", batch_size=args.batch, fast_encoder=True)
            pair = [timed_run(lm, source, root / f"tiny-{w}", configs, w, args.batch, args.tiny_limit, 8,
                              args.frontend_workers) for w in (0, args.workers)]
            rows.append(compare("tiny", *pair))
    summary = {"front_end_ms_per_clip": round(per_clip * 1000, 2), "standin_ms_per_clip": round(wait * 1000, 2),
               "min_ratio": args.min_ratio, "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1) + "\n")
    if not all(r["identical"] for r in rows):
        print("FAIL: a samples file differs between the serial and the overlapped path", file=sys.stderr)
        return 2
    if rows[0]["ratio"] < args.min_ratio:
        print(f"FAIL: stand-in ours/serial {rows[0]['ratio']:.2f}x < {args.min_ratio}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
