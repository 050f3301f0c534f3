"""Prompt variants of SPEC §5 by name, each with its answer vocabulary, and the few-shot layout.

Names: a base (`default`, `paraphrase-1..3`, `cross-attribute:<category>`, `few-shot`) joined by "+" with
modifiers `swap_order`, `audio_ref`, `audio_first` (e.g. `swap_order+audio_ref`). Paraphrases combine only
with `audio_first`; few-shot (4 labelled train clips + the query, interleaved) only with `swap_order` and
`audio_ref` (the published runs used `few-shot+audio_ref`). The question of a yes/no or ternary config
(`volume-yesno`, `volume-ternary`) is fixed by its format (SPEC §4): those take `default` or `audio_first`.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.audio import input_clip
from harness.data import CONFIGS, BenchRow, RowSource, SourceUnit, attribute_word, unit_key
from harness.kinds import Kind, row_kind, task_kind
from harness.models.protocol import AudioClip, Prompt, Segment
from harness.parsing import (
    MAIN_VOCABULARY,
    SYNONYM,
    Vocabulary,
    mcq_vocabulary,
)
from vocalgrad_dataset.grid import parse_clip_id, seed_from
from vocalgrad_dataset.prompt import answer_line
from vocalgrad_dataset.tasks import config_spec, resolve

MODIFIERS: tuple[str, ...] = ("swap_order", "audio_ref", "audio_first")  # canonical order in names
FEW_SHOT_SEED = 1234  # SPEC §5
SHOTS_PER_LABEL = 2  # 2 "increase" + 2 "decrease" examples per query
FEW_SHOT_AUDIOS = 2 * SHOTS_PER_LABEL + 1  # clips in one few-shot prompt


__all__ = ["MAIN_VOCABULARY", "Vocabulary"]  # re-exported: the words a variant offers come from here

# SPEC §5 paraphrases: category -> [(question, increase word, decrease word)], numbered from 1.
PARAPHRASES: dict[str, list[tuple[str, str, str]]] = {
    "volume": [
        ("Does the loudness rise or fall as the audio progresses?", "rise", "fall"),
        ("Does the sound intensity increase or decrease throughout the recording?", "increase", "decrease"),
        ("Is the audio intensity increasing or decreasing over time?", "increasing", "decreasing"),
    ],
    "pitch": [
        ("Does the tone rise or fall over time?", "rise", "fall"),
        ("Does the sound frequency change upward or downward over time?", "upward", "downward"),
        ("Over time, does the frequency of the voice rise or decline?", "rise", "decline"),
    ],
    "speed": [
        ("Does the pace of speech become faster or slower over time?", "faster", "slower"),
        ("Does the speech tempo increase or decrease with time?", "increase", "decrease"),
        ("Does the pace of delivery accelerate or decelerate over time?", "accelerate", "decelerate"),
    ],
}


@dataclass(frozen=True)
class Variant:
    """A resolved prompt variant (few-shot variants get their train-example pool from prepare_variant)."""

    name: str  # canonical name
    base: str  # "default" | "paraphrase" | "cross-attribute" | "few-shot"
    paraphrase: int = 0  # 1..3 for paraphrase variants
    cross_category: str = ""  # config whose attribute word is asked about
    swap_order: bool = False
    audio_ref: bool = False
    audio_first: bool = False
    pool: FewShotPool | None = field(default=None, compare=False, repr=False)

    def _kind(self, config: str) -> Kind:
        """The config's task kind, refusing variants the kind does not take (a fixed question, SPEC §4)."""
        kind = task_kind(config)
        kind.accepts(self.name, config)
        return kind

    def vocabulary(self, config: str) -> Vocabulary:
        """Answer words and parser for a row of this config."""
        kind = self._kind(config)
        if kind.vocabulary is not None:
            return kind.vocabulary
        if kind.prompt is not None:
            raise ValueError(f"config {config!r} ({kind.name}) has its answers per row, not per config")
        if self.base != "paraphrase":
            return MAIN_VOCABULARY
        _, inc, dec = _paraphrase(config, self.paraphrase)
        # The published paraphrase runs used one synonym parser for all nine questions.
        return Vocabulary((inc, dec), ("increase", "decrease"), SYNONYM)

    def text(self, config: str, attribute: str | None = None) -> str:
        """The question: sentence, blank line, answer instruction (few-shot: the query's question)."""
        attribute = attribute or attribute_word(config)
        kind = self._kind(config)
        if kind.fixed_question:  # the config's declared question (its YAML `question` and `answers`)
            return config_spec(config).prompt(attribute)
        if self.base == "paraphrase":
            question, inc, dec = _paraphrase(config, self.paraphrase)
            return f"{question}\n\n{answer_line(inc, dec)}"
        if self.base == "cross-attribute":
            attribute = attribute_word(self.cross_category)
        subject = f"the {attribute} of this audio clip" if self.audio_ref else f"the {attribute}"
        a, b = ("decrease", "increase") if self.swap_order else ("increase", "decrease")
        return f"Does {subject} {a} or {b} over time?\n\n{answer_line(a, b)}"


def variant_names() -> list[str]:
    """Every nameable variant (modifier combinations of default, paraphrases, cross-attributes, few-shot)."""
    combos = ["+".join(m for m, on in zip(MODIFIERS, bits, strict=True) if on) for bits in _bit_tuples()]
    names = [c or "default" for c in combos]
    names += [f"paraphrase-{i}" for i in (1, 2, 3)] + [f"paraphrase-{i}+audio_first" for i in (1, 2, 3)]
    names += [f"cross-attribute:{c}" for c in CONFIGS]
    names += ["few-shot", "few-shot+swap_order", "few-shot+audio_ref", "few-shot+swap_order+audio_ref"]
    return names


def _bit_tuples() -> list[tuple[bool, ...]]:
    return [tuple(bool(i >> k & 1) for k in range(len(MODIFIERS))) for i in range(2 ** len(MODIFIERS))]


def _unknown(name: str, why: str = "") -> ValueError:
    close = difflib.get_close_matches(name, variant_names(), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"unknown prompt variant {name!r}{why}{hint}")


def get_variant(name: str) -> Variant:
    """Resolve a variant name ("swap_order+audio_ref", "paraphrase-2", "cross-attribute:echo", "few-shot+audio_ref")."""
    parts = [p.strip() for p in name.split("+") if p.strip()]
    base_parts = [p for p in parts if p not in MODIFIERS]
    mods = {p for p in parts if p in MODIFIERS}
    if len(base_parts) > 1 or not parts or len(mods) + len(base_parts) != len(parts):
        raise _unknown(name)
    base = base_parts[0] if base_parts else "default"
    kw: dict[str, Any] = {m: m in mods for m in MODIFIERS}
    if base == "default":
        canon = "+".join(m for m in MODIFIERS if m in mods) or "default"
        return Variant(canon, "default", **kw)
    if base.startswith("paraphrase-") and base[len("paraphrase-") :] in ("1", "2", "3"):
        if mods - {"audio_first"}:
            raise _unknown(name, " (paraphrases combine only with audio_first)")
        return Variant(_canonical(base, mods), "paraphrase", paraphrase=int(base[-1]), **kw)
    if base.startswith("cross-attribute:"):
        try:
            cat = resolve(base.split(":", 1)[1])
        except ValueError as err:
            raise _unknown(name, f" ({err})") from None
        if cat not in CONFIGS:
            raise _unknown(name, " (cross-attribute takes one of the nine categories)")
        return Variant(_canonical(f"cross-attribute:{cat}", mods), "cross-attribute", cross_category=cat, **kw)
    if base == "few-shot":
        if "audio_first" in mods:
            raise _unknown(name, " (few-shot has its own layout; it combines only with swap_order, audio_ref)")
        return Variant(_canonical(base, mods), "few-shot", **kw)
    raise _unknown(name)


def _canonical(base: str, mods: set[str]) -> str:
    return "+".join([base, *(m for m in MODIFIERS if m in mods)])


def _paraphrase(config: str, index: int) -> tuple[str, str, str]:
    category = config_spec(config).category.name
    if category not in PARAPHRASES:
        raise ValueError(f"paraphrase prompts exist only for {', '.join(PARAPHRASES)}, not {category!r}")
    return PARAPHRASES[category][index - 1]


def few_shot_segments(
    attribute: str, examples: Sequence[tuple[AudioClip, str]], query: AudioClip, question: str
) -> tuple[Segment, ...]:
    """SPEC §5 few-shot layout: intro, per example "Example i audio:" AUDIO "Example i label: L", then the query.

    Adjacent text pieces are joined into one segment (what a chat template renders is the same).
    """
    pieces: list[Segment] = [
        f"You will receive {len(examples)} labeled audio examples for {attribute}, followed by one query audio clip.\n\n"
    ]
    for i, (clip, label) in enumerate(examples, start=1):
        pieces += [f"Example {i} audio:\n", clip, f"\nExample {i} label: {label}\n\n"]
    pieces += ["Query audio:\n", query, f"\nFor the query audio, answer the same question:\n{question}"]
    merged: list[Segment] = []
    for p in pieces:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    return tuple(merged)


def draw_examples(
    increase_ids: Sequence[str], decrease_ids: Sequence[str], category_key: str, clip_id: str,
    *, seed: int = FEW_SHOT_SEED, shots: int = SHOTS_PER_LABEL,
) -> list[str]:
    """SPEC §5 draw for one query: random.Random(sha256("{seed}:{category}:{clip_id}")[:8] big-endian),
    `shots` "increase" then `shots` "decrease" ids (random.sample), then shuffled."""
    rng = random.Random(seed_from(f"{seed}:{category_key}:{clip_id}"))
    chosen = [*rng.sample(list(increase_ids), shots), *rng.sample(list(decrease_ids), shots)]
    rng.shuffle(chosen)
    return chosen


class FewShotPool:
    """Labelled train clips of the query's category, drawn per query and decoded through a RowSource.

    The draw is seeded with the category's published long name ("voice_pitch"), as the published runs did,
    over the train ids in dataset order (source list order, then curve, tier, direction).
    """

    def __init__(self, train: RowSource, *, seed: int = FEW_SHOT_SEED, shots: int = SHOTS_PER_LABEL) -> None:
        self.train, self.seed, self.shots = train, seed, shots
        self._ids: dict[str, dict[str, list[str]]] = {}

    def ids_by_label(self, config: str) -> dict[str, list[str]]:
        """Train clip ids of a config per label ("increase", "decrease"), in dataset order."""
        if config not in self._ids:
            by_label: dict[str, list[str]] = {"increase": [], "decrease": []}
            for unit in self.train.units(config):
                for cid in unit.clip_ids:
                    by_label[parse_clip_id(cid)[2].label].append(cid)
            for label, ids in by_label.items():
                if len(ids) < self.shots:
                    raise ValueError(f"few-shot: {config} has {len(ids)} {label!r} train clips, needs {self.shots}")
            self._ids[config] = by_label
        return self._ids[config]

    def draw(self, config: str, clip_id: str) -> list[str]:
        """The example ids of one query."""
        spec = config_spec(config)
        if spec.recipe.sources or spec.recipe.claims or task_kind(config).fixed_question:
            raise ValueError(f"few-shot prompts take direction configs, not {config!r}")
        ids = self.ids_by_label(config)
        key = spec.category.release_name
        return draw_examples(ids["increase"], ids["decrease"], key, clip_id, seed=self.seed, shots=self.shots)

    def examples(self, config: str, clip_id: str) -> list[BenchRow]:
        """The decoded example rows of one query, in prompt order."""
        wanted = self.draw(config, clip_id)
        units: dict[str, list[str]] = {}
        for cid in wanted:
            item, clip, _ = parse_clip_id(cid)
            units.setdefault(unit_key(item, clip), []).append(cid)
        rows = {r["benchmark_clip_id"]: r for r in self.train.rows(config, [SourceUnit(k, 0.0, tuple(v)) for k, v in units.items()])}
        missing = [cid for cid in wanted if cid not in rows]
        if missing:
            raise ValueError(f"few-shot: train clip {missing[0]} not found in {getattr(self.train, 'description', self.train)}")
        return [rows[cid] for cid in wanted]



def prepare_variant(variant: Variant, settings: Any, model: Any = None) -> Variant:
    """A variant ready to run: few-shot gets its train pool (same source or build, train split) after
    checking the model accepts several clips per prompt; anything else is returned unchanged."""
    if variant.base != "few-shot" or variant.pool is not None:
        return variant
    limit = model.max_audios if model is not None else None
    if limit is not None and limit < FEW_SHOT_AUDIOS:
        raise ValueError(f"model {getattr(model, 'name', model)!r} takes at most {limit} audio clip(s) per prompt; "
                         f"few-shot needs {FEW_SHOT_AUDIOS} (4 labelled examples + the query)")
    from harness.data import open_source

    train = open_source("train", settings.source, settings.data_dir, settings.dataset)
    return replace(variant, pool=FewShotPool(train))


def build_prompt(row: dict[str, Any], variant: str | Variant) -> tuple[Prompt, Vocabulary]:
    """The Prompt for one benchmark row (text before audio unless audio_first; few-shot interleaved) and its
    vocabulary."""
    v = get_variant(variant) if isinstance(variant, str) else variant
    kind = row_kind(row)
    if kind.prompt is not None:  # a row-level kind (MCQ): its own question and answers
        kind.accepts(v.name, row["category"])
        return kind.prompt(row, v)
    config = resolve(row["category"])
    attribute = row.get("attribute") or attribute_word(config)
    audio = input_clip(row)
    text = v.text(config, attribute)
    if v.base == "few-shot":
        if v.pool is None:
            raise ValueError(f"prompt variant {v.name!r} needs train examples: resolve it with prepare_variant()")
        examples = [(input_clip(r), r["label"]) for r in v.pool.examples(config, row["benchmark_clip_id"])]
        segments = few_shot_segments(attribute, examples, audio, text)
    else:
        segments = (audio, text) if v.audio_first else (text, audio)
    # Baselines read these (and answer in the offered words); the label is deliberately absent.
    vocab = v.vocabulary(config)
    meta = {"category": config_spec(config).category.name, **{k: row.get(k) for k in ("onset_sec", "offset_sec", "duration_sec")},
            "answer_words": vocab.words, "answer_labels": vocab.labels}
    return Prompt(segments, clip_id=row["benchmark_clip_id"], meta=meta), vocab


def row_vocabulary(row: dict[str, Any], variant: Variant) -> Vocabulary:
    """A row's answers without building its prompt: an MCQ item's options, else the config's vocabulary."""
    kind = row_kind(row)
    if kind.prompt is not None:
        return mcq_vocabulary(row.get("options") or ("?", "?"))
    return variant.vocabulary(row["category"])
