"""The runner tests' fakes: a deterministic model, a pretend distributed world and a published-release
layout of fake rows (shared by tests/test_runner.py and the fault tests)."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np
import soundfile as sf

from harness import results as res
from harness.data import PUBLISHED_NAME
from harness.models.base import BaseAudioLM
from vocalgrad_dataset import grid

SR = 8000
CONFIGS = ["volume", "noise"]
SOURCES = [("p901_01", "p901_101", 0.05), ("p902_01", "p902_205", 0.15), ("p903_02", "p903_307", 0.10)]


class Killed(BaseException):
    """Stands in for kill -9: not an Exception, so the runner does not turn it into an error row."""


def clip_hash(clip_id: str) -> int:
    """The clip id's sha256 as an integer: what the fakes derive their answers from."""
    return int(hashlib.sha256(clip_id.encode()).hexdigest(), 16)


class FakeModel(BaseAudioLM):
    """Deterministic per clip and independent of batching; also loadable as tests.helpers.runner:FakeModel."""

    name = "fake"

    def __init__(self, error_ids: frozenset[str] = frozenset(), kill_after: int | None = None,
                 supports_choices: bool = True, batch_size: int = 8) -> None:
        super().__init__(batch_size=batch_size)
        self.error_ids, self.kill_after, self.supports_choices = error_ids, kill_after, supports_choices
        self.calls = 0
        self.answered: set[str] = set()  # clips answered at the first (128-token) attempt

    def _generate_batch(self, prompts, max_new_tokens):
        self.calls += 1
        ids = {p.clip_id for p in prompts}
        if self.kill_after is not None and max_new_tokens < 256 and len(self.answered | ids) > self.kill_after:
            raise Killed  # dies once it would answer more than kill_after clips
        if ids & set(self.error_ids):
            raise RuntimeError("boom: " + ",".join(sorted(ids & set(self.error_ids))))
        if max_new_tokens < 256:
            self.answered |= ids
        return [fake_answer(p.clip_id, max_new_tokens) for p in prompts]

    def _score_batch(self, prompts, choices):
        return np.array([[float(clip_hash(p.clip_id) % 3) - 1.0, 0.0] for p in prompts])


def fake_answer(clip_id: str, max_new_tokens: int) -> str:
    """increase / "Decrease." / unparsed at 128 tokens but "increase" at 256 / ambiguous, by clip hash."""
    k = clip_hash(clip_id) % 4
    if k == 2:
        return "I am not sure" if max_new_tokens < 256 else "increase"
    return ["increase", "Decrease.", "", "increase or decrease"][k]


class FakeDist:
    """One rank of a pretend world; barriers are no-ops because ranks run one after another."""

    def __init__(self, rank: int, world_size: int, is_main: bool) -> None:
        self.rank, self.world_size, self.is_main, self.device = rank, world_size, is_main, "cpu"

    def barrier(self) -> None:
        pass


def make_release(root: Path) -> Path:
    """A published-release layout (metadata.csv + audio/) with 3 source clips x 24 conditions x 2 configs."""
    rows = []
    (root / "audio").mkdir(parents=True)
    for config in CONFIGS:
        for item, clip, dur in SOURCES:
            n = int(dur * SR)
            for cond in grid.conditions():
                cid = grid.clip_id(item, clip, cond)
                name = f"audio/{PUBLISHED_NAME[config]}__{cid}.wav"
                pcm = (np.random.default_rng(clip_hash(cid) % 2**32).integers(-2000, 2000, n)).astype(np.int16)
                sf.write(root / name, pcm, SR, subtype="PCM_16")
                rows.append({
                    "file_name": name, "category": PUBLISHED_NAME[config], "benchmark_clip_id": cid,
                    "attribute": PUBLISHED_NAME[config].replace("_", " "), "prompt": "",
                    "label": cond.label, "direction": cond.direction, "curve": cond.curve, "tier": cond.tier,
                    "source_clip_id": clip, "speaker_id": clip[:4], "sentence_id": clip[5:],
                    "duration_sec": f"{dur:.6f}", "onset_sec": "0.010000", "offset_sec": f"{dur - 0.01:.6f}",
                    "split": "test",
                })
    with open(root / "metadata.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return root


def merged(out: Path) -> dict[str, bytes]:
    """Each config's merged samples file, as bytes."""
    return {c: res.samples_path(out, c).read_bytes() for c in CONFIGS}
