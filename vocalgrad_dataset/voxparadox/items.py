"""VoxParadox-lite item builders and the signal measurements that verify them (see voxparadox.py).

Each builder yields candidate items of one task and split in a deterministic order; `measure(task, audio)`
reads the task's label back from the signal alone (also the signal-measuring oracle's answer), and an item
is kept only when the measurement equals its true label.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from vocalgrad_dataset.dsp.schedule import Schedule
from vocalgrad_dataset.voxparadox import (
    CONTOURS,
    EDGE_SEC,
    GAP_SEC,
    LABELS,
    LEVELS,
    OPTIONS_PER_ITEM,
    PATTERN_TASKS,
    QUESTIONS,
    RELEASE_LEVELS,
    SPLIT_SIZES,
    SR,
    TASKS,
    Item,
    Voice,
    base_audio,
    base_of,
    bases,
    frozen_ids,
    has_base,
    join,
    release_label,
    rng_for,
    voices_of,
)

FRAME, HOP = 1024, 160  # F0 analysis: 64 ms frames every 10 ms
FMIN, FMAX = 60.0, 420.0
STEP = 800  # 50 ms steps of the stepped pitch shifts (the segment framework's step)
GENDER_F0_HZ = 165.0  # male below, female above (F0 median)
PITCH_ST = 4.0  # semitones of the low / high pitch versions
VOLUME_DB = {"quiet": -36.0, "medium": -26.0, "loud": -16.0}  # speech RMS, dBFS
SPEED_RATE = {"slow": 0.7, "medium": 1.0, "fast": 1.45}
RANGE_SCALE = {"narrow": 0.25, "medium": 1.0, "wide": 2.5}
# A milder second version of each pattern (more candidates per voice, and Whisper hears milder DSP better);
# the signal check still measures its order.
MILD = {"pitch": 3.0, "volume": {"quiet": -33.0, "medium": -26.0, "loud": -19.0},
        "speed": {"slow": 0.75, "medium": 1.0, "fast": 1.35}, "range": {"narrow": 0.4, "medium": 1.0, "wide": 2.0}}
# Range only: a third version between the two, appended after them. Its train split has the fewest voices with
# all three bases (480 two-version candidates), and Whisper's transcript of ~35 % of its range-scaled items is
# not exact: too few for 400 train items (280 come from the first two versions). Appended, it moves no item of
# the first two versions.
MIDDLE = {"range": {"narrow": 0.33, "medium": 1.0, "wide": 2.2}}
# Intonation: the whole recording's pitch follows a contour, in semitones at its start, middle and end (linear
# between; a statement already falls at its end: rising must undo it), at two sizes (more items per voice).
CONTOUR_ST: dict[str, tuple[float, float, float]] = {
    "rising": (-4.0, 3.0, 11.0), "falling": (4.0, -2.0, -8.0), "rise-fall": (-2.0, 7.0, -4.0),
    "fall-rise": (4.0, -6.0, 6.0),
}  # fmt: skip (sizes tried on 25 test candidates per contour: 68-100 % read back by the signal check)
CONTOUR_SIZES = (1.0, 0.7)
CONTOUR_MARGIN_ST = 0.6  # medians of the thirds of the speech closer than this: no contour is read
INTONATION_FMIN = 40.0
SAME_VOICE_ST = 1.0  # turns whose F0 medians are closer than this are one voice
COUNTING_TURNS = 4  # every counting item has four turns, whatever its number of speakers
# Counting and identity candidates are random draws (their combinations run to millions on train): this many per
# split, deterministic (rng_for), duplicates dropped.
DRAWS = 8000
# Sentences said beside a claim (counting's other turns): none that claims a sex, a count or a first speaker.
NEUTRAL_EXCLUDE = ("gender", "identity", "counting")


# ---- measurements ---------------------------------------------------------------------------------------


def _rms_frames(x: np.ndarray) -> np.ndarray:
    n = max(1, (len(x) - FRAME) // HOP + 1)
    idx = np.arange(FRAME)[None, :] + HOP * np.arange(n)[:, None]
    padded = np.pad(x, (0, max(0, idx.max() + 1 - len(x))))
    return np.sqrt(np.mean(padded[idx] ** 2, axis=1))


def f0_track(x: np.ndarray, fmin: float = FMIN) -> np.ndarray:
    """F0 in semitones re 100 Hz per 10 ms frame (YIN), NaN where the frame is quiet or out of range."""
    import librosa

    if len(x) < FRAME:
        return np.full(0, np.nan)
    f0 = librosa.yin(x.astype(np.float32), fmin=fmin, fmax=FMAX, sr=SR, frame_length=FRAME, hop_length=HOP,
                     center=False)
    rms = _rms_frames(x)[: len(f0)]
    f0 = f0[: len(rms)]
    st = 12.0 * libm_log2(f0 / 100.0)
    st[(rms < 0.1 * rms.max()) | (f0 <= fmin * 1.02) | (f0 >= FMAX * 0.98)] = np.nan
    return _without_jumps(st)


def _without_jumps(st: np.ndarray, width: int = 9, tolerance: float = 3.0) -> np.ndarray:
    """NaN where a frame is more than `tolerance` semitones from the median of its neighbours (YIN's octave
    errors on fricatives and creak)."""
    half = width // 2
    padded = np.pad(st, half, constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: NaN is the answer
        local = np.nanmedian(windows, axis=1)
    out = st.copy()
    out[~(np.abs(st - local) <= tolerance)] = np.nan
    return out


def segments(x: np.ndarray, min_gap_sec: float = 0.3) -> list[tuple[int, int]]:
    """(start, end) samples of the parts separated by at least `min_gap_sec` of silence."""
    frame = SR // 100
    n = len(x) // frame
    energy = np.sqrt(np.mean(x[: n * frame].reshape(n, frame) ** 2, axis=1)) if n else np.zeros(0)
    loud = energy > 0.02 * (energy.max() if n else 1.0)
    out: list[tuple[int, int]] = []
    start, quiet = None, 0
    for i, on in enumerate(loud):
        if on:
            start = i if start is None else start
            quiet = 0
        elif start is not None:
            quiet += 1
            if quiet * frame >= min_gap_sec * SR:
                out.append((start * frame, (i - quiet + 1) * frame))
                start, quiet = None, 0
    if start is not None:
        out.append((start * frame, (n - quiet) * frame))
    return out


def _median_st(x: np.ndarray) -> float:
    st = f0_track(x)
    return float(np.nanmedian(st)) if np.isfinite(st).any() else float("nan")


def _range_st(x: np.ndarray) -> float:
    st = f0_track(x)
    st = st[np.isfinite(st)]
    return float(np.percentile(st, 90) - np.percentile(st, 10)) if len(st) > 5 else float("nan")


def _level_db(x: np.ndarray) -> float:
    rms = _rms_frames(x)
    speech = rms[rms > 0.1 * rms.max()]
    return 20 * math.log10(float(np.sqrt(np.mean(speech**2))) + 1e-12)


def _duration(x: np.ndarray) -> float:
    return len(x) / SR


PATTERN_MEASURES: dict[str, Callable[[np.ndarray], float]] = {
    "pitch": _median_st, "volume": _level_db, "speed": lambda x: -_duration(x), "range": _range_st,
}  # larger value = higher level (speed: shorter = faster)


def _order(task: str, x: np.ndarray) -> str | None:
    parts = segments(x)
    if len(parts) != 3:
        return None
    values = [PATTERN_MEASURES[task](x[a:b]) for a, b in parts]
    if not all(np.isfinite(values)):
        return None
    ranks = np.argsort(np.argsort(values))
    return "-".join(RELEASE_LEVELS[r] for r in ranks)


def _voices_by_turn(x: np.ndarray) -> list[float]:
    return [_median_st(x[a:b]) for a, b in segments(x)]


def _count(x: np.ndarray) -> str | None:
    medians = sorted(m for m in _voices_by_turn(x) if np.isfinite(m))
    if not medians:
        return None
    clusters = 1 + sum(b - a > SAME_VOICE_ST for a, b in itertools.pairwise(medians))
    labels = LABELS["counting"]
    return labels[clusters - 1] if clusters <= len(labels) else None


def _identity(x: np.ndarray) -> str | None:
    medians = _voices_by_turn(x)
    labels = LABELS["identity"]
    if not 3 <= len(medians) <= 1 + len(labels) or not all(np.isfinite(medians)):
        return None
    dist = [abs(m - medians[0]) for m in medians[1:]]
    return labels[int(np.argmin(dist))]


def _thirds(x: np.ndarray) -> list[float] | None:
    """F0 medians (semitones) of the first, middle and last third of the voiced span; None when too little."""
    st = f0_track(x, INTONATION_FMIN)  # a falling end of a low voice goes below FMIN
    voiced = np.nonzero(np.isfinite(st))[0]
    if len(voiced) < 15:
        return None
    edges = np.linspace(voiced[0], voiced[-1] + 1, 4)
    thirds = [st[voiced[(voiced >= lo) & (voiced < hi)]] for lo, hi in itertools.pairwise(edges)]
    return [float(np.median(t)) for t in thirds] if all(len(t) >= 3 for t in thirds) else None


def _move(delta: float) -> int:
    return 0 if abs(delta) <= CONTOUR_MARGIN_ST else 1 if delta > 0 else -1


def _intonation(x: np.ndarray) -> str | None:
    thirds = _thirds(x)
    if thirds is None:
        return None
    first, middle, last = thirds
    shapes = {(1, 1): "rising", (-1, -1): "falling", (1, -1): "rise-fall", (-1, 1): "fall-rise"}
    shape = shapes.get((_move(middle - first), _move(last - middle)))
    return None if shape is None else release_label("intonation", shape)


def _gender(x: np.ndarray) -> str | None:
    m = _median_st(x)
    if not np.isfinite(m):
        return None
    return release_label("gender", "male" if 100.0 * math.pow(2.0, float(m) / 12) < GENDER_F0_HZ else "female")


def measure(task: str, audio: np.ndarray) -> str | None:
    """A task's label read from the signal alone (None when it cannot be read)."""
    if task in PATTERN_TASKS:
        return _order(task, audio)
    return {"gender": _gender, "intonation": _intonation, "counting": _count, "identity": _identity}[task](audio)


def libm_log2(x: np.ndarray) -> np.ndarray:
    """Element-wise log2 by the C library (NaN where x is NaN or not positive).

    numpy's float64 log2/log10/power switch to AVX-512 (SVML) kernels whose last bits differ from the C
    library's; an item's audio depends on these values (pitch-range shifts, levels), so they are computed
    the same way on every x86-64 CPU and the frozen sha256s hold everywhere."""
    flat = np.asarray(x, np.float64).ravel()
    out = np.array([math.log2(v) if v > 0 else math.nan for v in flat.tolist()], np.float64)
    return out.reshape(np.shape(x))


# ---- our DSP --------------------------------------------------------------------------------------------


def pitch_shift(x: np.ndarray, semitones: float) -> np.ndarray:
    """The whole utterance shifted by `semitones`, duration kept (the pitch category's shifter)."""
    from vocalgrad_dataset.categories.pitch import shift_windows

    return x if semitones == 0 else shift_windows([x], [(0, float(semitones))], SR)[0]


def stretch(x: np.ndarray, rate: float) -> np.ndarray:
    """Time stretch by `rate` (> 1 faster), pitch kept (the speed category's phase vocoder)."""
    from vocalgrad_dataset.categories.speed import stretch_windows

    return x if rate == 1.0 else stretch_windows([x], [(0, float(rate))])[0]


def stepped_shift(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A per-50-ms-step pitch shift (semitones per step) through the segment framework."""
    from vocalgrad_dataset.categories.pitch import shift_windows
    from vocalgrad_dataset.dsp.segments import render_segmented

    n = int(np.ceil(len(x) / STEP))
    vals = np.resize(np.asarray(values, np.float64), n)
    sched = Schedule(0, len(x), len(x), 0.0, 0.0, vals, STEP)
    return render_segmented(x, SR, [sched], shift_windows, process_outside=False)[0]


def scale_range(x: np.ndarray, scale: float) -> np.ndarray:
    """F0 excursions around the median multiplied by `scale` (stepped shifts; unvoiced steps keep 0)."""
    if scale == 1.0:
        return x
    st = f0_track(x)
    med = np.nanmedian(st)
    per_step = STEP // HOP
    n = int(np.ceil(len(x) / STEP))
    steps = np.array([np.nanmean(st[k * per_step:(k + 1) * per_step]) if np.isfinite(st[k * per_step:(k + 1) * per_step]).any()
                      else med for k in range(n)])
    return stepped_shift(x, np.clip((scale - 1.0) * (steps - med), -9.0, 9.0))


def contour(x: np.ndarray, shape: str, size: float) -> np.ndarray:
    """The recording's pitch moved along `shape` (CONTOUR_ST x `size` semitones at its start, middle and end,
    linear between, in 50 ms steps), duration kept."""
    n = int(np.ceil(len(x) / STEP))
    values = np.interp(np.linspace(0.0, 1.0, n), (0.0, 0.5, 1.0), np.multiply(CONTOUR_ST[shape], size))
    return stepped_shift(x, values)


def set_level(x: np.ndarray, db: float) -> np.ndarray:
    """Scaled so its speech RMS is `db` dBFS (peaks kept below full scale)."""
    y = x * math.pow(10.0, (db - _level_db(x)) / 20)
    peak = np.max(np.abs(y))
    return (y * (0.99 / peak) if peak > 0.99 else y).astype(np.float32)


def _render_level(task: str, x: np.ndarray, level: str, target_sec: float, version: str = "full") -> np.ndarray:
    """One part at `level` in the pattern's `version` ("full", "mild", or range's "middle")."""
    names = LEVELS[task]
    if task == "pitch":
        st = MILD["pitch"] if version == "mild" else PITCH_ST
        return pitch_shift(x, {names[0]: -st, names[1]: 0.0, names[2]: st}[level])  # type: ignore[operator]
    full = {"volume": VOLUME_DB, "speed": SPEED_RATE, "range": RANGE_SCALE}[task]
    values: dict[str, float] = {"full": full, "mild": MILD[task], "middle": MIDDLE.get(task)}[version]  # type: ignore[assignment]
    if task == "volume":
        return set_level(x, values[level])
    if task == "speed":  # durations equalised first, so duration alone says the speed
        return stretch(x, len(x) / (target_sec * SR) * values[level])
    return scale_range(x, values[level])


# ---- builders -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A candidate item: its id and labels, known before its audio is made, and how to make it."""

    id: str
    answer: str
    adversarial: str
    make: Callable[[], Item]


def _item_id(task: str, split: str, *parts: object) -> str:
    import hashlib

    digest = hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:10]
    return f"vpl-{task}-{split}-{digest}"


def _said(base_ids: Sequence[str]) -> str:
    return " | ".join(bases()[b].script.text for b in base_ids)


def _leveled(base_ids: Sequence[str]) -> list[np.ndarray]:
    """The bases' audio at the medium speech level (loudness says nothing in these tasks)."""
    return [set_level(base_audio(b), VOLUME_DB["medium"]) for b in base_ids]


def _pattern(task: str) -> Callable[[str], Iterator[Candidate]]:
    def build(split: str) -> Iterator[Candidate]:
        names = LEVELS[task]
        perms = ["-".join(p) for p in itertools.permutations(names)]
        voices = [v for v in voices_of(split) if all(has_base(v, task, lvl) for lvl in names)]
        pairs = [(adv, true) for adv in perms for true in perms if adv != true]
        combos = [(v, adv, true, version) for version in ("full", "mild") for v in voices for adv, true in pairs]
        rng_for(task, split).shuffle(combos)
        if task in MIDDLE:
            middle = [(v, adv, true, "middle") for v in voices for adv, true in pairs]
            rng_for(task, split, "middle").shuffle(middle)
            combos += middle

        def make(item_id: str, voice: Voice, adv: str, true: str, version: str) -> Item:
            used = [base_of(voice, task, c).id for c in adv.split("-")]
            raw = [base_audio(b) for b in used]
            target = float(np.mean([len(r) for r in raw])) / SR
            parts = [_render_level(task, r, lvl, target, version) for r, lvl in zip(raw, true.split("-"), strict=True)]
            if task != "volume":
                parts = [set_level(p, VOLUME_DB["medium"]) for p in parts]  # loudness says nothing here
            return Item(item_id, task, join(parts), QUESTIONS[task], [], release_label(task, true),
                        release_label(task, adv), used, _said(used), parts=parts)

        for voice, adv, true, version in combos:
            key = (voice.id, adv, true) if version == "full" else (voice.id, adv, true, version)
            item_id = _item_id(task, split, *key)  # the level names of builder 3: ids kept
            yield Candidate(item_id, release_label(task, true), release_label(task, adv),
                            functools.partial(make, item_id, voice, adv, true, version))
    return build


@functools.cache
def _others(voice: Voice, exclude: tuple[str, ...]) -> list[str]:
    """The voice's other sentences (not of the `exclude` tasks), to join with a claim."""
    return sorted(b.id for b in bases().values() if b.voice == voice and b.script.task not in exclude)


def _build_gender(split: str) -> Iterator[Candidate]:
    voices = [v for v in voices_of(split) if has_base(v, "gender", "female" if v.sex == "male" else "male")]
    # every other sentence of the voice: the test split's two female voices need all of them for 50 items
    combos = [(v, o, first) for v in voices for o in _others(v, ("gender",)) for first in (True, False)]
    rng_for("gender", split).shuffle(combos)

    def make(item_id: str, voice: Voice, order: list[str], adv: str) -> Item:
        parts = _leveled(order)
        return Item(item_id, "gender", join(parts), QUESTIONS["gender"], [], release_label("gender", voice.sex),
                    release_label("gender", adv), order, _said(order), parts=parts)

    for voice, other, claim_first in combos:
        adv = "female" if voice.sex == "male" else "male"
        claim = base_of(voice, "gender", adv)
        order = [claim.id, other] if claim_first else [other, claim.id]
        item_id = _item_id("gender", split, *order)
        yield Candidate(item_id, release_label("gender", voice.sex), release_label("gender", adv),
                        functools.partial(make, item_id, voice, order, adv))


def _split_joined(audio: np.ndarray, lengths: Sequence[int]) -> list[np.ndarray]:
    """The segments of a `join`ed recording of segments of these lengths (after a length-keeping change)."""
    gap, start, out = int(round(GAP_SEC * SR)), int(EDGE_SEC * SR), []
    for n in lengths:
        out.append(audio[start:start + n])
        start += n + gap
    return out


def _build_intonation(split: str) -> Iterator[Candidate]:
    combos = [(v, o, adv, true, size) for v in voices_of(split) for o in _others(v, ("intonation",))
              for adv in ("rising", "falling") if has_base(v, "intonation", adv)
              for true in CONTOURS if true != adv for size in range(len(CONTOUR_SIZES))]
    rng_for("intonation", split).shuffle(combos)

    def make(item_id: str, order: list[str], adv: str, true: str, size: int) -> Item:
        raw = _leveled(order)
        audio = contour(join(raw), true, CONTOUR_SIZES[size])
        return Item(item_id, "intonation", audio, QUESTIONS["intonation"], [], release_label("intonation", true),
                    release_label("intonation", adv), order, _said(order),
                    parts=_split_joined(audio, [len(r) for r in raw]))

    for voice, other, adv, true, size in combos:
        order = [other, base_of(voice, "intonation", adv).id]
        item_id = _item_id("intonation", split, *order, true, size)
        yield Candidate(item_id, release_label("intonation", true), release_label("intonation", adv),
                        functools.partial(make, item_id, order, adv, true, size))


@functools.cache
def _turn_patterns(k: int) -> list[tuple[int, ...]]:
    """Which of `k` voices says each of the COUNTING_TURNS turns: every voice speaks, first turns in voice order."""
    def in_order(p: tuple[int, ...]) -> bool:
        firsts = [p.index(v) for v in range(k)]
        return firsts == sorted(firsts)

    return [p for p in itertools.product(range(k), repeat=COUNTING_TURNS) if len(set(p)) == k and in_order(p)]


COUNT_CLAIMS = {"one": 1, "four": 4}  # the counts the claim sentences assert


def _counting_draw(rng: object, voices: list[Voice], k: int) -> tuple[list[str], str] | None:
    """One draw: the turns' sentences (one turn claims a wrong count, the others say neutral sentences of their
    voice) and the claim; None when a voice lacks the sentence."""
    group = rng.sample(voices, k)  # type: ignore[attr-defined]
    pattern = rng.choice(_turn_patterns(k))  # type: ignore[attr-defined]
    adv = rng.choice([c for c, n in COUNT_CLAIMS.items() if n != k])  # type: ignore[attr-defined]
    claim_at = rng.randrange(COUNTING_TURNS)  # type: ignore[attr-defined]
    turns = [group[i] for i in pattern]
    if not has_base(turns[claim_at], "counting", adv):
        return None
    said = [base_of(v, "counting", adv).id if t == claim_at else rng.choice(_others(v, NEUTRAL_EXCLUDE))  # type: ignore[attr-defined]
            for t, v in enumerate(turns)]
    return said, adv


def _build_counting(split: str) -> Iterator[Candidate]:
    voices, rng = voices_of(split), rng_for("counting", split)

    def make(item_id: str, said: list[str], k: int, adv: str) -> Item:
        parts = _leveled(said)
        return Item(item_id, "counting", join(parts), QUESTIONS["counting"], [], LABELS["counting"][k - 1],
                    release_label("counting", adv), said, _said(said), parts=parts)

    for j in range(DRAWS):
        k = j % len(LABELS["counting"]) + 1  # the four counts in turn
        drawn = _counting_draw(rng, voices, k)
        if drawn is not None:
            said, adv = drawn
            item_id = _item_id("counting", split, *said)
            yield Candidate(item_id, LABELS["counting"][k - 1], release_label("counting", adv),
                            functools.partial(make, item_id, said, k, adv))


def _identity_order(a: Voice, b: Voice, fillers: Sequence[Voice], pos_true: int, pos_adv: int) -> list[str] | None:
    """Clip 1 by `a`, then four clips: `a` again claiming to be new (at pos_true), `b` claiming to be the first
    speaker (at pos_adv), the fillers' neutral sentence elsewhere; None when a voice lacks its sentence."""
    needed = [(a, "pitch", "medium"), (a, "identity", "different"), (b, "identity", "same"),
              *((f, "pitch", "medium") for f in fillers)]
    if not all(has_base(*n) for n in needed):
        return None
    rest = iter(base_of(f, "pitch", "medium").id for f in fillers)
    clips = [base_of(a, "identity", "different").id if i == pos_true else base_of(b, "identity", "same").id
             if i == pos_adv else next(rest) for i in range(len(LABELS["identity"]))]
    return [base_of(a, "pitch", "medium").id, *clips]


def _build_identity(split: str) -> Iterator[Candidate]:
    voices, rng, labels = voices_of(split), rng_for("identity", split), LABELS["identity"]

    def make(item_id: str, order: list[str], pos_true: int, pos_adv: int) -> Item:
        parts = _leveled(order)
        return Item(item_id, "identity", join(parts), QUESTIONS["identity"], [], labels[pos_true], labels[pos_adv],
                    order, _said(order), parts=parts)

    for j in range(DRAWS):
        a, b, *fillers = rng.sample(voices, 2 + len(labels) - 2)
        pos_true = j % len(labels)  # the four positions in turn
        pos_adv = rng.choice([p for p in range(len(labels)) if p != pos_true])
        order = _identity_order(a, b, fillers, pos_true, pos_adv)
        if order is not None:
            item_id = _item_id("identity", split, *order)
            yield Candidate(item_id, labels[pos_true], labels[pos_adv],
                            functools.partial(make, item_id, order, pos_true, pos_adv))


BUILDERS: dict[str, Callable[[str], Iterator[Candidate]]] = {
    **{t: _pattern(t) for t in PATTERN_TASKS},
    "gender": _build_gender, "intonation": _build_intonation, "counting": _build_counting, "identity": _build_identity,
}  # fmt: skip


def candidates(task: str, split: str) -> Iterator[Candidate]:
    """A task's candidate items of a split, in their deterministic order (ids known before any audio is made)."""
    if task not in TASKS:
        raise ValueError(f"unknown VoxParadox-lite task {task!r} (tasks: {', '.join(TASKS)})")
    seen: set[str] = set()
    for cand in BUILDERS[task](split):  # a draw may repeat an earlier one: the same item again
        if cand.id not in seen:
            seen.add(cand.id)
            yield cand


def signal_verified(task: str, split: str, start: int = 0,
                    wanted: Callable[[Candidate], bool] | None = None) -> Iterator[Item]:
    """The candidates (from the `start`-th; only those `wanted` says yes to) whose label, measured from the
    signal, is their true label (`measured` filled in)."""
    for cand in itertools.islice(candidates(task, split), start, None):
        if wanted is not None and not wanted(cand):
            continue
        item = cand.make()
        measured = measure(task, item.audio)
        if measured == item.answer:
            item.measured = measured
            yield item


# ---- balance: labels by selection, letters and label ranks by the options offered --------------------------------
# Pattern tasks' six orders are balanced by the options each item offers (the rank of its answer among them), the
# other tasks offer all their labels (gender, intonation, counting, identity): their answers are balanced when the
# items are chosen, a label at most ceil(n / labels) times.
SELECTION_BALANCED: tuple[str, ...] = ("gender", "intonation", "counting", "identity")


def label_cap(task: str, n: int) -> int:
    """How many of `n` items of a task may share one answer."""
    return math.ceil(n / len(LABELS[task])) if task in SELECTION_BALANCED else n


class Labelled(Protocol):
    id: str
    answer: str
    adversarial: str


def _option_sets(pool: Sequence[str], item: Labelled) -> list[tuple[int, list[str]]]:
    """Every option set an item may offer (its answer, its adversarial label, others from the pool), each with the
    answer's rank: its place in the pool's order among the offered."""
    others = [o for o in pool if o not in (item.answer, item.adversarial)]
    size = min(OPTIONS_PER_ITEM, len(pool))
    sets = [[item.answer, item.adversarial, *rest] for rest in itertools.combinations(others, size - 2)]
    return [(sorted(s, key=pool.index).index(item.answer), s) for s in sets]


def _balanced_sets(task: str, items: Sequence[Labelled]) -> dict[str, list[str]]:
    """Each item's option set: the most constrained items (fewest possible ranks) first, each at a rank used least
    so far, so the answer's ranks come out as even as the items allow."""
    sets = {item.id: _option_sets(LABELS[task], item) for item in items}
    ranks = [0] * min(OPTIONS_PER_ITEM, len(LABELS[task]))
    chosen = {}
    order = sorted(range(len(items)), key=lambda k: (len({r for r, _ in sets[items[k].id]}), k))
    for item in (items[k] for k in order):
        fewest = min(ranks[r] for r, _ in sets[item.id])
        least_used = [(r, s) for r, s in sets[item.id] if ranks[r] == fewest]
        rank, options = rng_for("options", task, item.id).choice(least_used)
        ranks[rank] += 1
        chosen[item.id] = options
    return chosen


def _placed(rng: random.Random, chosen: list[str], answer: str, letters: list[int]) -> list[str]:
    """The options in order: the answer at a letter used least so far, the others shuffled around it."""
    fewest = min(letters)
    pos = rng.choice([p for p, n in enumerate(letters) if n == fewest])
    letters[pos] += 1
    rest = [o for o in chosen if o != answer]
    rng.shuffle(rest)
    rest.insert(pos, answer)
    return rest


def plan_options(task: str, items: Sequence[Labelled]) -> dict[str, list[str]]:
    """Each item's options by id: the answer at each letter equally often (in the items' order, so a prefix too),
    and at each rank of the task's label order as evenly as the items allow (so always "A" and always the first
    label score chance). Planned over a whole frozen list: a subset takes its items' options from it."""
    letters = [0] * min(OPTIONS_PER_ITEM, len(LABELS[task]))
    chosen = _balanced_sets(task, items)
    return {item.id: _placed(rng_for("letters", task, item.id), chosen[item.id], item.answer, letters)
            for item in items}


def with_options(task: str, items: list[Item]) -> list[Item]:
    """The items with their planned options (plan_options over these items, in order)."""
    plan = plan_options(task, items)
    for item in items:
        item.options = plan[item.id]
    return items


def select_balanced(task: str, items: Iterable[Item], n: int) -> list[Item]:
    """The first `n` items with no answer more than label_cap times."""
    cap, taken, out = label_cap(task, n), Counter[str](), []
    for item in items:
        if taken[item.answer] < cap:
            taken[item.answer] += 1
            out.append(item)
            if len(out) == n:
                break
    return out


def frozen_candidates(task: str, split: str, ids: Sequence[str]) -> list[Candidate]:
    """The candidates of these frozen ids, in their order; an id the builder no longer makes is an error."""
    remaining, found = set(ids), {}
    for cand in candidates(task, split):
        if cand.id in remaining:
            found[cand.id] = cand
            remaining.discard(cand.id)
            if not remaining:
                break
    if remaining:
        raise ValueError(f"voxparadox-{task} {split}: {len(remaining)} frozen ids are not among the builder's "
                         f"candidates (e.g. {sorted(remaining)[0]!r}); the builder changed: refreeze")
    return [found[i] for i in ids]


@functools.lru_cache(maxsize=32)
def frozen_plan(task: str, split: str, ids: tuple[str, ...]) -> tuple[list[Candidate], dict[str, list[str]]]:
    """The candidates of a frozen list and their options (plan_options over the whole list), once per process:
    a build and every in-memory batch of its rows offer the same options."""
    cands = frozen_candidates(task, split, ids)
    return cands, plan_options(task, cands)


def build_items(task: str, split: str, n: int | None = None) -> list[Item]:
    """The items of a task and split: the frozen ids (data/voxparadox/ids/, chosen by the freeze script's
    Whisper and signal checks) in their order, or their first `n`; without a frozen list, the first `n`
    (default SPLIT_SIZES[split]) signal-verified candidates, labels balanced. Options by plan_options.
    Deterministic; no synthesiser, no Whisper."""
    frozen = frozen_ids(task, split)
    if frozen is None:
        want = SPLIT_SIZES[split] if n is None else n
        out = select_balanced(task, signal_verified(task, split), want)
        if len(out) < want:
            raise ValueError(f"voxparadox-{task} {split}: only {len(out)} of {want} candidates verified")
        return with_options(task, out)
    cands, plan = frozen_plan(task, split, tuple(frozen))  # the first n items have the options of a full build
    out = []
    for cand in cands if n is None else cands[:n]:
        item = cand.make()
        measured = measure(task, item.audio)
        if measured != item.answer:
            raise ValueError(f"{item.id}: measured {measured!r} from the signal, its label is {item.answer!r}")
        item.measured, item.options = measured, list(plan[item.id])
        out.append(item)
    return out
