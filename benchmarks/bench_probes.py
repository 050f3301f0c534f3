"""Probe training wall time: all probes as one batched computation vs one probe at a time.

  batched      probing.probes.train_batched over every (category x layer) probe at once
  published    probing.probes.train_reference per probe: nn.Linear + DataLoader + autograd + AdamW, the way
               the published code trains each (category, layer) probe separately
  one-by-one   train_batched called with one probe at a time (our kernels, no batching across probes)

CPU (default): 9 categories x 8 layers x 2,000 clips x 1,024 dims, random features, 20 epochs.
`--device cuda`: the published shape, 9 x 29 layers x 12,000 clips x 4,096 dims, float16 storage, 200 epochs.
The one-at-a-time ways are timed on `--sample` probes and scaled to the full count (printed as such);
the sampled probes' weights are compared with the batched ones (same seed, same batches).

    python benchmarks/bench_probes.py [--device cuda] [--epochs N] [--sample K] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probing.probes import ProbeSettings, train_batched, train_reference  # noqa: E402

# CPU epochs are reduced from 200 to 20: enough that the per-probe fixed costs (train statistics, one
# standardisation pass) weigh as little as they do in a real run; --epochs 5 shows them dominating.
SHAPES = {"cpu": (9, 8, 2000, 1024, 20), "cuda": (9, 29, 12000, 4096, 200)}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def make_data(n_probes: int, n: int, d: int, device: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random features (float32 on CPU, float16 on CUDA, filled in chunks) and labels weakly tied to them."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    x = torch.empty((n_probes, n, d), dtype=dtype, device=device)
    for p in range(n_probes):
        x[p] = torch.randn((n, d), generator=gen, device=device).to(dtype)
    # Labels depend on the first feature so the probes have something to learn.
    y = ((x[:, :, 0].float() + torch.randn((n_probes, n), generator=gen, device=device)) > 0).float()
    return x, y


def run(device: str, epochs: int | None, sample: int, layers: int | None) -> dict:
    """Time the three ways; returns a JSON-able record."""
    cats, n_layers, n, d, default_epochs = SHAPES["cuda" if device.startswith("cuda") else "cpu"]
    n_layers = layers or n_layers
    epochs = epochs or default_epochs
    n_probes = cats * n_layers
    settings = ProbeSettings(epochs=epochs, device=device)
    x, y = make_data(n_probes, n, d, device)
    # Warm-up (not timed): the first optimizer import and kernel launches cost seconds once per process.
    warm = ProbeSettings(epochs=1, device=device)
    train_batched(x[:1, :64], y[:1, :64], warm)
    train_reference(x[0, :64].float().cpu(), y[0, :64].cpu(), warm)
    print(f"{cats} categories x {n_layers} layers = {n_probes} probes, {n} clips x {d} dims, {epochs} epochs, "
          f"{x.dtype} on {device}", flush=True)
    _sync(device)
    t = time.perf_counter()
    fit = train_batched(x, y, settings, progress=True)
    _sync(device)
    batched = time.perf_counter() - t
    print(f"batched      {batched:9.2f} s  ({n_probes} probes)", flush=True)
    picks = np.linspace(0, n_probes - 1, min(sample, n_probes)).round().astype(int)
    pub, one, diff = 0.0, 0.0, 0.0
    for p in picks:
        _sync(device)
        t = time.perf_counter()
        ref = train_reference(x[p].float().cpu(), y[p].cpu(), settings)
        _sync(device)
        pub += time.perf_counter() - t
        t = time.perf_counter()
        alone = train_batched(x[p : p + 1], y[p : p + 1], settings)
        _sync(device)
        one += time.perf_counter() - t
        diff = max(diff, float(np.abs(ref.weight[0] - fit.weight[p]).max()), float(np.abs(alone.weight[0] - fit.weight[p]).max()))
    scale = n_probes / len(picks)
    record = {
        "device": device, "probes": n_probes, "categories": cats, "layers": n_layers, "clips": n, "dims": d,
        "epochs": epochs, "storage_dtype": str(x.dtype), "batched_s": batched,
        "published_one_by_one_s": pub * scale, "ours_one_by_one_s": one * scale, "sampled_probes": len(picks),
        "max_weight_diff_vs_batched": diff,
    }
    record["ratio_vs_published"] = record["published_one_by_one_s"] / batched
    record["ratio_vs_ours_one_by_one"] = record["ours_one_by_one_s"] / batched
    print(f"published    {record['published_one_by_one_s']:9.2f} s  (measured on {len(picks)} probes, x{scale:.1f})")
    print(f"one-by-one   {record['ours_one_by_one_s']:9.2f} s  (measured on {len(picks)} probes, x{scale:.1f})")
    print(f"max |weight difference| of the sampled probes vs batched: {diff:.2e}")
    print(f"ratio batched vs published one-by-one: {record['ratio_vs_published']:.1f}x (target >= 10x)")
    print(f"ratio batched vs our one-by-one:       {record['ratio_vs_ours_one_by_one']:.1f}x")
    return record


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu | cuda (cuda: the published 9 x 29 x 12,000 x 4,096 shape)")
    p.add_argument("--epochs", type=int, default=None, help="default 20 on CPU, 200 on CUDA")
    p.add_argument("--layers", type=int, default=None, help="layers per category (default 8 CPU, 29 CUDA)")
    p.add_argument("--sample", type=int, default=9, help="probes timed one at a time, then scaled")
    p.add_argument("--out", default=None, help="also write the record as JSON here")
    ns = p.parse_args(argv)
    if ns.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is visible", file=sys.stderr)
        return 2
    record = run(ns.device, ns.epochs, ns.sample, ns.layers)
    if ns.out:
        from harness.results import atomic_write_text

        atomic_write_text(ns.out, json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
