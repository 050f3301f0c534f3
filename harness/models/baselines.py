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
    grid_only = True  # no answer for items with their own options (the runner refuses those configs up front)

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
    grid_only = True

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
        # lazy: the DSP stack loads only when used
        from vocalgrad_dataset.voxparadox import RELEASE_TASKS, TASKS
        from vocalgrad_dataset.voxparadox.items import measure

        task = str(prompt.meta.get("task") or prompt.meta.get("category") or "")
        name = task.removeprefix("voxparadox-").removesuffix("-reversed")
        name = {v: k for k, v in RELEASE_TASKS.items()}.get(name, name)  # the release's name of the same task
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


# How the reader hears words the way a listener reads a page: each clip is transcribed as it is, level-normalised
# (a slow automatic gain, so the quiet end of a falling-volume clip is as loud as its start) and as two
# overlapping parts of the levelled clip (a keyword Whisper drops in a long, echoing or trembling sentence is
# often heard in a shorter excerpt). The further views are transcribed only when the whole clip's words claim
# nothing (Whisper costs), and then the claim words of all views are pooled. The views change how loud and how
# long the audio is, never what the reader does with it: its answer depends only on the words recognised.
AGC_FRAME_SEC = 0.01  # frames of the level contour
AGC_SMOOTH_SEC = 0.1  # Gaussian sigma of the gain: about a syllable (the gain follows the clip's level trend)
AGC_SPEECH_DB = 40.0  # frames more than this below the loudest are pauses: they neither set nor get a level
AGC_MAX_GAIN_DB = 30.0  # the most the gain may lift (or cut) a frame relative to the clip's loudest level
AGC_PEAK = 0.5  # the levelled clip's peak
READ_PARTS: tuple[tuple[float, float], ...] = ((0.0, 0.6), (0.4, 1.0))  # overlapping parts (shares of the clip)
FUZZY_MIN_RATIO = 0.85  # a recognised word counts as a claim keyword when this similar (difflib ratio), ...
FUZZY_MIN_LENGTH = 6  # ... both at least this long and with the same first letter (short words, "roses" and
# "rises", "lower" and "slower", are too easily similar by chance)


def levelled(x: np.ndarray, sr: int) -> np.ndarray:
    """Automatic gain control: every stretch of speech brought to the level of the loudest (a smooth gain over
    10 ms frames, Gaussian-smoothed over speech frames only, lifting at most 30 dB), then peak-set to 0.5."""
    from scipy.ndimage import gaussian_filter1d

    x = np.asarray(x, dtype=np.float64)
    frame = max(1, int(round(AGC_FRAME_SEC * sr)))
    n = len(x) // frame
    if n < 3 or not np.any(x):
        return x.astype(np.float32)
    db = 10 * np.log10(np.mean(x[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-12)
    speech = db >= db.max() - AGC_SPEECH_DB
    sigma = AGC_SMOOTH_SEC / AGC_FRAME_SEC
    level = gaussian_filter1d(np.where(speech, db, 0.0), sigma, mode="nearest") / np.maximum(
        gaussian_filter1d(speech.astype(np.float64), sigma, mode="nearest"), 1e-12)
    level = np.where(np.isfinite(level) & (level > -119), level, db.max())
    gain_db = np.clip(level[speech].max() - level, 0.0, AGC_MAX_GAIN_DB)
    y = x * 10 ** (np.interp(np.arange(len(x)), (np.arange(n) + 0.5) * frame, gain_db) / 20)
    return (y * (AGC_PEAK / max(float(np.abs(y).max()), 1e-12))).astype(np.float32)


def reading_views(clip: Any) -> list[Any]:
    """The clips the reader transcribes for one query clip: as it is, levelled, and the levelled clip's
    overlapping parts (READ_PARTS)."""
    from .protocol import AudioClip

    x = np.asarray(clip.array, dtype=np.float32)
    x = x.mean(axis=0) if x.ndim > 1 else x
    sr = int(clip.sampling_rate)
    lv = levelled(x, sr)
    parts = [lv[int(a * len(lv)) : int(b * len(lv))] for a, b in READ_PARTS]
    return [AudioClip(x, sr), AudioClip(lv, sr), *(AudioClip(p, sr) for p in parts)]


def keyword_direction(word: str, keywords: dict[str, tuple[str, ...]]) -> str | None:
    """The direction one recognised word claims: an exact keyword, else the one direction whose keyword it
    resembles (difflib ratio >= 0.85, words of 6+ letters with the same first letter: "quieter" heard as
    "quitter"); None when it resembles keywords of both directions or none."""
    from difflib import SequenceMatcher

    exact = [c for c, kws in keywords.items() if word in kws]
    if exact:
        return exact[0] if len(exact) == 1 else None
    if len(word) < FUZZY_MIN_LENGTH:
        return None
    near = {c for c, kws in keywords.items() for k in kws
            if len(k) >= FUZZY_MIN_LENGTH and k[0] == word[0] and SequenceMatcher(None, word, k).ratio() >= FUZZY_MIN_RATIO}
    return near.pop() if len(near) == 1 else None


# Other standard spellings of a keyword, as Whisper writes them ("Now my voice sounds dryer").
SPELLING_VARIANTS = {"drier": "dryer"}


def positive_degree(word: str) -> str | None:
    """The plain adjective of a comparative keyword ("quieter" -> "quiet", "bigger" -> "big", "steadier" ->
    "steady"); None for a word that is not an "-er" comparative."""
    if len(word) < 5 or not word.endswith("er"):
        return None
    stem = word[:-2]
    if stem.endswith("i"):
        return stem[:-1] + "y"
    if len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
        return stem[:-1]
    return stem


def reader_keywords(category: str) -> dict[str, tuple[str, ...]]:
    """The reader's lexicon for a category: the claim keywords of templates.json plus the plain adjective of
    each comparative one (Whisper tiny.en often drops the ending of a quiet, echoing or trembling last word:
    "Each word comes out quiet" for "... quieter than the last") and its other spellings (SPELLING_VARIANTS);
    a form that would stand for both directions is left out."""
    from vocalgrad_dataset.sources.claims import claim_words

    words = claim_words(category)
    plain = {c: {b for w in kws if (b := positive_degree(w))} for c, kws in words.items()}
    plain = {c: forms | {SPELLING_VARIANTS[w] for w in words[c] if w in SPELLING_VARIANTS} for c, forms in plain.items()}
    both = plain["increase"] & plain["decrease"] | {w for kws in words.values() for w in kws}
    return {c: tuple(words[c]) + tuple(sorted(plain[c] - both)) for c in words}


def pooled_claim(transcripts: Sequence[str], category: str) -> str | None:
    """The direction the words of several transcripts of one clip claim for a category: keyword votes (the
    reader's lexicon, exact or fuzzy: keyword_direction) summed over the transcripts; a tie or none: None."""
    from vocalgrad_dataset.sources.claims import normalise_text

    keywords = reader_keywords(category)
    votes = {c: 0 for c in keywords}
    for text in transcripts:
        for word in normalise_text(text):
            said = keyword_direction(word, keywords)
            if said is not None:
                votes[said] += 1
    if votes["increase"] == votes["decrease"]:
        return None
    return "increase" if votes["increase"] > votes["decrease"] else "decrease"


class TranscriptReader(LabelBaseline):
    """Reads, never listens: transcribes the clip with Whisper tiny.en and answers what the words claim (the
    claim keywords of the prompt's category, pooled over reading_views; else an offered answer named in the
    transcript); words that claim nothing get the random baseline's seeded draw. The pure-reader pole of the
    lexical-conflict metrics: levelling and excerpts only help it hear the words, its answer depends on nothing
    else.

    Reusable: `transcribe(prompts)` (the whole clip as it is; batched, cached per clip id),
    `transcribe_views(prompts)` (every reading view) and `read(transcript, category, labels)`."""

    name = "transcript-reader"
    description = "Whisper tiny.en transcript + claim keywords: answers what the words say, never the sound"

    def __init__(self, name: str | None = None, *, seed: int = 1234, batch_size: int = 16, device: Any = "cpu",
                 whisper: Any = None) -> None:
        super().__init__(name, batch_size=batch_size)
        self.seed, self.device, self._whisper = seed, device, whisper
        self._transcripts: dict[str, str] = {}
        self._view_transcripts: dict[str, list[str]] = {}

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

    def transcribe_views(self, prompts: Sequence[Prompt]) -> list[list[str]]:
        """Transcripts of every reading view of each prompt's query clip (the whole clip's from `transcribe`;
        the other views in one batched call for the uncached clips)."""
        wholes = self.transcribe(prompts)
        todo = list(dict.fromkeys(p.clip_id for p in prompts if p.clip_id not in self._view_transcripts))
        if todo:
            by_id = {p.clip_id: query_audio(p) for p in prompts}
            extra = {c: reading_views(by_id[c])[1:] for c in todo}
            heard = iter(self.whisper.transcribe([v for c in todo for v in extra[c]]))
            whole = dict(zip([p.clip_id for p in prompts], wholes, strict=True))
            for c in todo:
                self._view_transcripts[c] = [whole[c], *(next(heard) for _ in extra[c])]
        return [self._view_transcripts[p.clip_id] for p in prompts]

    def remember(self, clip_id: str, whole: str, views: Sequence[str] | None = None) -> None:
        """Seed the transcript caches with recorded transcripts (re-reading a run without Whisper)."""
        self._transcripts[clip_id] = whole
        if views is not None:
            self._view_transcripts[clip_id] = list(views)

    def views_heard(self, clip_id: str) -> list[str] | None:
        """The reading views' transcripts of a clip, if they were needed (its whole transcript claimed nothing)."""
        return self._view_transcripts.get(clip_id)

    @staticmethod
    def has_claim_words(category: str | None) -> bool:
        """Whether a category has claim keywords (the conflict configs' categories; not VoxParadox-lite's)."""
        from vocalgrad_dataset.sources.claims import claim_words

        if not category or category.startswith("voxparadox-"):
            return False
        try:
            claim_words(category)
        except KeyError:
            return False
        return True

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

    def _claims_nothing_yet(self, prompt: Prompt, whole: str) -> bool:
        """Whether a prompt needs the further reading views: a category with claim words, whose whole-clip
        transcript claims no direction."""
        category = prompt.meta.get("category")
        return self.has_claim_words(category) and pooled_claim([whole], str(category)) is None

    def _transcribe_batch(self, prompts: list[Prompt]) -> None:
        """Fill the caches for a batch (one or two Whisper calls), so decide() only reads them."""
        wholes = self.transcribe(prompts)
        unclear = [p for p, w in zip(prompts, wholes, strict=True) if self._claims_nothing_yet(p, w)]
        if unclear:
            self.transcribe_views(unclear)

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        self._transcribe_batch(prompts)
        return super()._generate_batch(prompts, max_new_tokens)

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        self._transcribe_batch(prompts)
        return super()._score_batch(prompts, choices)

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        labels = answer_vocabulary(prompt)[1]
        category = prompt.meta.get("category")
        whole = self.transcribe([prompt])[0]
        if self._claims_nothing_yet(prompt, whole):
            claim = pooled_claim(self.transcribe_views([prompt])[0], str(category))
            if claim in labels:
                return claim, 1.0
        elif self.has_claim_words(category):
            claim = pooled_claim([whole], str(category))
            if claim in labels:
                return claim, 1.0
        claimed = self.read(whole, category, labels)
        if claimed is not None:
            return claimed, 1.0
        return seeded_draw(self.seed, prompt, labels), 0.5  # the words claim nothing: a coin, less sure
