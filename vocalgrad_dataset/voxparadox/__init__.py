"""VoxParadox-lite: 8 of VoxParadox's 10 tasks, built offline from vendored base utterances by our own DSP.

Every item's transcript asserts a wrong label (y_adv) and its audio carries the true one (y_true), as in
VoxParadox (Pang, Chaubey & Soleymani 2026; summarised in docs/tasks.md), on the release's terms: its task
names (RELEASE_TASKS), question wordings and option texts (LABELS, QUESTIONS: from the release's published
examples), four options where the release offers four. The base utterances (data/voxparadox/bases/*.wav, 16 kHz
PCM16, sha256 in bases.tsv) are short claim sentences in plain words ("My voice is high.") said by espeak-ng
voices (a variant and a pitch), each verified by Whisper tiny.en (its transcript, in bases.tsv, equals the
sentence after normalisation; pairs it mishears are dropped); scripts/make_voxparadox_bases.py regenerates
them and is never called by a build. Voices and scripts are split: test items use held-out voices (variants
m7, m8, f5) saying held-out wordings. Items are made deterministically at build time:

- pitch, volume, speed, range (pattern tasks): three claim sentences of one voice, each asserting a level;
  our DSP gives each the level of another order (pitch ±4 semitones, volume ±10 dB, speed x0.7 / x1.45
  after equalising durations, F0 range x0.25 / x2.5 around the median; and a milder version of each),
  joined with 0.5 s gaps. The question asks the order of the true levels ("low-high-medium"); the transcript
  asserts another order. Four of the six orders are offered.
- gender: a voice claiming the other sex ("I am a woman."), joined with another of its sentences.
- intonation: a sentence, then a claim about the contour ("My voice keeps going down every time."); the whole
  recording's pitch follows one of four contours (rising, falling, rise-fall, fall-rise; up to 11 semitones).
- counting: 1-4 distinct voices in four turns; one turn claims a wrong count ("There is only one voice.", "We
  are four people."), the others say neutral sentences of their voice.
- identity: clip 1 by a voice, then four clips: that voice again saying "I never spoke before.", another voice
  saying "I spoke first.", two more voices saying a neutral sentence.

Answers are balanced: each letter holds the answer equally often and, over a task's label order, each rank
(items.plan_options); gender, intonation, counting and identity also hold each label equally often
(items.label_cap), so no answerer that ignores the audio beats chance.

Each candidate item is verified twice by scripts/freeze_voxparadox_ids.py: its label measured from the signal
(F0 median, RMS, speech duration, F0 range, F0 medians of the speech's thirds, turn F0 clustering) must be its
true label, and Whisper tiny.en's transcript of the built item must equal its script after normalisation
(whisper_accepts). The survivors' ids and PCM sha256s are the frozen lists (data/voxparadox/ids/<task>-<split>.txt);
a build makes exactly those items (no synthesiser, no Whisper) and checks their sha256s.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

DATA_DIR = Path(__file__).parents[1] / "data" / "voxparadox"
BASES_DIR = DATA_DIR / "bases"
BASES_TSV = DATA_DIR / "bases.tsv"
IDS_DIR = DATA_DIR / "ids"
SR = 16000
GAP_SEC = 0.5  # silence between joined segments
EDGE_SEC = 0.1  # silence before the first and after the last joined segment
# 3: log2/log10/pow by the C library (the same bits with or without AVX-512). 4: the release's terms (task names,
# question wordings, option texts; four options where the release has four; intonation's four contours, counting
# over 1-4 speakers, identity over four candidate clips; answers balanced over letters and labels); re-frozen.
BUILDER_VERSION = "4"
TASKS: tuple[str, ...] = ("gender", "intonation", "counting", "identity", "pitch", "volume", "speed", "range")
PATTERN_TASKS: tuple[str, ...] = ("pitch", "volume", "speed", "range")
SIGNAL_TASKS: tuple[str, ...] = TASKS  # every offline task's label is measured from the signal
# The VoxParadox release's task names (Hub IHP-Lab/VoxParadox, column task_name) of our eight tasks; the
# release's age_prediction and emotion_recognition have no offline counterpart here.
RELEASE_TASKS: dict[str, str] = {
    "gender": "gender_prediction", "intonation": "intonation_perception", "counting": "total_speaker_counting",
    "identity": "speaker_identity_recognition", "pitch": "pitch_comparison", "volume": "volume_comparison",
    "speed": "speed_comparison", "range": "vocal_range_comparison",
}
SPLIT_SIZES = {"test": 100, "train": 400}  # items per task (issue: test >= 100, train >= 400)

# ---- the release's terms: labels, questions ---------------------------------------------------------------------
# The release's wordings, from its ten published examples (voxparadox.github.io, "Try it yourself"): one question
# per task, option texts as the release writes them. An item offers four of a task's labels (gender: both).
RELEASE_LEVELS: tuple[str, str, str] = ("low", "medium", "high")  # a pattern part's level, lowest first
PATTERN_LABELS: tuple[str, ...] = tuple("-".join(p) for p in itertools.permutations(RELEASE_LEVELS))
LABELS: dict[str, tuple[str, ...]] = {
    **{t: PATTERN_LABELS for t in PATTERN_TASKS},
    "gender": ("Female", "Male"),
    "intonation": ("Rising intonation", "Falling intonation", "Rise-fall intonation", "Fall-rise intonation"),
    "counting": ("1 person", "2 people", "3 people", "4 people"),
    "identity": ("the second person", "the third person", "the fourth person", "the fifth person"),
}  # fmt: skip
QUESTIONS: dict[str, str] = {
    "pitch": "Which pitch pattern best matches the audio?",
    "volume": "Which volume pattern best matches the audio?",
    "speed": "Which speed pattern best matches the audio?",
    "range": "Which vocal range pattern best matches the audio?",
    "gender": "What is the speaker's gender?",
    "intonation": "What is the intonation of the entire sentence in the audio?",
    "counting": "How many different speakers are in the audio?",
    "identity": "Which speaker clip belongs to the same person as speaker clip 1?",
}
OPTIONS_PER_ITEM = 4
CONTOURS: tuple[str, ...] = ("rising", "falling", "rise-fall", "fall-rise")  # intonation's internal labels
# A base script's own label (what its sentence claims) as the release writes it.
_RELEASE_WORDS: dict[str, dict[str, str]] = {
    "pitch": {}, "volume": {"quiet": "low", "loud": "high"}, "speed": {"slow": "low", "fast": "high"},
    "range": {"narrow": "low", "wide": "high"}, "gender": {"male": "Male", "female": "Female"},
    "intonation": dict(zip(CONTOURS, LABELS["intonation"], strict=True)),
    "counting": {"one": "1 person", "four": "4 people"},
}  # fmt: skip


def release_label(task: str, label: str) -> str:
    """An internal label (a script's claim, a level order such as "quiet-medium-loud") as the release writes it."""
    words = _RELEASE_WORDS[task]
    if task in PATTERN_TASKS:
        return "-".join(words.get(level, level) for level in label.split("-"))
    return words[label]


@dataclass(frozen=True)
class Voice:
    """An espeak-ng voice: variant (m1..m8, f1..f5) and pitch (0-99), its sex and split."""

    variant: str
    pitch: int
    split: str

    @property
    def id(self) -> str:
        return f"{self.variant}p{self.pitch}"

    @property
    def sex(self) -> str:
        return "female" if self.variant.startswith("f") else "male"


TEST_VARIANTS = ("m7", "m8", "f5")  # held-out voices
VOICES: tuple[Voice, ...] = tuple(
    Voice(v, p, "test" if v in TEST_VARIANTS else "train")
    for v, pitches in [*((f"m{i}", (35, 50)) for i in range(1, 9)), *((f"f{i}", (60, 80)) for i in range(1, 6))]
    for p in pitches
)


@dataclass(frozen=True)
class Script:
    """A claim sentence: the task it serves, the label it asserts, its split (held-out wordings) and text."""

    task: str
    label: str
    split: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.split}-{self.task}-{self.label}"


LEVELS: dict[str, tuple[str, str, str]] = {
    "pitch": ("low", "medium", "high"), "volume": ("quiet", "medium", "loud"),
    "speed": ("slow", "medium", "fast"), "range": ("narrow", "medium", "wide"),
}  # fmt: skip
# Plain, frequent words that Whisper tiny.en hears from espeak-ng voices (candidates were tried on train and test
# voices first; a voice/script pair it still mishears at every rate is dropped by make_voxparadox_bases.py).
_TEXTS: dict[tuple[str, str], tuple[str, str]] = {  # (task, label) -> (train wording, test wording)
    ("pitch", "low"): ("My voice is low.", "This part is low."),
    ("pitch", "medium"): ("My voice is medium.", "This part is medium."),
    ("pitch", "high"): ("My voice is high.", "This part is high."),
    ("volume", "quiet"): ("I speak quietly.", "This part is quiet."),
    ("volume", "medium"): ("I speak normally.", "This part is normal."),
    ("volume", "loud"): ("I speak loudly.", "This part is loud."),
    ("speed", "slow"): ("I speak slowly.", "I am speaking slowly."),
    ("speed", "medium"): ("I speak normally.", "I am speaking normally."),
    ("speed", "fast"): ("I speak quickly.", "I am speaking quickly."),
    ("range", "narrow"): ("I sound boring.", "I speak in one tone."),
    ("range", "medium"): ("I sound calm.", "I speak with a bit of melody."),
    ("range", "wide"): ("I sound excited.", "I speak with lots of melody."),
    ("gender", "male"): ("I am a man.", "I am a male speaker."),
    ("gender", "female"): ("I am a woman.", "I am a female speaker."),
    # the end glide covers the last 0.9 s: a tail after the claim word keeps "up" / "down" audible to Whisper
    # (a glided "I go up now." lost its "now" in ~90 % of items; these wordings were tried on 9 voices first)
    ("intonation", "rising"): ("My voice keeps going up every time.", "My voice is going up all the time."),
    ("intonation", "falling"): ("My voice keeps going down every time.", "My voice is going down all the time."),
    ("counting", "one"): ("There is only one voice.", "I am alone here."),
    ("counting", "four"): ("We are four people.", "We are four people talking."),
    ("identity", "same"): ("I spoke first.", "I was the first voice."),
    ("identity", "different"): ("I never spoke before.", "I am a new speaker."),
}
SCRIPTS: tuple[Script, ...] = tuple(
    Script(task, label, split, texts[i]) for (task, label), texts in _TEXTS.items() for i, split in enumerate(("train", "test"))
)


# Whisper writes "I'm" for "I am" and "4" for "four": the comparison reads them as the words they stand for.
_SPOKEN = {"i'm": "i am", "it's": "it is", "that's": "that is", "there's": "there is", "you're": "you are",
           "we're": "we are", "i've": "i have", "1": "one", "2": "two", "3": "three", "4": "four"}


def normalize_text(text: str) -> str:
    """Lower case, letters, digits and single spaces only, contractions and small digits spelled out (the
    Whisper-vs-script comparison)."""
    words = re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ").replace("\u2019", "'")).split()
    return " ".join(_SPOKEN.get(w, w) for w in words).replace("'", "")


def word_error_rate(hypothesis: str, reference: str) -> float:
    """Word edit distance / reference words, after normalize_text (1.0 and more: nothing right)."""
    from vocalgrad_dataset.wer import words_error_rate

    return words_error_rate(normalize_text(reference).split(), normalize_text(hypothesis).split())


@dataclass(frozen=True)
class Base:
    """One vendored base utterance."""

    id: str
    voice: Voice
    script: Script
    sha256: str


@lru_cache(maxsize=1)
def bases() -> dict[str, Base]:
    """The vendored base utterances by id (bases.tsv; files checked against their sha256 when read)."""
    voices = {v.id: v for v in VOICES}
    scripts = {s.id: s for s in SCRIPTS}
    with open(BASES_TSV, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {r["id"]: Base(r["id"], voices[r["voice"]], scripts[r["script"]], r["sha256"]) for r in rows}


@cache
def base_audio(base_id: str) -> np.ndarray:
    """A base utterance as float32 at 16 kHz; a file whose bytes do not match its sha256 is an error."""
    path = BASES_DIR / f"{base_id}.wav"
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != bases()[base_id].sha256:
        raise ValueError(f"{path}: sha256 differs from bases.tsv (a changed or corrupt vendored file)")
    audio, sr = sf.read(io.BytesIO(data), dtype="float32")
    if sr != SR:
        raise ValueError(f"{path}: {sr} Hz, expected {SR}")
    return audio


def base_of(voice: Voice, task: str, label: str) -> Base:
    """The base where `voice` says the claim (task, label) in its split's wording."""
    return bases()[f"{voice.id}__{voice.split}-{task}-{label}"]


def has_base(voice: Voice, task: str, label: str) -> bool:
    """Whether the vendored bases hold `voice` saying the claim (pairs Whisper could not verify are dropped)."""
    return f"{voice.id}__{voice.split}-{task}-{label}" in bases()


def voices_of(split: str) -> list[Voice]:
    return [v for v in VOICES if v.split == split]


def rng_for(*parts: Any) -> random.Random:
    """A generator seeded from sha256 of the parts (the same items on every machine and Python)."""
    key = ":".join(map(str, parts)).encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def join(segments: Sequence[np.ndarray], gap_sec: float = GAP_SEC) -> np.ndarray:
    """Segments joined with silence between them (and a short silence at both ends)."""
    gap = np.zeros(int(round(gap_sec * SR)), np.float32)
    edge = np.zeros(int(EDGE_SEC * SR), np.float32)
    pieces: list[np.ndarray] = [edge]
    for i, s in enumerate(segments):
        pieces += [gap] if i else []
        pieces.append(np.asarray(s, np.float32))
    return np.concatenate([*pieces, edge])


@dataclass
class Item:
    """One built item before encoding: audio, question, options, labels and what made it."""

    id: str
    task: str
    audio: np.ndarray
    question: str
    options: list[str]
    answer: str
    adversarial: str
    bases: list[str]
    script: str  # what is said, segment by segment
    measured: str = ""  # the label measured from the signal
    parts: list[np.ndarray] = field(default_factory=list, repr=False)  # the joined segments (not exported)


# ---- built items ------------------------------------------------------------------------------------------
# Labels defined backwards: an order reads backwards, a rising contour falls (rise-fall and fall-rise stay), a
# speaker's sex and the number of speakers stay. Identity has none: its query is "clip 1", the first clip heard.
REVERSIBLE: tuple[str, ...] = ("gender", "counting", "intonation", *PATTERN_TASKS)
_BACKWARDS = {"Rising intonation": "Falling intonation", "Falling intonation": "Rising intonation"}


def reversed_label(task: str, label: str) -> str:
    """A label of the audio played backwards."""
    if task in PATTERN_TASKS:
        return "-".join(reversed(label.split("-")))
    return _BACKWARDS.get(label, label)


def reverse_item(item: Item) -> Item:
    """The time-reversed control: audio backwards, its labels read backwards (reversed_label)."""
    if item.task not in REVERSIBLE:
        raise ValueError(f"task {item.task!r} has no time-reversed control (its label is not defined backwards)")

    def back(label: str) -> str:
        return reversed_label(item.task, label)

    return Item(f"{item.id}-rev", item.task, item.audio[::-1].copy(), item.question, [back(o) for o in item.options],
                back(item.answer), back(item.adversarial), list(reversed(item.bases)),
                " | ".join(reversed(item.script.split(" | "))), back(item.measured) if item.measured else "")


def frozen_entries(task: str, split: str) -> list[tuple[str, str]] | None:
    """(id, sha256 of the item's PCM16 samples) of a task and split (ids/<task>-<split>.txt), or None."""
    path = IDS_DIR / f"{task}-{split}.txt"
    if not path.is_file():
        return None
    return [tuple(line.split("\t")[:2]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def frozen_ids(task: str, split: str) -> list[str] | None:
    """The frozen item ids of a task and split, or None when none are frozen."""
    entries = frozen_entries(task, split)
    return None if entries is None else [i for i, _ in entries]


def pcm_sha256(audio: np.ndarray) -> str:
    """sha256 of the PCM16 samples an item is stored as (what the frozen lists hold)."""
    from vocalgrad_dataset.dsp import to_pcm16

    return hashlib.sha256(to_pcm16(audio)[0].tobytes()).hexdigest()


# ---- what the words claim ----------------------------------------------------------------------------------
# Words of each claim sentence (both wordings) that say its label: what a transcript reader goes by.
CLAIM_WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "pitch": {"low": ("low",), "medium": ("medium",), "high": ("high",)},
    "volume": {"quiet": ("quietly", "quiet"), "medium": ("normally", "normal"), "loud": ("loudly", "loud")},
    "speed": {"slow": ("slowly",), "medium": ("normally",), "fast": ("quickly",)},
    "range": {"narrow": ("boring", "one tone", "in one"), "medium": ("calm", "bit of"),
              "wide": ("excited", "lots of")},  # Whisper hears "melody" as "Melanie", "melon", ...
    "gender": {"male": ("man", "male"), "female": ("woman", "female")},
    "intonation": {"rising": ("up",), "falling": ("down",)},
    "counting": {"one": ("only one", "alone"), "four": ("four",)},
    "identity": {"same": ("spoke first", "first voice"), "different": ("never spoke", "new speaker")},
}  # fmt: skip


def _claims_in(task: str, text: str) -> list[tuple[int, str]]:
    """(position, label) of every claim word of a task in a text (whole words, case-insensitive), in order."""
    text = re.sub(r"\b[1-4]\b", lambda m: _SPOKEN[m.group()], text)  # Whisper's "4 of us": "four of us"
    found = []
    for label, words in CLAIM_WORDS[task].items():
        for w in words:
            found += [(m.start(), label) for m in re.finditer(rf"\b{re.escape(w)}\b", text, re.IGNORECASE)]
    return sorted(found)


def claimed_label(task: str, transcript: str) -> str | None:
    """The label a transcript asserts for a task, as the release writes it (the order of the claimed levels for
    the pattern tasks, the clip saying "I was the first voice" for identity); None when the words claim nothing
    clear."""
    if task == "identity":
        sentences = [s for s in re.split(r"[.!?|]+", transcript) if s.strip()]
        hits = [i for i, s in enumerate(sentences) if any(lbl == "same" for _, lbl in _claims_in(task, s))]
        ok = len(hits) == 1 and 1 <= hits[0] <= len(LABELS["identity"])
        return LABELS["identity"][hits[0] - 1] if ok else None
    labels = [lbl for _, lbl in _claims_in(task, transcript)]
    labels = [lbl for i, lbl in enumerate(labels) if i == 0 or lbl != labels[i - 1]]  # "whispered softly": one claim
    if task in PATTERN_TASKS:
        return release_label(task, "-".join(labels)) if len(labels) == 3 and len(set(labels)) == 3 else None
    # the claim is one sentence (intonation's last): a neighbour such as "my melody swings up and down" says nothing
    claimed = [c for s in re.split(r"[.!?|]+", transcript) if (c := {lbl for _, lbl in _claims_in(task, s)})]
    return release_label(task, next(iter(claimed[-1]))) if claimed and len(claimed[-1]) == 1 else None


# ---- the transcript check of the freeze script ---------------------------------------------------------------
def whisper_accepts(item: Item, transcript: str) -> bool:
    """Whether Whisper tiny.en's transcript of a built item equals its script after normalize_text (and so
    asserts the adversarial label): the freeze script keeps only such items, on every task."""
    asserts = claimed_label(item.task, transcript) == item.adversarial
    return asserts and normalize_text(transcript) == normalize_text(item.script.replace(" | ", " "))
