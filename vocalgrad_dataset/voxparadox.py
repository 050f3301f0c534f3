"""VoxParadox-lite: 8 of VoxParadox's 10 tasks, built offline from vendored base utterances by our own DSP.

Every item's transcript asserts a wrong label (y_adv) and its audio carries the true one (y_true), as in
VoxParadox (../shared/reference/VOXPARADOX.md). The base utterances (data/voxparadox/bases/*.wav, 16 kHz
PCM16, sha256 in bases.tsv) are short claim sentences ("I am speaking at a high pitch.") said by espeak-ng
voices (a variant and a pitch); scripts/make_voxparadox_bases.py regenerates them and is never called by a
build. Voices and scripts are split: test items use held-out voices (variants m7, m8, f5) saying held-out
wordings. Items are made deterministically at build time:

- pitch, volume, speed, range (pattern tasks): three claim sentences of one voice, each asserting a level;
  our DSP gives each the level of another order (pitch ±4 semitones, volume ±10 dB, speed x0.7 / x1.45
  after equalising durations, F0 range x0.25 / x2.5 around the median), joined with 0.5 s gaps. The
  question asks the order of the true levels; the transcript asserts another order.
- gender: a voice claiming the other sex, joined with another of its sentences.
- intonation: a sentence, then a claim about the ending ("my voice goes down at the end") whose last
  0.9 s glides the other way (up 10-12 or down 6-8 semitones).
- counting: 2-3 distinct voices in 3-4 turns, every turn claiming one count ("I am the only speaker here").
- identity: segment 1 by a voice, then 2-3 segments of which one is that voice again; the same voice says
  "I have not spoken before", another says "I am the first speaker again".

Each built item is verified by measuring its label from the signal (F0 median, RMS, speech duration,
F0 range, final F0 slope, turn F0 clustering); an item whose measurement disagrees is skipped, and the
surviving ids are the frozen lists (data/voxparadox/ids/). The bases' Whisper tiny.en transcripts are in
bases.tsv.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

DATA_DIR = Path(__file__).parent / "data" / "voxparadox"
BASES_DIR = DATA_DIR / "bases"
BASES_TSV = DATA_DIR / "bases.tsv"
IDS_DIR = DATA_DIR / "ids"
SR = 16000
GAP_SEC = 0.5  # silence between joined segments
BUILDER_VERSION = "1"
TASKS: tuple[str, ...] = ("gender", "intonation", "counting", "identity", "pitch", "volume", "speed", "range")
PATTERN_TASKS: tuple[str, ...] = ("pitch", "volume", "speed", "range")
SIGNAL_TASKS: tuple[str, ...] = TASKS  # every offline task's label is measured from the signal
SPLIT_SIZES = {"test": 100, "train": 400}  # items per task (issue: test >= 100, train >= 400)


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
_TEXTS: dict[tuple[str, str], tuple[str, str]] = {  # (task, label) -> (train wording, test wording)
    ("pitch", "low"): ("I am speaking at a low pitch.", "My voice sounds very deep right now."),
    ("pitch", "medium"): ("I am speaking at a medium pitch.", "My voice sounds quite average right now."),
    ("pitch", "high"): ("I am speaking at a high pitch.", "My voice sounds very shrill right now."),
    ("volume", "quiet"): ("I am speaking very quietly.", "This part is whispered softly."),
    ("volume", "medium"): ("I am speaking at a normal volume.", "This part is at a moderate level."),
    ("volume", "loud"): ("I am speaking very loudly.", "This part is shouted at full power."),
    ("speed", "slow"): ("I am speaking very slowly.", "These words come out at a crawl."),
    ("speed", "medium"): ("I am speaking at a normal pace.", "These words come out at an even tempo."),
    ("speed", "fast"): ("I am speaking very fast.", "These words come out in a rush."),
    ("range", "narrow"): ("My voice is flat and monotone.", "My melody barely moves at all."),
    ("range", "medium"): ("My voice has a normal melody.", "My melody moves a moderate amount."),
    ("range", "wide"): ("My voice is very expressive.", "My melody swings up and down a lot."),
    ("gender", "male"): ("I am a man and this is my voice.", "You are listening to a gentleman."),
    ("gender", "female"): ("I am a woman and this is my voice.", "You are listening to a lady."),
    ("intonation", "rising"): ("My voice goes up at the end.", "Listen to my tone climbing as I finish."),
    ("intonation", "falling"): ("My voice goes down at the end.", "Listen to my tone dropping as I finish."),
    ("counting", "one"): ("I am the only speaker here.", "Nobody else talks in this recording."),
    ("counting", "four"): ("Four of us are talking here.", "This recording has four people in it."),
    ("identity", "same"): ("I am the first speaker again.", "You heard me at the very start."),
    ("identity", "different"): ("I have not spoken before.", "This is my first time talking here."),
}
SCRIPTS: tuple[Script, ...] = tuple(
    Script(task, label, split, texts[i]) for (task, label), texts in _TEXTS.items() for i, split in enumerate(("train", "test"))
)


def normalize_text(text: str) -> str:
    """Lower case, letters, digits and single spaces only (the Whisper-vs-script comparison)."""
    return " ".join(re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split())


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


def voices_of(split: str) -> list[Voice]:
    return [v for v in VOICES if v.split == split]


def rng_for(*parts: Any) -> random.Random:
    """A generator seeded from sha256 of the parts (the same items on every machine and Python)."""
    key = ":".join(map(str, parts)).encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def join(segments: Sequence[np.ndarray], gap_sec: float = GAP_SEC) -> np.ndarray:
    """Segments joined with silence between them (and a short silence at both ends)."""
    gap = np.zeros(int(round(gap_sec * SR)), np.float32)
    edge = np.zeros(int(0.1 * SR), np.float32)
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


# ---- built items ------------------------------------------------------------------------------------------
REVERSIBLE: tuple[str, ...] = ("gender", "counting", *PATTERN_TASKS)  # labels that survive playing backwards


def reverse_item(item: Item) -> Item:
    """The time-reversed control: audio backwards; an order label read backwards (pattern tasks)."""
    if item.task not in REVERSIBLE:
        raise ValueError(f"task {item.task!r} has no time-reversed control (its label is not defined backwards)")

    def back(label: str) -> str:
        return "-".join(reversed(label.split("-"))) if item.task in PATTERN_TASKS else label

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
    from .dsp import to_pcm16

    return hashlib.sha256(to_pcm16(audio)[0].tobytes()).hexdigest()


# ---- what the words claim ----------------------------------------------------------------------------------
# Words of each claim sentence (both wordings) that say its label: what a transcript reader goes by.
CLAIM_WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "pitch": {"low": ("low", "deep"), "medium": ("medium", "average"), "high": ("high", "shrill")},
    "volume": {"quiet": ("quietly", "softly", "whispered"), "medium": ("normal volume", "moderate"),
               "loud": ("loudly", "shouted")},
    "speed": {"slow": ("slowly", "crawl"), "medium": ("normal pace", "even tempo"), "fast": ("fast", "rush")},
    "range": {"narrow": ("flat", "monotone", "barely"), "medium": ("normal melody", "moderate amount"),
              "wide": ("expressive", "swings")},
    "gender": {"male": ("man", "gentleman"), "female": ("woman", "lady")},
    "intonation": {"rising": ("up", "climbing"), "falling": ("down", "dropping")},
    "counting": {"one": ("only speaker", "nobody else"), "four": ("four",)},
    "identity": {"same": ("first speaker again", "very start"), "different": ("not spoken before", "first time")},
}  # fmt: skip


def _claims_in(task: str, text: str) -> list[tuple[int, str]]:
    """(position, label) of every claim word of a task in a text (whole words, case-insensitive), in order."""
    found = []
    for label, words in CLAIM_WORDS[task].items():
        for w in words:
            found += [(m.start(), label) for m in re.finditer(rf"\b{re.escape(w)}\b", text, re.IGNORECASE)]
    return sorted(found)


def claimed_label(task: str, transcript: str) -> str | None:
    """The label a transcript asserts for a task (the order of the claimed levels for the pattern tasks, the
    segment saying "I am the first speaker again" for identity); None when the words claim nothing clear."""
    if task == "identity":
        sentences = [s for s in re.split(r"[.!?|]+", transcript) if s.strip()]
        hits = [i for i, s in enumerate(sentences) if any(lbl == "same" for _, lbl in _claims_in(task, s))]
        return f"segment {hits[0] + 1}" if len(hits) == 1 else None
    labels = [lbl for _, lbl in _claims_in(task, transcript)]
    labels = [lbl for i, lbl in enumerate(labels) if i == 0 or lbl != labels[i - 1]]  # "whispered softly": one claim
    if task in PATTERN_TASKS:
        return "-".join(labels) if len(labels) == 3 and len(set(labels)) == 3 else None
    # the claim is one sentence (intonation's last): a neighbour such as "my melody swings up and down" says nothing
    claimed = [c for s in re.split(r"[.!?|]+", transcript) if (c := {lbl for _, lbl in _claims_in(task, s)})]
    return next(iter(claimed[-1])) if claimed and len(claimed[-1]) == 1 else None
