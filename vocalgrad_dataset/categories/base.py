"""Category metadata and the registry: each category module registers itself beside its code."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any

import numpy as np

from vocalgrad_dataset.dsp import schedule as sched
from vocalgrad_dataset.grid import Condition, seed_from

Render = Callable[[np.ndarray, int, Sequence[sched.Schedule], dict[str, Any]], Iterable[np.ndarray]]
# Working memory of one render call: conditions are rendered in batches whose float64 outputs fit in it, so a
# long source (a 20-minute clip is 460 MB per float64 output) is rendered a few conditions at a time.
BATCH_BYTES = 256 * 2**20
BYTES_PER_SAMPLE = 16  # per condition and sample: a float64 output, or a segment category's ~3 overlapping windows


@dataclass(frozen=True)
class Category:
    """One acoustic factor: its names, published parameters and the transform that renders it.

    `render(audio, sr, schedules, fixed)` is a pure function of float32 audio (PCM16 / 32768), the
    sample rate and the schedules of one clip's conditions; it returns (or yields, one at a time) float
    audio per schedule. `fixed` holds the per-tier constants, the noise seeds and `clip_cache`, a dict
    shared by the render calls of one clip (for what several tiers or batches can reuse).
    """

    name: str
    attribute: str  # the word(s) the prompt asks about
    release_name: str  # the published release's long name (also its config file stem)
    parameter: str  # what the schedule's values are, e.g. "semitones"
    tier_key: str  # the tier value's key in the published config file
    endpoints: Callable[[float, int], tuple[float, float]]  # (tier value, sr) -> (less, more) of the attribute
    render: Render
    continuous: bool = False  # echo and vibration are per sample; the rest step every 50 ms
    fixed_keys: tuple[str, ...] = ()  # other per-tier constants from the config (e.g. room scale)
    applied: Callable[[float, int], float] = field(default=lambda v, sr: float(v))  # value as actually used
    description: str = ""
    # The parameter file's content ({"tiers": {tier: {tier_key: value, ...}}}) for a category of one's own;
    # None: the published file shipped in data/configs/ (the nine categories).
    parameters: dict[str, Any] | None = None

    @cached_property
    def config(self) -> dict[str, Any]:
        """The published generator's parameter file for this category (or its own `parameters`)."""
        if self.parameters is not None:
            return self.parameters
        path = resources.files("vocalgrad_dataset") / "data" / "configs" / f"{self.release_name}_benchmark.json"
        return json.loads(path.read_text())

    def tier_value(self, tier: str) -> float:
        """The tier's strength parameter (d, F_min, b_min, r_max, w_max, A)."""
        return float(self.config["tiers"][tier][self.tier_key])

    def fixed(self, tier: str) -> dict[str, float]:
        """Per-tier constants that do not vary over time."""
        return {k: float(self.config["tiers"][tier][k]) for k in self.fixed_keys}

    def schedule(self, cond: Condition, onset: int, offset: int, n_samples: int, sr: int) -> sched.Schedule:
        """The parameter schedule of one condition over a clip."""
        less, more = self.endpoints(self.tier_value(cond.tier), sr)
        start, end = (less, more) if cond.direction == "up" else (more, less)
        if self.continuous:
            return sched.continuous(onset, offset, n_samples, start, end, cond.curve)
        return sched.stepped(onset, offset, n_samples, sr, start, end, cond.curve)

    def apply(self, audio: np.ndarray, sr: int, schedule: sched.Schedule, *, tier: str = "high", clip_id: str = "") -> np.ndarray:
        """Render one schedule (convenience for single conditions; `render_clip` batches a whole clip)."""
        extra = {**self.fixed(tier), "seeds": [noise_seed(clip_id)], "clip_cache": {}}
        return next(iter(self.render(audio, sr, [schedule], extra)))

    def render_clip(
        self, audio: np.ndarray, sr: int, onset: int, offset: int, conds: Sequence[Condition], clip_ids: Sequence[str]
    ) -> Iterator[tuple[np.ndarray, sched.Schedule]]:
        """Render conditions of one clip in order, lazily: one render call per run of consecutive conditions
        with the same per-tier constants, at most as many as fit in BATCH_BYTES (all 24 for a short clip)."""
        cache: dict[str, Any] = {}
        for idx in self._batches(conds, max(1, BATCH_BYTES // max(1, BYTES_PER_SAMPLE * len(audio)))):
            yield from self._render_batch(audio, sr, onset, offset, [conds[i] for i in idx],
                                          [clip_ids[i] for i in idx], cache)  # fmt: skip

    def _render_batch(
        self, audio: np.ndarray, sr: int, onset: int, offset: int, conds: Sequence[Condition], clip_ids: Sequence[str],
        cache: dict[str, Any],
    ) -> Iterator[tuple[np.ndarray, sched.Schedule]]:
        """One render call's (output, schedule) pairs. No reference to a yielded output or schedule is kept once
        the caller asks for the next: `zip` would keep the previous pair in its reused result tuple while the next
        output is made (a 20-minute source: one float64 output, and for per-sample schedules their values, 0.5 GB
        each, alive twice); this batch's schedules go with this frame, before the next batch's are made."""
        schedules = [self.schedule(c, onset, offset, len(audio), sr) for c in conds]
        extra = {**self.fixed(conds[0].tier), "seeds": [noise_seed(c) for c in clip_ids], "clip_cache": cache}
        outputs = iter(self.render(audio, sr, schedules, extra))
        for i in range(len(schedules)):
            y = next(outputs, None)
            if y is None:
                raise ValueError(f"{self.name}: render gave fewer outputs than the {len(conds)} schedules it was given")
            yield y, schedules[i]
            del y
        if next(outputs, None) is not None:
            raise ValueError(f"{self.name}: render gave more outputs than the {len(conds)} schedules it was given")

    def _batches(self, conds: Sequence[Condition], size: int) -> Iterable[list[int]]:
        """Runs of consecutive conditions sharing their per-tier constants, each at most `size` long."""
        run: list[int] = []
        for i, c in enumerate(conds):
            if run and (len(run) == size or self.fixed(c.tier) != self.fixed(conds[run[0]].tier)):
                yield run
                run = []
            run.append(i)
        if run:
            yield run


def noise_seed(clip_id: str) -> int:
    """SPEC §3 per-clip noise seed: sha256("42:{clip_id}")[:8] big-endian."""
    return seed_from(f"42:{clip_id}")


REGISTRY: dict[str, Category] = {}
ALIASES: dict[str, str] = {}


def register(category: Category) -> Category:
    """Add a category (and its published long name as an alias)."""
    REGISTRY[category.name] = category
    ALIASES[category.release_name] = category.name
    return category


def load_plugin_categories() -> list[Category]:
    """Register the categories installed packages declare under the `vocalgrad.categories` entry points."""
    from vocalgrad_dataset.plugins import entry_point_objects

    found = []
    for where, obj in entry_point_objects("vocalgrad.categories"):
        if not isinstance(obj, Category):
            raise TypeError(f"entry point {where!r} of vocalgrad.categories gave {obj!r}, not a Category")
        if REGISTRY.get(obj.name, obj) is not obj:
            raise ValueError(f"entry point {where!r} registers category {obj.name!r}, which already exists")
        found.append(register(obj))
    return found


def get_category(name: str) -> Category:
    """Look a category up by short or published name (installed plugins included); unknown names get a
    "did you mean"."""
    for first_try in (True, False):
        key = ALIASES.get(name, name).replace("-", "_")
        key = ALIASES.get(key, key)
        if key in REGISTRY:
            return REGISTRY[key]
        if not (first_try and load_plugin_categories()):
            break
    close = difflib.get_close_matches(name, [*REGISTRY, *ALIASES], n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KeyError(f"unknown VocalGrad category {name!r}{hint} (known: {', '.join(REGISTRY)})")
