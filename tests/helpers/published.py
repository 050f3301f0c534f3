"""Fixtures in the published benchmarks' exact layouts (column names and types, split and file names), made from
our own speech: VoxParadox-lite items (vendored espeak-ng bases, our DSP) and the vendored demo clips.

NOT THE REAL DATA: every question, option and label here is ours; only the layouts follow the published cards
(VoxParadox release: IHP-Lab/VoxParadox; MMSU: ddwang2000/MMSU; MMAU: lmms-lab/mmau test_mini; MMAR:
MMAR-meta.json). Each fixture also writes NOT_THE_REAL_DATA.txt beside its files.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf

from tests.helpers.sources import demo_speech
from vocalgrad_dataset.voxparadox import RELEASE_TASKS
from vocalgrad_dataset.voxparadox.items import build_items

NOTICE = "Test fixture in a published benchmark's layout, made from VocalGrad's own speech: NOT the real data.\n"
# The release's two tasks without an offline counterpart: demo speech with our own placeholder options.
PLACEHOLDER_TASKS: dict[str, tuple[str, ...]] = {
    "age_prediction": ("child", "young adult", "middle-aged adult", "senior"),
    "emotion_recognition": ("happy", "sad"),
}


def wav_bytes(audio: np.ndarray, sr: int = 16000) -> bytes:
    """PCM16 WAV bytes of a float or int16 mono clip."""
    buf = io.BytesIO()
    sf.write(buf, audio, sr, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def _choices(options: list[str]) -> dict[str, str]:
    """choice_a..choice_d, the unused ones empty (two-option tasks)."""
    return {f"choice_{c}": options[i] if i < len(options) else "" for i, c in enumerate("abcd")}


def lite_rows(per_task: int, tasks: tuple[str, ...] = tuple(RELEASE_TASKS)) -> Iterator[dict[str, Any]]:
    """VoxParadox-lite test items as release rows (release task names, option text answers)."""
    for task in tasks:
        for item in build_items(task, "test", per_task):
            yield {"audio": {"bytes": wav_bytes(item.audio), "path": f"{item.id}.wav"}, "question": item.question,
                   **_choices(list(item.options)), "answer_gt": item.answer, "adversarial_labels": item.adversarial,
                   "task_name": RELEASE_TASKS[task], "id": item.id}


def placeholder_rows(per_task: int) -> Iterator[dict[str, Any]]:
    """The age and emotion tasks from the demo clips, labels ours (answer and adversarial: two options)."""
    clips = demo_speech()
    for task, options in PLACEHOLDER_TASKS.items():
        for i in range(per_task):
            opts = list(options)
            yield {"audio": {"bytes": wav_bytes(clips[i % len(clips)], 48000), "path": f"{task}-{i}.wav"},
                   "question": f"Placeholder question of {task}?", **_choices(opts),
                   "answer_gt": opts[i % len(opts)], "adversarial_labels": opts[(i + 1) % len(opts)],
                   "task_name": task, "id": f"{task}-{i:03d}"}


def write_parquet(rows: list[dict[str, Any]], file: Path) -> Path:
    """Rows as one Parquet file, the NOT_THE_REAL_DATA notice beside the dataset root."""
    file.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), file)
    return file


def voxparadox_release(root: Path, rows: list[dict[str, Any]]) -> Path:
    """A release-shaped Hub folder: data/test-00000-of-00001.parquet (the card's columns, in its order)."""
    write_parquet(rows, root / "data" / "test-00000-of-00001.parquet")
    (root / "NOT_THE_REAL_DATA.txt").write_text(NOTICE, encoding="utf-8")
    return root


def mmsu_rows(per_task: int) -> list[dict[str, Any]]:
    """MMSU-layout rows: lite gender and pitch items as paralinguistic tasks, placeholder semantics rows."""
    rows = []
    for r in lite_rows(per_task, ("gender", "pitch")):
        sub = "speaker_traits" if r["task_name"] == "gender_prediction" else "prosody"
        rows.append({"id": r["id"], "audio": r["audio"], "question": r["question"],
                     **{k: r[k] for k in ("choice_a", "choice_b", "choice_c", "choice_d", "answer_gt", "task_name")},
                     "category": "perception", "sub-category": "paralinguistics", "sub-sub-category": sub,
                     "linguistics_sub_discipline": "paralinguistics"})
    clips = demo_speech()
    for i in range(per_task):
        opts = ["yes", "no", "maybe", "never"]
        rows.append({"id": f"sem-{i:03d}", "audio": {"bytes": wav_bytes(clips[i % len(clips)], 48000),
                                                      "path": f"sem-{i}.wav"},
                     "question": "Placeholder semantics question?", **_choices(opts), "answer_gt": opts[i % 4],
                     "task_name": "placeholder_semantics", "category": "reasoning", "sub-category": "semantics",
                     "sub-sub-category": "meaning", "linguistics_sub_discipline": "semantics"})
    return rows


def mmau_rows(per_task: int) -> list[dict[str, Any]]:
    """MMAU test_mini-layout rows: `choices` a JSON string, `answer` the option text; lite items as speech."""
    rows = []
    for r in lite_rows(per_task, ("gender", "counting")):
        opts = [r[f"choice_{c}"] for c in "abcd" if r[f"choice_{c}"]]
        rows.append({"id": r["id"], "audio": r["audio"], "question": r["question"], "choices": json.dumps(opts),
                     "answer": r["answer_gt"], "dataset": "vocalgrad-fixture", "task": "speech", "split": "test-mini",
                     "category": "Speaker Identification", "sub-category": r["task_name"],
                     "difficulty": "easy" if r["task_name"] == "gender_prediction" else "medium"})
    return rows


def mmar_folder(root: Path, per_task: int, *, unmatched: int = 1) -> Path:
    """An MMAR-layout folder: MMAR-meta.json (a JSON array, relative audio_path, a choices list, the answer as
    text) and its wav files; the first `unmatched` items' answers match no choice (as 4 of MMAR's do)."""
    (root / "audio").mkdir(parents=True, exist_ok=True)
    meta = []
    for i, r in enumerate(lite_rows(per_task, ("pitch", "gender"))):
        (root / "audio" / f"{r['id']}.wav").write_bytes(r["audio"]["bytes"])
        opts = [r[f"choice_{c}"] for c in "abcd" if r[f"choice_{c}"]]
        answer = f"{r['answer_gt']} (roughly)" if i < unmatched else r["answer_gt"]
        meta.append({"id": r["id"], "audio_path": f"./audio/{r['id']}.wav", "question": r["question"],
                     "choices": opts, "answer": answer, "modality": "speech", "category": "Perception",
                     "sub-category": r["task_name"], "language": "en", "source": "vocalgrad-fixture", "url": "",
                     "timestamp": ""})
    (root / "MMAR-meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    (root / "NOT_THE_REAL_DATA.txt").write_text(NOTICE, encoding="utf-8")
    return root


def mmsu_audiofolder(root: Path, per_task: int) -> Path:
    """MMSU as the Hub's audio-folder layout: train/metadata.jsonl (file_name relative to it) beside the clips."""
    folder = root / "train"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for r in mmsu_rows(per_task):
        name = f"{r['id']}.wav"
        (folder / name).write_bytes(r["audio"]["bytes"])
        lines.append(json.dumps({"file_name": name, **{k: v for k, v in r.items() if k != "audio"}}))
    (folder / "metadata.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "NOT_THE_REAL_DATA.txt").write_text(NOTICE, encoding="utf-8")
    return root
