"""Probing maths: pooling, the probe trainer (batched vs one at a time, a hand-computed solution), metrics,
direction alignment, feature storage, and the mel reference probe on real demo speech."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from probing.directions import alignment, category_direction, cosine_matrix, pair_means
from probing.extract import mel_frames, pool_segments, quarter_ends, resolve_layers, segment_matrix
from probing.probes import (
    ProbeJob,
    ProbeSettings,
    fit_jobs,
    grouped_folds,
    init_linear,
    probe_metrics,
    train_batched,
    train_reference,
)
from probing.store import FeatureSet, FeatureWriter, RowTable, StoreError, config_hash

# ---- pooling ------------------------------------------------------------------------------------------


def test_pooling_matches_segment_means_for_long_sequences() -> None:
    rng = np.random.default_rng(0)
    for length in (16, 17, 40, 1500):
        x = rng.normal(size=(length, 3))
        bounds = np.linspace(0, length, 17).astype(int)  # the published boundaries
        want = np.concatenate([x[bounds[k] : bounds[k + 1]].mean(0) for k in range(16)])
        np.testing.assert_allclose(pool_segments(x), want, rtol=1e-5, atol=1e-6)


def test_pooling_short_sequences_take_the_midpoint_frame() -> None:
    x = np.arange(5, dtype=np.float32)[:, None] * 10  # L = 5 < 16: every segment is one frame
    got = pool_segments(x)
    # Boundaries floor(k * 5 / 16): segments 3, 6, 9, 12, 15 hold frames 0..4; the empty ones take the
    # frame under their midpoint floor((k + 0.5) * 5 / 16).
    want = [0, 0, 0, 0, 10, 10, 10, 20, 20, 20, 30, 30, 30, 40, 40, 40]
    np.testing.assert_array_equal(got, want)
    assert [10 * math.floor((k + 0.5) * 5 / 16) for k in (0, 1, 2, 4, 5, 7, 8)] == [0, 0, 0, 10, 10, 20, 20]
    assert set(got.tolist()) == {0, 10, 20, 30, 40}  # every frame is used, in time order
    np.testing.assert_array_equal(pool_segments(np.ones((1, 4))), np.ones(64))  # L = 1: the one frame
    assert np.allclose(segment_matrix(7).sum(1), 1)  # every segment is a proper average


def test_pooling_empty_sequence_is_an_error() -> None:
    with pytest.raises(ValueError, match="0 frames"):
        pool_segments(np.zeros((0, 8)))


def test_quarter_ends_and_layers() -> None:
    assert quarter_ends(8) == [1, 3, 5, 7]
    assert quarter_ends(1) == [0, 0, 0, 0]
    assert resolve_layers(None, 32) == [0, 8, 16, 24, 32]
    assert resolve_layers("all", 2) == [0, 1, 2]
    assert resolve_layers("0,-1", 28) == [0, 28]
    with pytest.raises(ValueError, match="outside"):
        resolve_layers("40", 28)


# ---- probes -------------------------------------------------------------------------------------------


def _logistic_adamw_by_hand(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: float, steps: int,
                            lr: float = 1e-3, wd: float = 1e-4) -> tuple[np.ndarray, float]:
    """Full-batch logistic regression with AdamW written out in float64 (betas 0.9/0.999, eps 1e-8)."""
    mu, sd = x.mean(0), x.std(0)
    xs = (x - mu) / sd
    theta = np.concatenate([w, [b]]).astype(np.float64)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for t in range(1, steps + 1):
        z = xs @ theta[:-1] + theta[-1]
        g = (1 / (1 + np.exp(-z)) - y) / len(y)  # d mean(BCE) / dz
        grad = np.concatenate([xs.T @ g, [g.sum()]])
        theta *= 1 - lr * wd  # decoupled weight decay, on the bias too (model.parameters())
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        theta -= lr / (1 - 0.9**t) * m / (np.sqrt(v) / math.sqrt(1 - 0.999**t) + 1e-8)
    return theta[:-1], float(theta[-1])


def test_probe_reproduces_hand_computed_logistic_solution() -> None:
    # Separable along feature 0; feature 1 has the same values in both classes. One batch per epoch, so 200 epochs = 200 steps.
    x = np.array([[-3, 1], [-2, -1], [-1.5, 0.5], [-1, -0.5], [1, 1], [1.5, -1], [2, 0.5], [3, -0.5]],
                 dtype=np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    settings = ProbeSettings(epochs=200, seed=7)
    fit = train_batched(x[None], y[None], settings)
    w0, b0 = init_linear(2, 7)
    w, b = _logistic_adamw_by_hand(x.astype(np.float64), y, w0.double().numpy(), float(b0), 200)
    np.testing.assert_allclose(fit.weight[0], w, atol=1e-5)
    assert abs(fit.bias[0] - b) < 1e-5
    # The first step moves every parameter by lr against its gradient's sign (Adam's normalisation).
    one = train_batched(x[None], y[None], ProbeSettings(epochs=1, seed=7))
    assert np.allclose(np.abs(one.weight[0] - w0.numpy() * (1 - 1e-7)), 1e-3, atol=1e-6)
    # Trained longer, the probe leans on the informative feature and separates the set.
    long = train_batched(x[None], y[None], ProbeSettings(epochs=3000, seed=7))
    assert long.weight[0, 0] > 3 * abs(long.weight[0, 1])
    assert probe_metrics((((x - long.mean[0]) / long.scale[0]) @ long.weight[0]) + long.bias[0], y)["accuracy"] == 1.0


def test_batched_training_equals_one_probe_at_a_time() -> None:
    rng = np.random.default_rng(1)
    n_probes, n, d = 3, 700, 24  # 700 rows: two batches of 512 + 188, so the seeded shuffle matters
    x = (rng.normal(size=(n_probes, n, d)) * rng.uniform(0.1, 8, size=d) + 5).astype(np.float32)
    y = (x[:, :, 0] + rng.normal(scale=4, size=(n_probes, n)) > 5).astype(np.float32)
    settings = ProbeSettings(epochs=25, seed=3)
    batched = train_batched(x, y, settings)
    chunked = train_batched(x, y, ProbeSettings(epochs=25, seed=3, max_step_bytes=1))  # one probe per chunk
    for p in range(n_probes):
        ref = train_reference(x[p], y[p], settings)  # nn.Linear + DataLoader + autograd + torch AdamW
        assert np.abs(ref.weight[0] - batched.weight[p]).max() < 1e-5
        assert abs(ref.bias[0] - batched.bias[p]) < 1e-5
        np.testing.assert_allclose(ref.mean[0], batched.mean[p], rtol=1e-6)
    np.testing.assert_allclose(chunked.weight, batched.weight, atol=1e-6)
    # The GPU layout (float16 storage, each batch standardised on the fly) gives the same probes.
    half = x.astype(np.float16)
    on_the_fly = train_batched(half, y, ProbeSettings(epochs=25, seed=3, standardize_upfront=False))
    upfront = train_batched(half, y, settings)
    np.testing.assert_allclose(on_the_fly.weight, upfront.weight, atol=1e-5)


def test_fit_jobs_groups_by_shape_and_scores_tests() -> None:
    rng = np.random.default_rng(2)
    jobs = []
    for i, d in enumerate((4, 4, 6)):
        xtr = rng.normal(size=(50, d)).astype(np.float32)
        xte = rng.normal(size=(20 + i, d)).astype(np.float32)
        jobs.append(ProbeJob((f"r/{i}", "c"), xtr, (xtr[:, 0] > 0).astype(int), lambda xte=xte: xte,
                             (xte[:, 0] > 0).astype(int)))
    out = fit_jobs(jobs, ProbeSettings(epochs=300, batch_size=8))
    assert set(out) == {j.key for j in jobs}
    for job in jobs:
        fit, metrics = out[job.key]
        assert fit.weight.shape == (1, job.shape[1]) and metrics["n"] == len(job.y_test)
        assert metrics["accuracy"] > 0.8


def test_probe_metrics_and_intervals() -> None:
    labels = np.array([1, 1, 1, 1, 0, 0])
    logits = np.array([2.0, 1.0, -1.0, 3.0, -2.0, 0.5])
    m = probe_metrics(logits, labels)
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["per_direction"]["increase"]["accuracy"] == 0.75
    assert m["per_direction"]["decrease"]["accuracy"] == 0.5
    assert m["balanced_accuracy"] == pytest.approx(0.625)
    assert m["ci_low"] < m["accuracy"] < m["ci_high"]
    assert m["increase_ratio"] == pytest.approx(4 / 6)


def test_grouped_folds_never_split_a_group() -> None:
    groups = ["a", "a", "b", "c", "c", "c", "d"]
    folds = grouped_folds(groups, 2)
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(groups)))
    for f in folds:
        others = set(np.setdiff1d(np.arange(len(groups)), f))
        assert not {groups[i] for i in f} & {groups[i] for i in others}
    with pytest.raises(ValueError, match="at least 5 groups"):
        grouped_folds(groups, 5)


# ---- direction alignment ----------------------------------------------------------------------------------


def _rows(n_sources: int) -> RowTable:
    cols: dict[str, list[str]] = {f: [] for f in ("benchmark_clip_id", "label", "direction", "curve", "tier",
                                                 "source_item_id", "source_clip_id", "speaker_id")}
    for s in range(n_sources):
        for curve in ("linear", "jump"):
            for direction in ("up", "down"):
                cols["benchmark_clip_id"].append(f"i{s}__c{s}__{curve}__low__{direction}")
                cols["label"].append("increase" if direction == "up" else "decrease")
                cols["direction"].append(direction)
                cols["curve"].append(curve)
                cols["tier"].append("low")
                cols["source_item_id"].append(f"i{s}")
                cols["source_clip_id"].append(f"c{s}")
                cols["speaker_id"].append(f"s{s}")
    return RowTable(cols)


def test_direction_is_mean_of_paired_differences() -> None:
    rows = _rows(3)
    rng = np.random.default_rng(3)
    base = rng.normal(size=(len(rows), 5))
    shift = np.array([1.0, -2.0, 0.0, 0.5, 0.0])
    x = base.copy()
    for i, d in enumerate(rows["direction"]):
        if d == "up":  # up = its paired down + shift: every difference is exactly `shift`
            x[i] = base[i + 1] + shift
    vec, n = category_direction(x, rows)
    np.testing.assert_allclose(vec, shift, atol=1e-12)
    assert n == 3
    vec2, _ = category_direction(x[:-1], RowTable({k: v[:-1] for k, v in rows.columns.items()}))
    np.testing.assert_allclose(vec2, shift, atol=1e-12)  # an unpaired row is ignored


def test_cosines_and_pair_means() -> None:
    vecs = {"a": np.array([1.0, 0.0]), "b": np.array([2.0, 0.0]), "c": np.array([-1.0, 0.0])}
    cos = cosine_matrix(vecs)
    np.testing.assert_allclose(cos, [[1, 1, -1], [1, 1, -1], [-1, -1, 1]])
    means = pair_means(cos)
    assert means["n_pairs"] == 3
    assert means["mean_signed"] == pytest.approx(-1 / 3) and means["mean_absolute"] == pytest.approx(1.0)
    rec = alignment({**vecs, "z": np.zeros(2)})
    assert rec["n_pairs"] == 3 and rec["cosine"][3][0] is None  # a zero direction has no cosine
    json.dumps(rec)


# ---- storage ------------------------------------------------------------------------------------------


def _header(**kw: object) -> dict:
    return {"model": "m", "config_hash": config_hash({"model": "m", **kw})}


def test_store_round_trip_is_float16_and_lazy(tmp_path) -> None:
    rows = [{"benchmark_clip_id": f"id{i}", "label": "increase" if i % 2 else "decrease"} for i in range(3)]
    w = FeatureWriter(tmp_path, _header())
    a = np.arange(6, dtype=np.float32).reshape(3, 2) / 3
    w.write(["u0"], rows, {"mel/0": a, "text/1": a[:, :1]})
    w.write(["u1"], [], {}, errors=[{"benchmark_clip_id": "bad", "error": "boom"}])
    w.finish()
    fs = FeatureSet(tmp_path)
    assert fs.representations == {"mel/0": 2, "text/1": 1}
    got = fs.load("mel/0")
    np.testing.assert_array_equal(got, a.astype(np.float16).astype(np.float32))
    assert fs.rows.labels.tolist() == [0, 1, 0]
    assert fs.manifest["errors"][0]["benchmark_clip_id"] == "bad" and fs.manifest["complete"]
    with pytest.raises(KeyError, match="no representation"):
        fs.load("text/9")
    assert FeatureWriter(tmp_path, _header()).done_units == {"u0", "u1"}


def test_store_refuses_other_settings_and_names_broken_files(tmp_path) -> None:
    FeatureWriter(tmp_path, _header()).write(["u0"], [{"benchmark_clip_id": "x", "label": "increase"}],
                                             {"mel/0": np.ones((1, 2), np.float32)})
    with pytest.raises(StoreError, match="another extraction"):
        FeatureWriter(tmp_path, _header(layers="all"))
    (tmp_path / "shard-00000.safetensors").unlink()
    with pytest.raises(StoreError, match="shard-00000.safetensors"):
        FeatureSet(tmp_path).load("mel/0")
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="manifest.json"):
        FeatureSet(tmp_path)


# ---- the mel reference probe on real speech ---------------------------------------------------------------


def _mel_split(config: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    from harness.data import open_source

    src = open_source(split, "demo")
    rows = list(src.rows(config, src.units(config)))
    x = np.stack([pool_segments(mel_frames(r["audio"]["array"], r["audio"]["sampling_rate"])) for r in rows])
    return x, np.array([r["label"] == "increase" for r in rows], dtype=np.float32)


def test_mel_probe_separates_volume_and_noise_direction() -> None:
    # SPEC §6 probe on the demo source: train = the LibriVox speaker (120 clips), test = 3 other speakers (72).
    jobs = []
    for config in ("volume", "noise"):
        xtr, ytr = _mel_split(config, "train")
        xte, yte = _mel_split(config, "test")
        assert xtr.shape == (120, 16 * 128) and xte.shape == (72, 16 * 128)
        jobs.append(ProbeJob(("mel/0", config), xtr, ytr, xte, yte))
    out = fit_jobs(jobs, ProbeSettings())
    for config in ("volume", "noise"):
        metrics = out[("mel/0", config)][1]
        # 72 test clips: chance is 50 % and its 95 % interval ends near 62 %.
        assert metrics["accuracy"] >= 0.75, (config, metrics)
        assert metrics["ci_low"] > 0.5
