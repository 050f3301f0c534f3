"""transcript-reader's claim-following (CF) on every incongruent test row of the nine `-conflict` configs.

`harness eval --model transcript-reader` would transcribe every row (congruent and neutral too); CF needs only
the incongruent ones, so this runs the same model object on exactly those rows (prompt meta as the harness
gives it: the row's category) and scores CF = share of answers equal to the row's claim, with its Wilson 95 %
interval (harness.metrics.binomial_interval), per config and pooled, and each config's CF against 0.5 with the
configs tested together (harness.metrics.chance_tests, family-wise 95 %: the joint interval, the score test's
p, adjusted, and the verdict above / below / at chance). Not a CI test: Whisper per clip.

    python benchmarks/bench_reader_claim_following.py --out runs/bench-reader-cf [--configs volume-conflict,...]

Writes OUT/<config>.jsonl (one line per row: id, tier, curve, template, voice, claim, answer, the whole clip's
transcript and, where it claimed nothing, every reading view's) and OUT/benchmark.json (CF, k, n, interval,
and how many answers were the coin because no view's words claimed anything).

    python benchmarks/bench_reader_claim_following.py --reread OUT [OUT2 ...] --out DIR

re-reads recorded runs with the current reader (its lexicon and pooling) without Whisper: the answer depends
only on the words, so replaying the transcripts is the run; a row whose replay needs a view that was never
transcribed is an error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from harness.metrics import binomial_interval, chance_tests  # noqa: E402
from harness.models.baselines import TranscriptReader, pooled_claim  # noqa: E402
from harness.models.protocol import AudioClip, Prompt  # noqa: E402
from vocalgrad_dataset.categories import CATEGORY_NAMES  # noqa: E402
from vocalgrad_dataset.fileio import atomic_write_text  # noqa: E402
from vocalgrad_dataset.generate import config_ids, iter_rows  # noqa: E402

BATCH = 16


def incongruent_ids(config: str) -> set[str]:
    """The incongruent test rows' ids, known without rendering: a claiming carrier's template id says its
    claim ("volume-inc-te1"), the id's last part the direction (up: increase); they differ."""
    claimed = {"inc": "up", "dec": "down"}
    out = set()
    for cid in config_ids(config, "test"):
        claim = cid.split("__")[0].split("-")[-2]
        if claim in claimed and cid.rsplit("__", 1)[1] != claimed[claim]:
            out.add(cid)
    return out


def incongruent_prompts(config: str, category: str) -> list[tuple[dict, Prompt]]:
    """(row facts, prompt) for every incongruent test row of a conflict config (only those are rendered)."""
    out = []
    for r in iter_rows(config, "test", ids=incongruent_ids(config)):
        if r["congruent"] is not False:
            continue
        audio = r["audio"]
        clip = AudioClip(np.asarray(audio["array"], dtype=np.float32), int(audio["sampling_rate"]))
        facts = {
            k: r[k]
            for k in ("benchmark_clip_id", "tier", "curve", "template_id", "voice_id", "claim", "label")
        }
        out.append(
            (
                facts,
                Prompt(
                    ("Does it increase or decrease?", clip),
                    clip_id=r["benchmark_clip_id"],
                    meta={"category": category},
                ),
            )
        )
    return out


def measure(config: str, reader: TranscriptReader, out: Path) -> dict:
    """CF of one config's incongruent rows; writes its rows' JSONL."""
    category = config.removesuffix("-conflict")
    items = incongruent_prompts(config, category)
    lines, hits = [], 0
    for i in range(0, len(items), BATCH):
        chunk = items[i : i + BATCH]
        answers = reader.generate([p for _, p in chunk], max_new_tokens=8)
        for (facts, p), answer in zip(chunk, answers, strict=True):
            hits += answer == facts["claim"]
            views = reader.views_heard(p.clip_id)
            lines.append(
                json.dumps({**facts, "answer": answer, "whole": reader.transcribe([p])[0], "views": views})
            )
        print(f"{config}: {min(i + BATCH, len(items))}/{len(items)}", file=sys.stderr, flush=True)
    atomic_write_text(out / f"{config}.jsonl", "\n".join(lines) + "\n")
    low, high = binomial_interval(hits, len(items))
    rows = [json.loads(line) for line in lines]
    return {
        "claim_following": hits / len(items),
        "k": hits,
        "n": len(items),
        "ci_low": low,
        "ci_high": high,
        "coin": coin_answers(rows, category),
    }


class NoWhisper:
    """Stands in for Whisper when replaying: any transcription request means a transcript was never recorded."""

    def transcribe(self, clips: list[AudioClip]) -> list[str]:
        raise RuntimeError(f"replay needs {len(clips)} transcript(s) that the recorded run never made")


def coin_answers(rows: list[dict], category: str) -> int:
    """How many rows no transcript's words claimed anything for (the reader's coin answered them)."""
    return sum(
        pooled_claim([r["whole"]], category) is None
        and pooled_claim(r["views"] or [r["whole"]], category) is None
        for r in rows
    )


def reread(runs: list[Path], out: Path, seed: int = 1234) -> dict:
    """Replay recorded transcripts through the current reader: CF per config and pooled."""
    summary = {}
    for run in runs:
        for path in sorted(run.glob("*-conflict.jsonl")):
            config = path.stem
            category = config.removesuffix("-conflict")
            rows = [json.loads(line) for line in path.read_text().splitlines() if line]
            reader = TranscriptReader(seed=seed, whisper=NoWhisper())
            silent = AudioClip(np.zeros(16, np.float32), 16000)
            prompts = [
                Prompt(("q", silent), clip_id=r["benchmark_clip_id"], meta={"category": category})
                for r in rows
            ]
            for r in rows:
                reader.remember(r["benchmark_clip_id"], r["whole"], r["views"])
            answers = reader.generate(prompts, max_new_tokens=8)
            lines = [json.dumps({**r, "answer": a}) for r, a in zip(rows, answers, strict=True)]
            atomic_write_text(out / path.name, "\n".join(lines) + "\n")
            hits = sum(a == r["claim"] for r, a in zip(rows, answers, strict=True))
            low, high = binomial_interval(hits, len(rows))
            summary[config] = {
                "claim_following": hits / len(rows),
                "k": hits,
                "n": len(rows),
                "ci_low": low,
                "ci_high": high,
                "coin": coin_answers(rows, category),
            }
    return summary


def with_chance_tests(summary: dict) -> dict:
    """The summary with each config's CF tested against 0.5, its configs together (family-wise 95 %)."""
    per = {c: v for c, v in summary.items() if c != "pooled"}
    tests = chance_tests({c: (v["k"], v["n"]) for c, v in per.items()})
    return {**summary, **{c: {**v, "vs_chance": {k: tests[c][k] for k in ("vs_chance", "p", "p_adjusted", "ci_low",
                                                                          "ci_high")}} for c, v in per.items()}}


def pooled(summary: dict) -> dict:
    """The pooled CF over the configs of a summary."""
    per = [v for k, v in summary.items() if k != "pooled"]
    k, n = sum(v["k"] for v in per), sum(v["n"] for v in per)
    low, high = binomial_interval(k, n)
    return {
        "claim_following": k / n,
        "k": k,
        "n": n,
        "ci_low": low,
        "ci_high": high,
        "coin": sum(v.get("coin", 0) for v in per),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--configs", default=",".join(f"{c}-conflict" for c in CATEGORY_NAMES))
    p.add_argument("--reread", type=Path, nargs="+", help="recorded run folders to replay (no Whisper)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.reread:
        summary = with_chance_tests(reread(args.reread, args.out))
        summary["pooled"] = pooled(summary)
        atomic_write_text(args.out / "benchmark.json", json.dumps(summary, indent=1) + "\n")
        print(json.dumps(summary, indent=1))
        return 0
    reader = TranscriptReader(batch_size=BATCH)
    summary_path = args.out / "benchmark.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    start = time.time()
    for config in args.configs.split(","):
        if config in summary:  # resumable: a finished config is not measured again
            continue
        summary[config] = measure(config, reader, args.out)
        atomic_write_text(summary_path, json.dumps(summary, indent=1) + "\n")
        print(json.dumps({config: summary[config]}), flush=True)
    summary = with_chance_tests(summary)
    summary["pooled"] = pooled(summary)
    atomic_write_text(summary_path, json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"pooled": summary["pooled"], "seconds": round(time.time() - start)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
