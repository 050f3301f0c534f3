"""Freeze VoxParadox-lite item ids (vocalgrad_dataset/data/voxparadox/ids/<task>-<split>.txt: id TAB sha256 of
the item's PCM16 samples TAB Whisper tiny.en word error rate against the item's script, "-" when the item
itself was not transcribed: --level signal).

An item is kept when (1) its label measured from the signal equals its true label and (2) Whisper tiny.en's
transcript of the built item (the DSP-processed, joined audio, as PCM16: what a model is served) equals the
item's script after normalize_text (voxparadox.whisper_accepts; so its words assert the adversarial label),
on every task. Candidates are tried in the builder's order until the split's quota is kept, no answer more than its
share (label_cap: gender, intonation, counting and identity balance their labels); transcripts are
cached in a TSV (id, sha256, transcript; rewritten atomically after every batch), so a stopped run resumes
where it was. Builds never run this.

    .venv/bin/python scripts/freeze_voxparadox_ids.py --split test [--tasks pitch,gender] [--cache FILE]
"""

from __future__ import annotations

import argparse
import csv
import functools
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vocalgrad_dataset.fileio import atomic_write_text  # noqa: E402
from vocalgrad_dataset.voxparadox import (  # noqa: E402
    BASES_TSV,
    IDS_DIR,
    SPLIT_SIZES,
    SR,
    TASKS,
    Item,
    pcm_sha256,
    whisper_accepts,
    word_error_rate,
)
from vocalgrad_dataset.voxparadox.items import Candidate, label_cap, signal_verified  # noqa: E402

DEFAULT_CACHE = ROOT / "runs" / "voxparadox-freeze" / "transcripts.tsv"


class TranscriptCache:
    """Whisper transcripts by (item id, PCM sha256), kept in a TSV rewritten atomically."""

    def __init__(self, path: Path, also_read: tuple[Path, ...] = ()) -> None:
        self.path, self.also_read = path, also_read
        self.rows: dict[tuple[str, str], str] = {}
        self.refresh()
        self._read(path)

    def _read(self, file: Path) -> None:
        if file.is_file():
            with open(file, newline="", encoding="utf-8") as f:
                for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                    self.rows.setdefault((r["id"], r["sha256"]), r["transcript"])

    def refresh(self) -> None:
        """Read the other runs' caches again (--offset helpers fill them meanwhile; never written here)."""
        for file in self.also_read:
            self._read(file)

    def get(self, key: tuple[str, str]) -> str | None:
        return self.rows.get(key)

    def put(self, key: tuple[str, str], transcript: str) -> None:
        self.rows[key] = " ".join(transcript.replace("\t", " ").split())

    def save(self) -> None:
        lines = ["id\tsha256\ttranscript", *(f"{i}\t{h}\t{t}" for (i, h), t in self.rows.items())]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, "\n".join(lines) + "\n")


def served(audio: np.ndarray) -> np.ndarray:
    """Audio as a model reads it back from the built PCM16 WAV."""
    from vocalgrad_dataset.dsp import to_pcm16

    return to_pcm16(audio)[0].astype(np.float32) / 32768.0


# Tasks whose segments are base utterances only scaled to one level (their bases' transcripts hold for them).
LEVEL_ONLY = ("gender", "counting", "identity")


def base_transcripts() -> dict[str, str]:
    """The verified Whisper transcripts of the vendored bases (bases.tsv, asr_ok = 1)."""
    with open(BASES_TSV, newline="", encoding="utf-8") as f:
        return {r["id"]: r["asr"] for r in csv.DictReader(f, delimiter="\t") if r["asr_ok"] == "1"}


def clips_to_transcribe(item: Item, level: str, base_asr: dict[str, str]) -> list[tuple[tuple[str, str], np.ndarray]]:
    """(cache key, served audio) of what a transcript of the item needs: the joined item, or (--level segments)
    each DSP-processed segment (a level-only segment reads its base's transcript)."""
    if level == "signal":
        return []
    if level == "item":
        return [((item.id, pcm_sha256(item.audio)), served(item.audio))]
    out = []
    for part, base in zip(item.parts, item.bases, strict=True):
        if item.task not in LEVEL_ONLY:
            out.append(((f"part:{base}", pcm_sha256(part)), served(part)))
    return out


def transcript_of(item: Item, level: str, cache: TranscriptCache, base_asr: dict[str, str]) -> str:
    if level == "item":
        return cache.get((item.id, pcm_sha256(item.audio))) or ""
    said = []
    for part, base in zip(item.parts, item.bases, strict=True):
        if item.task in LEVEL_ONLY:
            said.append(base_asr.get(base, ""))
        else:
            said.append(cache.get((f"part:{base}", pcm_sha256(part))) or "")
    return " ".join(t if t.rstrip().endswith((".", "!", "?")) else f"{t}." for t in said)


def transcribe_missing(items: list[Item], level: str, cache: TranscriptCache, whisper: object,
                       base_asr: dict[str, str]) -> None:
    """One batched Whisper call for the clips of `items` the cache lacks; the cache saved after it."""
    from harness.models.protocol import AudioClip

    cache.refresh()
    todo = {key: audio for it in items for key, audio in clips_to_transcribe(it, level, base_asr)
            if cache.get(key) is None}
    if todo:
        texts = whisper.transcribe([AudioClip(a, SR) for a in todo.values()])  # type: ignore[attr-defined]
        for key, text in zip(todo, texts, strict=True):
            cache.put(key, text)
        cache.save()


def judge(item: Item, level: str, cache: TranscriptCache, base_asr: dict[str, str]) -> str | None:
    """The item's frozen line (id, sha256, WER) when its transcript equals its script, else None."""
    if level == "signal":  # its bases' transcripts are verified; the item itself is not transcribed
        return f"{item.id}\t{pcm_sha256(item.audio)}\t-"
    text = transcript_of(item, level, cache, base_asr)
    if whisper_accepts(item, text):
        return f"{item.id}\t{pcm_sha256(item.audio)}\t{word_error_rate(text, item.script.replace(' | ', ' ')):.3f}"
    print(f"  asr-reject {item.id}: {text!r}", file=sys.stderr, flush=True)
    return None


def write_ids(task: str, split: str, lines: list[str]) -> None:
    atomic_write_text(IDS_DIR / f"{task}-{split}.txt", "\n".join(lines) + "\n")


class _Freeze:
    """One task and split being frozen: the kept lines, the pending batch, the answers kept or pending."""

    def __init__(self, task: str, split: str, quota: int, cache: TranscriptCache, whisper: object, batch: int,
                 level: str, save: Callable[[list[str]], None] | None) -> None:
        self.task, self.split, self.quota, self.cache, self.whisper = task, split, quota, cache, whisper
        self.batch, self.level, self.save = batch, level, save
        self.base_asr = base_transcripts()
        self.kept: list[str] = []
        self.pending: list[Item] = []
        self.taken = Counter[str]()
        self.seen: set[str] = set()
        self.counts = {"tried": 0, "asr_rejected": 0}
        self.start = time.monotonic()

    def wanted(self, cand: Candidate, cap: int) -> bool:
        """Each candidate is offered once, and only while its label is under the cap."""
        if cand.id in self.seen or self.taken[cand.answer] >= cap:
            return False
        self.seen.add(cand.id)
        return True

    def settle(self) -> None:
        transcribe_missing(self.pending, self.level, self.cache, self.whisper, self.base_asr)
        for it in self.pending:
            line = judge(it, self.level, self.cache, self.base_asr) if len(self.kept) < self.quota else None
            if line:
                self.kept.append(line)
            else:
                self.taken[it.answer] -= 1
                self.counts["asr_rejected"] += 1
        self.pending.clear()
        if self.save and self.kept:
            self.save(self.kept)
        print(f"{self.task} {self.split}: kept {len(self.kept)}/{self.quota} of {self.counts['tried']} "
              f"signal-verified candidates ({self.counts['asr_rejected']} rejected by the transcript check), "
              f"{time.monotonic() - self.start:.0f} s", file=sys.stderr, flush=True)

    def run_pass(self, cap: int, first: int) -> None:
        for item in signal_verified(self.task, self.split, first, functools.partial(self.wanted, cap=cap)):
            self.counts["tried"] += 1
            self.taken[item.answer] += 1
            self.pending.append(item)
            if len(self.pending) >= max(1, min(self.batch, self.quota - len(self.kept))):
                self.settle()
            if len(self.kept) >= self.quota:
                break
        if self.pending:
            self.settle()


def freeze_task(task: str, split: str, quota: int, cache: TranscriptCache, whisper: object, batch: int,
                level: str = "item", first: int = 0, save: Callable[[list[str]], None] | None = None) -> list[str]:
    """The kept items' lines (id, sha256, WER), in the builder's order, stopping at `quota`, no answer more than
    label_cap times; when the candidates run out first, the rest from any label (printed: not balanced). `save`
    gets the lines kept so far after every batch (the main run writes them, so a stopped run leaves a valid
    prefix)."""
    run = _Freeze(task, split, quota, cache, whisper, batch, level, save)
    balanced = label_cap(task, quota)
    run.run_pass(balanced, first)
    if len(run.kept) < quota and balanced < quota:
        print(f"{task} {split}: balanced candidates ran out at {len(run.kept)} ({dict(run.taken)}); the rest from "
              "any label", file=sys.stderr, flush=True)
        run.run_pass(quota, first)
    if len(run.kept) < quota:
        raise SystemExit(f"voxparadox-{task} {split}: only {len(run.kept)} of {quota} candidates verified")
    return run.kept


def rehash_task(task: str, split: str) -> list[str]:
    """The frozen lines of a task and split with each item's sha256 recomputed by the current builder (after a
    change that keeps the selection, e.g. BUILDER_VERSION 3's C-library log2/log10/pow): the ids and WER stay,
    and every item is built and its signal measurement checked again (build_items raises on a flip)."""
    from vocalgrad_dataset.voxparadox.items import build_items

    path = IDS_DIR / f"{task}-{split}.txt"
    old = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = build_items(task, split)
    built_ids, frozen_ids = [i.id for i in items], [row[0] for row in old]
    if built_ids != frozen_ids:  # a rehash keeps the selection; a changed one needs a full freeze
        pairs = enumerate(zip(built_ids, frozen_ids, strict=False))
        first = next((k for k, (b, f) in pairs if b != f), min(len(built_ids), len(frozen_ids)))
        raise ValueError(f"voxparadox-{task} {split}: the builder's items differ from {path} from item {first} on "
                         f"({len(built_ids)} built, {len(frozen_ids)} frozen); --rehash only recomputes sha256s, "
                         "run the freeze without --rehash")
    return ["\t".join([row[0], pcm_sha256(item.audio), *row[2:]]) for row, item in zip(old, items, strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", required=True, choices=("test", "train"))
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="transcript cache TSV (resumes a run)")
    ap.add_argument("--batch", type=int, default=16, help="items per Whisper batch")
    ap.add_argument("--quota", type=int, default=None, help="items per task (default: the split's size)")
    ap.add_argument("--offset", type=int, default=0,
                    help="a helper run: transcribe from the offset-th candidate on into its own --cache and freeze "
                         "nothing (the main run reads its cache with --also-read)")
    ap.add_argument("--also-read", type=Path, nargs="*", default=[], help="more transcript caches to read")
    ap.add_argument("--level", choices=("item", "segments", "signal"), default="item",
                    help="transcribe each joined item (default), or each DSP-processed segment once (cheaper), or "
                         "nothing: the signal check on Whisper-verified bases only (WER column '-')")
    ap.add_argument("--rehash", action="store_true",
                    help="keep the frozen ids; recompute their sha256 with the current builder (no Whisper)")
    args = ap.parse_args()
    if args.rehash:
        for task in args.tasks.split(","):
            lines = rehash_task(task, args.split)
            write_ids(task, args.split, lines)
            print(f"{task} {args.split}: rehashed {len(lines)} items", file=sys.stderr, flush=True)
        return 0
    from harness.models.whisper_ct2 import WhisperTinyEn

    whisper = None if args.level == "signal" else WhisperTinyEn(batch_size=args.batch)
    cache = TranscriptCache(args.cache, tuple(args.also_read))
    for task in args.tasks.split(","):
        quota = args.quota or SPLIT_SIZES[args.split]
        if args.offset:  # a helper: fills its cache until killed or out of candidates
            try:
                freeze_task(task, args.split, 10**6, cache, whisper, args.batch, args.level, args.offset)
            except SystemExit as done:
                print(f"helper done: {done}", file=sys.stderr)
            continue
        lines = freeze_task(task, args.split, quota, cache, whisper, args.batch, args.level,
                            save=functools.partial(write_ids, task, args.split))
        write_ids(task, args.split, lines)
        print(f"{task} {args.split}: froze {len(lines)} items", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
