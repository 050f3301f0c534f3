"""Classification tasks (the `classify` kind): any label set, one audio per item, lettered forced choice.

An item is an audio clip and its gold label; the labels of the task (sorted, so the letters are stable) are the
options A, B, C, ... of every item. In choices mode the model's logits of the option letters decide (the
paper's MELD protocol, appendix C.13); in generate mode the answer is read as a letter or a label's text.

Metrics (`classification_summary`): accuracy, per-class precision / recall / F1 and support, macro-F1 and
support-weighted F1, each with a seeded percentile bootstrap 95 % interval over items and the bootstrap SE.
An unparsed or failed answer is a wrong prediction (a miss of its true class, no class's false positive);
a class never predicted has precision 0 (scikit-learn's zero_division=0).

Sources: `--kind classify --dataset PATH_OR_REPO --columns audio=COL,label=COL[,id=COL,task=COL]` (any
Parquet / JSON Lines / CSV file, folder or Hub id, through harness.mcq_source's machinery), or a folder in the
official MELD layout without --columns (harness.meld).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.mcq_source import MappedMCQSource

CLASSIFY_REQUIRED = ("audio", "label")
CLASSIFY_OPTIONAL = ("id", "task")
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 20260
MAX_LABELS = 12  # the letters A-L


def classify_question(task: str) -> str:
    """The fixed question of a classification item (MELD: the emotion of the speaker)."""
    if "meld" in task.lower() or "emotion" in task.lower():
        return "Which emotion does the speaker express in this audio clip?"
    return "Which label best describes this audio clip?"


def declared_labels(task: str) -> list[str] | None:
    """The label set a task's protocol fixes (MELD: its seven emotions, whichever a file holds), else None
    (the labels found in the data)."""
    from harness.meld import MELD_EMOTIONS, MELD_TASK

    return sorted(MELD_EMOTIONS) if task == MELD_TASK else None


def label_text(value: Any, task: str, where: str) -> str:
    """A label cell as its lower-cased text; a null, NaN or empty cell, or a label outside the task's declared
    set (a typo such as "angry" for "anger"), is a one-line error naming the row."""
    import difflib

    if value is None or (isinstance(value, float) and math.isnan(value)) or not str(value).strip():
        raise ValueError(f"{where}: empty label ({value!r})")
    label = str(value).strip().lower()
    declared = declared_labels(task)
    if declared is not None and label not in declared:
        close = difflib.get_close_matches(label, declared, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"{where}: label {value!r} is not one of the labels of task {task!r}{hint} "
                         f"({', '.join(declared)})")
    return label


class MappedClassifySource(MappedMCQSource):
    """Classification items of a dataset whose audio and label columns are named by `--columns`; the
    MCQ source's reading (files, folders, Hub, audio decoding, id checks) with the task's labels as options."""

    def __init__(self, dataset: str, split: str, columns: str | Mapping[str, str] | None, *, kind: Any,
                 **options: Any) -> None:
        from pathlib import Path

        from harness.meld import is_meld_layout, meld_items

        if columns is None:
            if not is_meld_layout(Path(dataset)):
                raise ValueError(f"{dataset}: --kind {kind.name} needs --columns audio=COL,label=COL "
                                 "(or a folder in the MELD layout: *_sent_emo.csv and the extracted audio)")
            self._preloaded: list[tuple[str, int, dict[str, Any]]] | None = meld_items(Path(dataset), split)
            columns = {"audio": "audio", "label": "Emotion", "id": "id", "task": "task"}
        else:
            self._preloaded = None
        super().__init__(dataset, split, columns, kind=kind, **options)  # options: hub_config, where

    def _raw_rows(self, dataset: str) -> list[tuple[str, int, dict[str, Any]]]:
        """(where, index, row) of every row: the MELD layout's preloaded items, local files or a Hub copy."""
        if self._preloaded is not None:
            return self._preloaded
        return super()._raw_rows(dataset)

    def _prepare(self, raw: list[tuple[str, int, dict[str, Any]]]) -> None:
        """Every task's label set, before one item is made: every item offers all of its task's labels."""
        for where, _i, row in raw:  # the label set first: every item offers all of its task's labels
            if self.mapping["label"] not in row:
                raise ValueError(f"{where}: --columns label={self.mapping['label']}: no column "
                                 f"{self.mapping['label']!r} (columns: {', '.join(map(str, row))})")
        labels: dict[str, set[str]] = {}
        for where, i, row in raw:
            task = str(row.get(self.mapping.get("task", ""), None) or self.kind.name)
            labels.setdefault(task, set()).add(label_text(row[self.mapping["label"]], task, f"{where}: row {i}"))
        self._task_labels = {t: declared_labels(t) or sorted(v) for t, v in labels.items()}
        for task, ls in self._task_labels.items():
            if not 2 <= len(ls) <= MAX_LABELS:
                raise ValueError(f"{self.root}: task {task!r} has {len(ls)} labels {ls}; a classification task "
                                 f"has 2 to {MAX_LABELS}")

    def _item(self, where: str, index: int, row: Mapping[str, Any]) -> dict[str, Any]:
        place, get, task, ident = self._fields(where, index, row)
        label = label_text(get["label"], task, place)
        options = self._task_labels[task]
        duration = row.get("duration_sec")
        return {"audio": get["audio"], "benchmark_clip_id": ident, "category": task, "kind": self.kind.name,
                "question": classify_question(task), "options": options, "answer": label, "adversarial": None,
                "task": task, "label": label, "source_clip_id": ident,
                "duration_sec": float(duration) if duration not in (None, "") else float("nan"),
                "_where": f"{place} ({ident})"}


    def _sound_file(self, file: Any) -> bool:
        """A video file's audio is read through FFmpeg, not probed by soundfile."""
        from harness.meld import VIDEO_SUFFIXES

        return file.suffix.lower() not in VIDEO_SUFFIXES

    def _decode_file(self, file: Any, where: str) -> Any:
        """A video file's audio through FFmpeg (harness.meld.video_audio); anything else as the MCQ source reads it."""
        from harness.meld import video_audio

        return super()._decode_file(file, where) if self._sound_file(file) else video_audio(file, where)


# ---- metrics -------------------------------------------------------------------------------------------
def confusion(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]) -> np.ndarray:
    """K x (K+1) counts: rows gold label, columns predicted label, the last column unparsed / failed / other."""
    index = {lab: i for i, lab in enumerate(labels)}
    k = len(labels)
    g = np.array([index[x] for x in gold], dtype=np.int64)
    p = np.array([index.get(x, k) if x is not None else k for x in pred], dtype=np.int64)
    return np.bincount(g * (k + 1) + p, minlength=k * (k + 1)).reshape(k, k + 1)


def scores_from_confusion(cm: np.ndarray) -> dict[str, np.ndarray | float]:
    """Per-class precision, recall, F1, support, and accuracy / macro-F1 / weighted F1 of confusion counts
    (the last axis K+1 columns; leading axes are bootstrap replicates). 0 where a ratio is undefined."""
    k = cm.shape[-2]
    tp = np.diagonal(cm[..., :k], axis1=-2, axis2=-1).astype(float)
    support = cm.sum(axis=-1).astype(float)
    predicted = cm[..., :k].sum(axis=-2).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(support > 0, tp / support, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        n = support.sum(axis=-1)
        accuracy = tp.sum(axis=-1) / n
        weighted = (f1 * support).sum(axis=-1) / n
    return {"precision": precision, "recall": recall, "f1": f1, "support": support, "accuracy": accuracy,
            "macro_f1": f1.mean(axis=-1), "weighted_f1": weighted}


def bootstrap_confusions(gold_idx: np.ndarray, pred_idx: np.ndarray, k: int, samples: int, seed: int) -> np.ndarray:
    """Confusion counts of `samples` item resamples (with replacement), shape (samples, K, K+1)."""
    rng = np.random.default_rng(seed)
    n = len(gold_idx)
    draws = rng.integers(0, n, size=(samples, n))
    cells = gold_idx[draws] * (k + 1) + pred_idx[draws]
    offsets = np.arange(samples)[:, None] * k * (k + 1)
    flat = np.bincount((cells + offsets).ravel(), minlength=samples * k * (k + 1))
    return flat.reshape(samples, k, k + 1)


def classification_metrics(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str], *,
                           samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The classification metrics (module docstring) with `<m>_stderr`, `<m>_ci_low`, `<m>_ci_high` from a
    seeded bootstrap; per class `precision_<label>`, `recall_<label>`, `f1_<label>`, `support_<label>`."""
    labels = list(labels)
    k = len(labels)
    cm = confusion(gold, pred, labels)
    point = scores_from_confusion(cm)
    out: dict[str, Any] = {"labels": labels, "confusion": cm.tolist(), "n": int(cm.sum())}
    names = ["accuracy", "macro_f1", "weighted_f1"]
    values: dict[str, Any] = {m: float(point[m]) for m in names}
    for i, lab in enumerate(labels):
        for m in ("precision", "recall", "f1"):
            values[f"{m}_{lab}"] = float(point[m][i])
        out[f"support_{lab}"] = int(point["support"][i])
    if len(gold) and samples > 0:
        index = {lab: i for i, lab in enumerate(labels)}
        g = np.array([index[x] for x in gold], dtype=np.int64)
        p = np.array([index.get(x, k) if x is not None else k for x in pred], dtype=np.int64)
        boot = scores_from_confusion(bootstrap_confusions(g, p, k, samples, seed))
        reps: dict[str, np.ndarray] = {m: np.asarray(boot[m]) for m in names}
        for i, lab in enumerate(labels):
            for m in ("precision", "recall", "f1"):
                reps[f"{m}_{lab}"] = np.asarray(boot[m])[:, i]
    else:
        reps = {}
    for name, value in values.items():
        r = reps.get(name)
        out[name] = value
        out[f"{name}_stderr"] = float(np.std(r, ddof=1)) if r is not None else float("nan")
        out[f"{name}_ci_low"] = float(np.percentile(r, 2.5)) if r is not None else float("nan")
        out[f"{name}_ci_high"] = float(np.percentile(r, 97.5)) if r is not None else float("nan")
    return {**out, **_accuracy_wilson(cm)}


def _accuracy_wilson(cm: np.ndarray) -> dict[str, float]:
    """Accuracy's interval is Wilson's, as for every other accuracy we print: a percentile bootstrap of 0/8
    (or 8/8) collapses to [0, 0]."""
    from harness.metrics import binomial_interval, binomial_stderr

    k, n = int(np.trace(cm[:, : cm.shape[0]])), int(cm.sum())
    lo, hi = binomial_interval(k, n)
    return {"accuracy_ci_low": lo, "accuracy_ci_high": hi, "accuracy_stderr": binomial_stderr(k, n)}


def _row_pred(row: Mapping[str, Any]) -> str | None:
    return None if row.get("error") else row.get("pred")


def classification_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """summarize() plus the classification metrics of one task's samples rows; `per_class_metrics` names the
    per-label keys results.json writes as lm-eval "<metric>,none" entries."""
    from harness.metrics import finite_or_none, summarize

    labels = list(rows[0]["options"]) if rows else []
    cls = classification_metrics([str(r["gold"]) for r in rows], [_row_pred(r) for r in rows], labels)
    per_class = [f"{m}_{lab}" for lab in labels for m in ("precision", "recall", "f1")]
    out = {**summarize(rows), **cls, "acc": cls["accuracy"], "acc_stderr": cls["accuracy_stderr"],
           "per_class_metrics": ["macro_f1", "weighted_f1", *per_class]}
    return finite_or_none(out)


def classification_macro(rows_by_config: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Unweighted mean over classification tasks of accuracy and macro-F1 (SE sqrt(Σ se²)/k), the group entry."""
    from harness.metrics import finite_or_none, independent_mean, single_task_interval

    summaries = [classification_summary(rows) for rows in rows_by_config.values()]
    out: dict[str, Any] = {"n_configs": len(summaries), "configs": list(rows_by_config), "complete": True}
    for name in ("accuracy", "macro_f1", "weighted_f1"):  # ±1.96 SE, as this group's entries were first written
        out.update(independent_mean(summaries, name, z=1.96, missing_se=0.0))
    out.update(single_task_interval(summaries, ("accuracy", "macro_f1", "weighted_f1")))
    return finite_or_none(out)


CLASSIFY_LM_EVAL: dict[str, bool | None] = {"macro_f1": True, "weighted_f1": True}
