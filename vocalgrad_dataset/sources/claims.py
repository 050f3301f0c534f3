"""The `claims` source: vendored synthetic carrier sentences that claim a direction (lexical-conflict configs).

`data/claims/templates.json` holds the sentences (per category and claim 3 train and 2 held-out test
templates, neutral sentences shared by every category) and the claim keywords; `data/claims/manifest.tsv`
lists the vendored 48 kHz PCM16 carriers with their frozen sha256, template, voice, Whisper tiny.en check and
contour-trend flags. Regenerate them with `python scripts/vendor_claims.py` (needs espeak-ng and flite);
a build only reads the files and refuses one whose bytes differ from the manifest.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from vocalgrad_dataset.fileio import file_sha256
from vocalgrad_dataset.sources.audio_io import read_pcm
from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

CLAIMS_DIR = Path(__file__).resolve().parent.parent / "data" / "claims"
TEMPLATES_FILE = CLAIMS_DIR / "templates.json"
SAMPLE_RATE = 48000
CLAIMS: tuple[str, ...] = ("increase", "decrease", "none")  # what a carrier's sentence asserts
NEUTRAL = "none"
ANY_CATEGORY = "any"  # the category column of a neutral carrier: it serves every conflict config
MANIFEST_COLUMNS: tuple[str, ...] = (
    "file", "source_item_id", "source_clip_id", "split", "category", "claim", "template_id", "voice_id",
    "voice_sex", "voice_engine", "voice_settings", "transcript", "whisper", "wer", "sha256", "n_samples",
    "rms_trend_db", "f0_trend_st", "trend_flag",
)


@dataclass(frozen=True)
class Template:
    """One carrier sentence: what it claims about which category, and which split it belongs to."""

    id: str  # "volume-inc-tr1", "neutral-te2"
    category: str  # a category name, or "any" for neutral sentences
    claim: str  # increase | decrease | none
    split: str  # train | test
    text: str


@lru_cache(maxsize=4)
def _templates_json(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_templates(path: str | Path = TEMPLATES_FILE) -> list[Template]:
    """Every template in file order: neutral ones first, then category by category, increase before decrease."""
    data = _templates_json(str(path))
    short = {"train": "tr", "test": "te"}
    out = [Template(f"neutral-{short[split]}{i}", ANY_CATEGORY, NEUTRAL, split, text)
           for split, texts in data["neutral"].items() for i, text in enumerate(texts, 1)]
    for category, entry in data["categories"].items():
        for claim, abbrev in (("increase", "inc"), ("decrease", "dec")):
            out += [Template(f"{category}-{abbrev}-{short[split]}{i}", category, claim, split, text)
                    for split, texts in entry[claim].items() for i, text in enumerate(texts, 1)]
    return out


def claim_words(category: str, path: str | Path = TEMPLATES_FILE) -> dict[str, tuple[str, ...]]:
    """The keywords that assert increase / decrease for a category (its own plus the generic trend verbs)."""
    data = _templates_json(str(path))
    if category not in data["categories"]:
        raise KeyError(f"no claim keywords for category {category!r}")
    own = data["categories"][category]["words"]
    return {c: tuple(own[c]) + tuple(data["generic_words"][c]) for c in ("increase", "decrease")}


# Unambiguous English contractions, expanded as Whisper's own English normaliser does ("'s" and "'d" are not).
_CONTRACTIONS = (("n't", " not"), ("'m", " am"), ("'re", " are"), ("'ll", " will"), ("'ve", " have"))


def normalise_text(text: str) -> list[str]:
    """Lower-case words without punctuation, unambiguous contractions expanded: how transcripts are compared."""
    text = text.lower().replace("\u2019", "'").replace("can't", "can not").replace("won't", "will not")
    for short, full in _CONTRACTIONS:
        text = text.replace(short, full)
    return re.findall(r"[a-z0-9']+", text)


def claim_of_text(text: str, category: str) -> str | None:
    """The direction a sentence claims for a category (keyword counts; a tie or no keyword: None)."""
    words = normalise_text(text)
    counts = {c: sum(words.count(k) for k in kws) for c, kws in claim_words(category).items()}
    if counts["increase"] == counts["decrease"]:
        return None
    return "increase" if counts["increase"] > counts["decrease"] else "decrease"


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance / reference length, on normalised words."""
    from vocalgrad_dataset.wer import words_error_rate

    return words_error_rate(normalise_text(reference), normalise_text(hypothesis))


@dataclass(frozen=True)
class CarrierClip(SourceClip):
    """A source clip that carries a claim: which direction its words assert, and for which category."""

    claim: str = NEUTRAL
    category: str = ANY_CATEGORY
    template_id: str = ""
    voice_id: str = ""
    sha256: str = ""

    def serves(self, category: str) -> bool:
        """Whether this carrier belongs to a category's conflict config (its own claims and every neutral one)."""
        return self.category in (category, ANY_CATEGORY)


class ClaimsSource:
    """The vendored carriers; every read checks the file's sha256 against the manifest."""

    name = "claims"
    splits: tuple[str, ...] = ("test", "train")

    def __init__(self, directory: Path | str = CLAIMS_DIR) -> None:
        self.directory = Path(directory)
        manifest = self.directory / "manifest.tsv"
        if not manifest.is_file():
            raise SourceError(f"claims source: manifest {manifest} not found (run scripts/vendor_claims.py)")
        with open(manifest, newline="", encoding="utf-8") as f:
            self._rows = list(csv.DictReader(f, delimiter="\t"))
        missing = [c for c in MANIFEST_COLUMNS if self._rows and c not in self._rows[0]]
        if missing:
            raise SourceError(f"{manifest}: missing column(s) {', '.join(missing)}")
        for i, r in enumerate(self._rows, 2):
            if r["claim"] not in CLAIMS:
                raise SourceError(f"{manifest}: line {i}: claim {r['claim']!r} is not one of {', '.join(CLAIMS)}")

    def clips(self, split: str) -> list[CarrierClip]:
        """The carriers of a split in manifest order (neutral ones first)."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r} for claims; valid: {', '.join(self.splits)}")
        return [
            CarrierClip(
                source_item_id=r["source_item_id"], source_clip_id=r["source_clip_id"], speaker_id=r["voice_id"],
                text=r["transcript"], path=str((self.directory / r["file"]).resolve()), claim=r["claim"],
                category=r["category"], template_id=r["template_id"], voice_id=r["voice_id"], sha256=r["sha256"],
            )
            for r in self._rows
            if r["split"] == split
        ]

    def read(self, clip: SourceClip) -> PCM:
        """Decode one carrier (48 kHz PCM16) after checking its bytes against the frozen sha256."""
        expected = getattr(clip, "sha256", "")
        if expected and Path(clip.path).is_file() and file_sha256(clip.path) != expected:
            raise SourceError(f"clip {clip.source_clip_id}: {clip.path} does not match its sha256 in the claims "
                              "manifest (modified file; rerun scripts/vendor_claims.py or restore it)")
        return read_pcm(clip.path, clip_name=clip.source_clip_id, expected_rate=SAMPLE_RATE)
