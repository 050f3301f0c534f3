"""Baselines: always-increase, seeded random, the signal oracle (reads the DSP ground truth; the pure listener)
and the transcript reader (Whisper tiny.en's transcript plus claim keywords; the pure reader)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..parsing import DECREASE, INCREASE, SYNONYM
from .base import BaseAudioLM, ModelError, query_audio
from .protocol import Prompt


def answer_vocabulary(prompt: Prompt) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(words, labels) the prompt offers (prompt.meta from build_prompt); increase/decrease when it says none."""
    words = tuple(prompt.meta.get("answer_words") or (INCREASE, DECREASE))
    labels = tuple(prompt.meta.get("answer_labels") or words)
    return words, labels


def _choice_label(choice: str, words: tuple[str, ...], labels: tuple[str, ...]) -> str | None:
    """The label a scored choice stands for: by the prompt's words, else by answer family (rise -> increase)."""
    if choice in words:
        return labels[words.index(choice)]
    fams = SYNONYM.families(choice)
    if fams == {INCREASE}:
        return INCREASE
    if fams == {DECREASE}:
        return DECREASE
    return choice.strip().lower() if choice.strip().lower() in labels else None


class LabelBaseline(BaseAudioLM):
    """A baseline that decides a label (one the prompt offers) and a margin >= 0 per prompt; generate says its
    word, choices mode scores +margin for it and -margin for every other answer."""

    kind = "baseline"

    def __init__(self, name: str | None = None, *, batch_size: int = 256) -> None:
        super().__init__(name, batch_size=batch_size)

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        """(one of the prompt's answer labels, margin >= 0) for one prompt."""
        raise NotImplementedError

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        out = []
        for p in prompts:
            words, labels = answer_vocabulary(p)
            out.append(words[labels.index(self.decide(p)[0])])
        return out

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        rows = []
        for p in prompts:
            words, labels = answer_vocabulary(p)
            label, margin = self.decide(p)
            chosen = [_choice_label(c, words, labels) for c in choices]
            rows.append([0.0 if c is None else margin if c == label else -margin for c in chosen])
        return np.array(rows)


class AlwaysIncrease(LabelBaseline):
    """Always claims the rise: "increase" (direction and ternary configs), "yes" on yes/no change detection."""

    name = "always-increase"
    description = "answers 'increase' ('yes' on yes/no configs) to everything"  # harness list-models

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        labels = answer_vocabulary(prompt)[1]
        return ("yes" if "yes" in labels else INCREASE), 1.0


def seeded_draw(seed: int | None, prompt: Prompt, labels: Sequence[str]) -> str:
    """A uniform draw over `labels`, seeded from sha256(f"{seed}:{category}:{clip_id}") (reruns and shards agree)."""
    key = f"{seed}:{prompt.meta.get('category', '')}:{prompt.clip_id}"
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    return labels[min(len(labels) - 1, int(rng.random() * len(labels)))]


class RandomBaseline(LabelBaseline):
    """A uniform draw over the offered answers per clip, seeded from sha256(f"{seed}:{category}:{clip_id}")
    so reruns and shards agree and categories sharing a source clip draw independently."""

    name = "random"
    description = "uniform over the offered answers, seeded by sha256(seed:category:clip_id)"  # harness list-models

    def __init__(self, name: str | None = None, *, seed: int = 1234, batch_size: int = 256) -> None:
        super().__init__(name, batch_size=batch_size)
        self.seed = seed

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        return seeded_draw(self.seed, prompt, answer_vocabulary(prompt)[1]), 1.0


class SignalOracle(LabelBaseline):
    """Reads the manipulated parameter's trajectory from the signal (vocalgrad_dataset.oracle)."""

    name = "signal-oracle"
    description = "reads the manipulated trajectory from the signal (upper bound)"  # harness list-models

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        from vocalgrad_dataset.oracle import predict  # lazy: the DSP stack loads only when used

        meta = prompt.meta
        missing = [k for k in ("category", "onset_sec", "offset_sec") if meta.get(k) is None]
        if missing:
            raise ModelError(f"signal-oracle needs prompt.meta {missing}", prompt.clip_id)
        clip = query_audio(prompt)
        sr = clip.sampling_rate
        audio = np.asarray(clip.array, dtype=np.float32)
        onset = min(len(audio), round(float(meta["onset_sec"]) * sr))
        offset = min(len(audio), round(float(meta["offset_sec"]) * sr))
        label, score = predict(str(meta["category"]), audio, sr, onset, offset)
        if label not in (INCREASE, DECREASE):
            raise ModelError(f"oracle returned label {label!r}", prompt.clip_id)
        # It measures a direction, never its absence: on yes/no configs a direction means "yes".
        return ("yes" if "yes" in answer_vocabulary(prompt)[1] else label), abs(float(score))


class MCQSignalOracle(LabelBaseline):
    """VoxParadox-lite's labels measured from the signal (F0, RMS, duration, F0 range, final slope, turn F0
    clusters): the signal-measuring upper bound of the offline MCQ tasks."""

    name = "mcq-signal-oracle"
    description = "measures a VoxParadox-lite task's label from the signal (upper bound)"  # harness list-models

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        from vocalgrad_dataset.voxparadox import TASKS  # lazy: the DSP stack loads only when used
        from vocalgrad_dataset.voxparadox_items import measure

        task = str(prompt.meta.get("task") or prompt.meta.get("category") or "")
        name = task.removeprefix("voxparadox-").removesuffix("-reversed")
        if name not in TASKS:
            raise ModelError(f"mcq-signal-oracle knows the VoxParadox-lite tasks ({', '.join(TASKS)}), not {task!r}",
                             prompt.clip_id)
        clip = query_audio(prompt)
        label = measure(name, np.asarray(clip.array, dtype=np.float32))
        labels = answer_vocabulary(prompt)[1]
        if label not in labels:
            raise ModelError(f"mcq-signal-oracle measured {label!r}, not one of the options {labels}", prompt.clip_id)
        return label, 1.0
def option_in_text(text: str, options: Sequence[str]) -> int | None:
    """Index of the one option whose words all occur in `text` (normalised words, in any order; the longest
    such option wins, so "high-low-medium" beats "high"); None when no option, or several equally long, occur."""
    from vocalgrad_dataset.sources.claims import normalise_text

    words = set(normalise_text(text))
    found = [(len(w), i) for i, o in enumerate(options) if (w := normalise_text(o)) and set(w) <= words]
    if not found:
        return None
    best = max(found)
    return best[1] if [f for f in found if f[0] == best[0]] == [best] else None


class TranscriptReader(LabelBaseline):
    """Reads, never listens: transcribes the clip with Whisper tiny.en and answers what the words claim (the
    claim keywords of the prompt's category, else an offered answer named in the transcript); a transcript that
    claims nothing gets the random baseline's seeded draw. The pure-reader pole of the lexical-conflict metrics.

    Reusable: `transcribe(prompts)` (batched, cached per clip id) and `read(transcript, category, labels)`."""

    name = "transcript-reader"
    description = "Whisper tiny.en transcript + claim keywords: answers what the words say, never the sound"

    def __init__(self, name: str | None = None, *, seed: int = 1234, batch_size: int = 16, device: Any = "cpu",
                 whisper: Any = None) -> None:
        super().__init__(name, batch_size=batch_size)
        self.seed, self.device, self._whisper = seed, device, whisper
        self._transcripts: dict[str, str] = {}

    @property
    def whisper(self) -> Any:
        """The shipped Whisper tiny.en (loaded on first use)."""
        if self._whisper is None:
            from .whisper_ct2 import WhisperTinyEn

            self._whisper = WhisperTinyEn(device=self.device, batch_size=self.batch_size)
        return self._whisper

    def provenance(self) -> dict[str, Any]:
        """The transcriber's identity (the wheel's model.bin digest)."""
        return {"kind": self.kind, "transcriber": self.whisper.provenance()}

    def transcribe(self, prompts: Sequence[Prompt]) -> list[str]:
        """Whisper tiny.en transcripts of each prompt's query clip (one batched call for the uncached ones)."""
        todo = list(dict.fromkeys(p.clip_id for p in prompts if p.clip_id not in self._transcripts))
        if todo:
            by_id = {p.clip_id: query_audio(p) for p in prompts}
            for cid, text in zip(todo, self.whisper.transcribe([by_id[c] for c in todo]), strict=True):
                self._transcripts[cid] = text
        return [self._transcripts[p.clip_id] for p in prompts]

    @staticmethod
    def read(transcript: str, category: str | None, labels: Sequence[str]) -> str | None:
        """The offered answer the words claim: the category's claim keywords (increase / decrease), else the
        one offered answer the transcript names; None when the words claim nothing."""
        from vocalgrad_dataset.sources.claims import claim_of_text

        if category and category.startswith("voxparadox-"):  # VoxParadox-lite: its own claim sentences
            from vocalgrad_dataset.voxparadox import claimed_label

            said = claimed_label(category.removeprefix("voxparadox-").removesuffix("-reversed"), transcript)
            if said in labels:
                return said
        try:
            claim = claim_of_text(transcript, category) if category else None
        except KeyError:  # a category without claim keywords (a plugin's): only the answers themselves
            claim = None
        if claim in labels:
            return claim
        i = option_in_text(transcript, labels)
        return None if i is None else labels[i]

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        self.transcribe(prompts)  # one Whisper batch, then decide() reads the cache
        return super()._generate_batch(prompts, max_new_tokens)

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        self.transcribe(prompts)
        return super()._score_batch(prompts, choices)

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        labels = answer_vocabulary(prompt)[1]
        claimed = self.read(self.transcribe([prompt])[0], prompt.meta.get("category"), labels)
        if claimed is not None:
            return claimed, 1.0
        return seeded_draw(self.seed, prompt, labels), 0.5  # the words claim nothing: a coin, less sure
