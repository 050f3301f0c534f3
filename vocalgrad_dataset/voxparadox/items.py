"""VoxParadox-lite item builders and the signal measurements that verify them (see voxparadox.py).

Each builder yields candidate items of one task and split in a deterministic order; `measure(task, audio)`
reads the task's label back from the signal alone (also the signal-measuring oracle's answer), and an item
is kept only when the measurement equals its true label.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from vocalgrad_dataset.dsp.schedule import Schedule
from vocalgrad_dataset.voxparadox import (
    LEVELS,
    PATTERN_TASKS,
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
GLIDE_SEC = 0.9
# two glide sizes per direction (more items per voice); a statement already falls at its end: rising must undo it
GLIDE_ST = {"rising": (12.0, 10.0), "falling": (-6.0, -8.0)}
INTONATION_FMIN = 40.0
SAME_VOICE_ST = 1.0  # turns whose F0 medians are closer than this are one voice
QUESTIONS = {
    "pitch": "The recording has three parts spoken by the same person. What is the order of their pitch levels, "
             "from first to last?",
    "volume": "The recording has three parts spoken by the same person. What is the order of their loudness, "
              "from first to last?",
    "speed": "The recording has three parts spoken by the same person. What is the order of their speaking speed, "
             "from first to last?",
    "range": "The recording has three parts spoken by the same person. What is the order of their pitch range "
             "(how much the melody moves), from first to last?",
    "gender": "What is the gender of the speaker?",
    "intonation": "Does the speaker's pitch rise or fall at the very end of the recording?",
    "counting": "How many different speakers are in the recording?",
    "identity": "The recording has several segments separated by pauses. Which later segment is spoken by the "
                "same person as segment 1?",
}
COUNTS = ("one", "two", "three", "four")


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
    names = LEVELS[task]
    ranks = np.argsort(np.argsort(values))
    return "-".join(names[r] for r in ranks)


def _voices_by_turn(x: np.ndarray) -> list[float]:
    return [_median_st(x[a:b]) for a, b in segments(x)]


def _count(x: np.ndarray) -> str | None:
    medians = sorted(m for m in _voices_by_turn(x) if np.isfinite(m))
    if not medians:
        return None
    clusters = 1 + sum(b - a > SAME_VOICE_ST for a, b in itertools.pairwise(medians))
    return COUNTS[clusters - 1] if clusters <= len(COUNTS) else None


def _identity(x: np.ndarray) -> str | None:
    medians = _voices_by_turn(x)
    if len(medians) < 3 or not all(np.isfinite(medians)):
        return None
    dist = [abs(m - medians[0]) for m in medians[1:]]
    best = int(np.argmin(dist))
    return f"segment {best + 2}"


def _intonation(x: np.ndarray) -> str | None:
    st = f0_track(x, INTONATION_FMIN)  # a falling end of a low voice goes below FMIN
    voiced = np.nonzero(np.isfinite(st))[0]
    if len(voiced) < 10:
        return None
    tail = voiced[voiced >= voiced[-1] - int(0.5 * SR / HOP)]
    slope = np.polyfit(tail * HOP / SR, st[tail], 1)[0]
    return "rising" if slope > 0 else "falling"


def _gender(x: np.ndarray) -> str | None:
    m = _median_st(x)
    return None if not np.isfinite(m) else "male" if 100.0 * math.pow(2.0, float(m) / 12) < GENDER_F0_HZ else "female"


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


def glide_end(x: np.ndarray, semitones: float) -> np.ndarray:
    """The last GLIDE_SEC of speech glides linearly to `semitones` (rising > 0, falling < 0)."""
    n = int(np.ceil(len(x) / STEP))
    k = max(2, int(round(GLIDE_SEC * SR / STEP)))
    values = np.zeros(n)
    values[-k:] = np.linspace(0.0, semitones, k)
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
    """A candidate item: its id, known before its audio is made, and how to make it."""

    id: str
    make: Callable[[], Item]


def _options(rng: object, answer: str, adversarial: str, pool: Sequence[str], n: int) -> list[str]:
    others = [o for o in pool if o not in (answer, adversarial)]
    chosen = [answer, adversarial, *rng.sample(others, min(n - 2, len(others)))]  # type: ignore[attr-defined]
    rng.shuffle(chosen)  # type: ignore[attr-defined]
    return chosen


def _item_id(task: str, split: str, *parts: object) -> str:
    import hashlib

    digest = hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:10]
    return f"vpl-{task}-{split}-{digest}"


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

        def make(voice: Voice, adv: str, true: str, version: str) -> Item:
            claims = adv.split("-")
            used = [base_of(voice, task, c) for c in claims]
            raw = [base_audio(b.id) for b in used]
            target = float(np.mean([len(r) for r in raw])) / SR
            parts = [_render_level(task, r, lvl, target, version) for r, lvl in zip(raw, true.split("-"), strict=True)]
            if task != "volume":
                parts = [set_level(p, VOLUME_DB["medium"]) for p in parts]  # loudness says nothing here
            key = (voice.id, adv, true) if version == "full" else (voice.id, adv, true, version)
            rng = rng_for(task, split, *key)
            return Item(_item_id(task, split, *key), task, join(parts), QUESTIONS[task],
                        _options(rng, true, adv, perms, 4), true, adv, [b.id for b in used],
                        " | ".join(b.script.text for b in used), parts=parts)

        for voice, adv, true, version in combos:
            key = (voice.id, adv, true) if version == "full" else (voice.id, adv, true, version)
            yield Candidate(_item_id(task, split, *key), functools.partial(make, voice, adv, true, version))
    return build


def _others(voice: Voice, exclude: Sequence[str]) -> list[str]:
    """The voice's other sentences (not of the `exclude` tasks), to join with a claim."""
    return sorted(b.id for b in bases().values() if b.voice == voice and b.script.task not in exclude)


GENDER_OTHERS_EXCLUDE = ("gender", "identity", "counting")  # sentences that would claim a sex or speakers


def _build_gender(split: str) -> Iterator[Candidate]:
    voices = [v for v in voices_of(split) if has_base(v, "gender", "female" if v.sex == "male" else "male")]
    combos = [(v, o, first) for v in voices for o in _others(v, GENDER_OTHERS_EXCLUDE) for first in (True, False)]
    rng_for("gender", split).shuffle(combos)

    def make(voice: Voice, order: list[str], adv: str) -> Item:
        parts = [set_level(base_audio(b), VOLUME_DB["medium"]) for b in order]
        return Item(_item_id("gender", split, *order), "gender", join(parts), QUESTIONS["gender"], ["male", "female"],
                    voice.sex, adv, order, " | ".join(bases()[b].script.text for b in order), parts=parts)

    for voice, other, claim_first in combos:
        adv = "female" if voice.sex == "male" else "male"
        claim = base_of(voice, "gender", adv)
        order = [claim.id, other] if claim_first else [other, claim.id]
        yield Candidate(_item_id("gender", split, *order), functools.partial(make, voice, order, adv))


def _build_intonation(split: str) -> Iterator[Candidate]:
    combos = [(v, o, adv, size) for v in voices_of(split) for o in _others(v, ("intonation",))
              for adv in ("rising", "falling") for size in (0, 1) if has_base(v, "intonation", adv)]
    rng_for("intonation", split).shuffle(combos)

    def make(voice: Voice, other: str, adv: str, size: int) -> Item:
        true = "falling" if adv == "rising" else "rising"
        claim = base_of(voice, "intonation", adv)
        end = glide_end(base_audio(claim.id), GLIDE_ST[true][size])
        parts = [set_level(base_audio(other), VOLUME_DB["medium"]), set_level(end, VOLUME_DB["medium"])]
        return Item(_item_id("intonation", split, voice.id, other, adv, size), "intonation", join(parts),
                    QUESTIONS["intonation"], ["rising", "falling"], true, adv, [other, claim.id],
                    " | ".join(bases()[b].script.text for b in (other, claim.id)), parts=parts)

    for voice, other, adv, size in combos:
        yield Candidate(_item_id("intonation", split, voice.id, other, adv, size),
                        functools.partial(make, voice, other, adv, size))


def _build_counting(split: str) -> Iterator[Candidate]:
    voices = voices_of(split)
    combos = [(group, adv, repeat) for k in (2, 3) for group in itertools.permutations(voices, k)
              for adv in ("one", "four") for repeat in (False, True) if all(has_base(v, "counting", adv) for v in group)]
    rng_for("counting", split).shuffle(combos)

    def make(group: tuple[Voice, ...], turns: list[Voice], adv: str, repeat: bool) -> Item:
        used = [base_of(v, "counting", adv) for v in turns]
        parts = [set_level(base_audio(b.id), VOLUME_DB["medium"]) for b in used]
        true = COUNTS[len(group) - 1]
        rng = rng_for("counting", split, *[v.id for v in group], adv, repeat)
        return Item(_item_id("counting", split, *[v.id for v in turns], adv), "counting", join(parts),
                    QUESTIONS["counting"], _options(rng, true, adv, COUNTS, 4), true, adv, [b.id for b in used],
                    " | ".join(b.script.text for b in used), parts=parts)

    for group, adv, repeat in combos:
        turns = [*group, group[0]] if repeat else list(group)  # a voice may come back after the others
        yield Candidate(_item_id("counting", split, *[v.id for v in turns], adv),
                        functools.partial(make, group, turns, adv, repeat))


def _build_identity(split: str) -> Iterator[Candidate]:
    voices = voices_of(split)
    combos = [(a, b, c, n, pos) for a, b, c in itertools.permutations(voices, 3) for n in (2, 3)
              for pos in itertools.permutations(range(n), 2)
              if has_base(a, "pitch", "medium") and has_base(a, "identity", "different")
              and has_base(b, "identity", "same") and has_base(c, "pitch", "medium")]
    rng_for("identity", split).shuffle(combos)

    def make(order: list[str], n: int, pos_true: int, pos_adv: int) -> Item:
        parts = [set_level(base_audio(x), VOLUME_DB["medium"]) for x in order]
        options = [f"segment {i + 2}" for i in range(n)]
        return Item(_item_id("identity", split, *order), "identity", join(parts), QUESTIONS["identity"], options,
                    f"segment {pos_true + 2}", f"segment {pos_adv + 2}", order,
                    " | ".join(bases()[x].script.text for x in order), parts=parts)

    for a, b, c, n, (pos_true, pos_adv) in combos:
        query = base_of(a, "pitch", "medium")
        cand: list[str] = [""] * n
        cand[pos_true] = base_of(a, "identity", "different").id  # the same voice, claiming to be new
        cand[pos_adv] = base_of(b, "identity", "same").id  # another voice, claiming to be the first
        for i in range(n):
            cand[i] = cand[i] or base_of(c, "pitch", "medium").id
        order = [query.id, *cand]
        yield Candidate(_item_id("identity", split, *order), functools.partial(make, order, n, pos_true, pos_adv))


BUILDERS: dict[str, Callable[[str], Iterator[Candidate]]] = {
    **{t: _pattern(t) for t in PATTERN_TASKS},
    "gender": _build_gender, "intonation": _build_intonation, "counting": _build_counting, "identity": _build_identity,
}  # fmt: skip


def candidates(task: str, split: str) -> Iterator[Candidate]:
    """A task's candidate items of a split, in their deterministic order (ids known before any audio is made)."""
    if task not in TASKS:
        raise ValueError(f"unknown VoxParadox-lite task {task!r} (tasks: {', '.join(TASKS)})")
    seen: set[str] = set()
    for cand in BUILDERS[task](split):  # identity's 2-segment items do not use voice c: the same item again
        if cand.id not in seen:
            seen.add(cand.id)
            yield cand


def signal_verified(task: str, split: str, start: int = 0) -> Iterator[Item]:
    """The candidates (from the `start`-th) whose label, measured from the signal, is their true label
    (`measured` filled in)."""
    for cand in itertools.islice(candidates(task, split), start, None):
        item = cand.make()
        measured = measure(task, item.audio)
        if measured == item.answer:
            item.measured = measured
            yield item


def build_items(task: str, split: str, n: int | None = None) -> list[Item]:
    """The items of a task and split: the frozen ids (data/voxparadox/ids/, chosen by the freeze script's
    Whisper and signal checks) in their order, or their first `n`; without a frozen list, the first `n`
    (default SPLIT_SIZES[split]) signal-verified candidates. Deterministic; no synthesiser, no Whisper."""
    frozen = frozen_ids(task, split)
    if frozen is None:
        want = SPLIT_SIZES[split] if n is None else n
        out = list(itertools.islice(signal_verified(task, split), want))
        if len(out) < want:
            raise ValueError(f"voxparadox-{task} {split}: only {len(out)} of {want} candidates verified")
        return out
    wanted = frozen if n is None else frozen[:n]
    by_id = {}
    remaining = set(wanted)
    for cand in candidates(task, split):
        if cand.id in remaining:
            by_id[cand.id] = cand
            remaining.discard(cand.id)
            if not remaining:
                break
    if remaining:
        raise ValueError(f"voxparadox-{task} {split}: {len(remaining)} frozen ids are not among the builder's "
                         f"candidates (e.g. {sorted(remaining)[0]!r}); the builder changed: refreeze")
    out = []
    for item_id in wanted:
        item = by_id[item_id].make()
        measured = measure(task, item.audio)
        if measured != item.answer:
            raise ValueError(f"{item_id}: measured {measured!r} from the signal, its label is {item.answer!r}")
        item.measured = measured
        out.append(item)
    return out
