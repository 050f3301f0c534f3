"""Linear probes exactly as SPEC §6 trains them, all of a run at once as one batched computation.

The published recipe, per (category, representation, layer): standardise with train statistics, one
Linear(d, 1), BCEWithLogits, AdamW (lr 1e-3, weight decay 1e-4, applied to weight and bias), batch 512,
200 epochs, a fresh seeded shuffle each epoch. `train_reference` is that recipe written the ordinary way
(nn.Linear, DataLoader, autograd) for one probe. `train_batched` trains P probes that share (n, d) as
one computation: a (P, batch, d) gather, two batched matmuls for logits and gradients, and one AdamW
step over (P, d) parameters. AdamW is elementwise and every probe's loss is its own batch mean, so each
probe follows exactly the trajectory it would alone; tests hold the two to 1e-5.

Seeding: every probe starts from `init_linear(d, seed)` and sees the batches a DataLoader(shuffle=True)
with `generator=torch.Generator().manual_seed(seed)` yields (`epoch_batches`), so the reference and the
batched trainer see the same batches.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
import torch

from harness.metrics import binomial_interval


@dataclass(frozen=True)
class ProbeSettings:
    """SPEC §6 probe hyper-parameters (epochs may be reduced for smoke runs and benchmarks)."""

    epochs: int = 200
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 1234
    device: str = "auto"  # "auto": CUDA when present, else CPU
    # Upper bound on one step's (P, batch, d) float32 working set; more probes are trained in chunks
    # (None: 64 MiB on CPU, where a chunk that stays in cache between gather and matmuls is fastest, 8 GiB on GPU).
    max_step_bytes: int | None = None
    # Upper bound on one batched group's float16 features (None: 16 GiB on CUDA, 2 GiB on CPU).
    max_group_bytes: int | None = None
    # Standardise all features once before training (None: on CPU) or each gathered batch (GPU default).
    standardize_upfront: bool | None = None
    # On CPU, compute gradients with the fused one-pass kernel (False: gather + batched matmuls, as on GPU).
    fused_cpu: bool = True


@dataclass
class ProbeFit:
    """Trained probes: logits = ((x - mean) / scale) @ weight + bias, one row per probe."""

    weight: np.ndarray  # (P, d)
    bias: np.ndarray  # (P,)
    mean: np.ndarray  # (P, d) train means
    scale: np.ndarray  # (P, d) train standard deviations (1 where a feature is constant)

    def __len__(self) -> int:
        return len(self.bias)


def resolve_device(name: str) -> torch.device:
    """"auto" -> cuda when available, else cpu; anything else as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def standardizer(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, population std) over the rows of (n, d) in float32; constant features get scale 1."""
    var, mean = torch.var_mean(x.float(), dim=0, correction=0)  # torch's reduction is Welford: stable
    scale = var.sqrt()
    return mean, torch.where(scale > 0, scale, torch.ones_like(scale))


def init_linear(d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.Linear(d, 1)'s default init U(-1/sqrt(d), 1/sqrt(d)) for weight (d,) and bias (1,), drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    bound = 1.0 / math.sqrt(d)
    w = (torch.rand(d, generator=g, dtype=torch.float64) * 2 - 1) * bound
    b = (torch.rand(1, generator=g, dtype=torch.float64) * 2 - 1) * bound
    return w.float(), b.float()


def epoch_batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch's index batches, drawn from `generator` exactly as a seeded DataLoader(shuffle=True) draws them."""
    from torch.utils.data import BatchSampler, RandomSampler

    # The DataLoader iterator first takes a base seed from the loader's generator, then the sampler draws
    # its permutation (and, once exhausted, one more it never yields): mirror both so the RNG stays in step.
    torch.empty((), dtype=torch.int64).random_(generator=generator)
    sampler = BatchSampler(RandomSampler(range(n), generator=generator), batch_size, drop_last=False)
    return [torch.tensor(b, dtype=torch.long) for b in sampler]


def _as_tensor(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))


def train_batched(x: Any, y: Any, settings: ProbeSettings = ProbeSettings(), progress: bool = False) -> ProbeFit:
    """Train P probes on (P, n, d) features (any float dtype; float16 stays float16 in memory) and (P, n) labels."""
    x, y = _as_tensor(x), _as_tensor(y)
    if x.ndim != 3 or y.shape != x.shape[:2]:
        raise ValueError(f"train_batched wants x (P, n, d) and y (P, n); got {tuple(x.shape)} and {tuple(y.shape)}")
    n_probes, n, d = x.shape
    if n == 0:
        raise ValueError("no training rows")
    per_probe = settings.batch_size * d * 4 * 3  # gathered batch, its standardised copy, slack
    budget = settings.max_step_bytes or ((8 << 30) if resolve_device(settings.device).type == "cuda" else (64 << 20))
    chunk = max(1, min(n_probes, budget // max(per_probe, 1)))
    if _fused(settings):  # no gathered batch to keep in cache: one chunk keeps both cores busy with every probe
        chunk = n_probes
    parts = [_train_chunk(x[s : s + chunk], y[s : s + chunk], settings, progress) for s in range(0, n_probes, chunk)]
    return ProbeFit(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("weight", "bias", "mean", "scale")))


@numba.njit(parallel=True, fastmath=True, cache=True)
def fused_logistic_grad(data, y, idx, w, b, grad_w, grad_b):  # noqa: ANN001 - numba kernel on numpy arrays
    """Mean BCE-with-logits gradients of P linear probes on the rows `idx` of (P, n, d) standardised data.

    Each row is read once from memory: its logit is a dot product, and the gradient update reuses the row
    while it is still in L1, where a gather + two batched matmuls stream every batch three times.
    """
    n_probes, _, d = data.shape
    m = idx.shape[0]
    for p in numba.prange(n_probes):
        for j in range(d):
            grad_w[p, j] = 0.0
        gb = 0.0
        for k in range(m):
            row = data[p, idx[k]]
            z = b[p]
            for j in range(d):
                z += row[j] * w[p, j]
            g = np.float32((1.0 / (1.0 + math.exp(-z)) - y[p, idx[k]]) / m)  # float32: the row update vectorises
            gb += g
            for j in range(d):
                grad_w[p, j] += g * row[j]
        grad_b[p] = gb


def _fused(settings: ProbeSettings) -> bool:
    """Whether the fused CPU gradient kernel trains these probes."""
    return settings.fused_cpu and resolve_device(settings.device).type == "cpu" and settings.standardize_upfront is not False


def _stats(data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, d) means and scales of (P, n, d) features, probe by probe (one probe's float32 copy at a time)."""
    stats = [standardizer(data[p]) for p in range(data.shape[0])]
    return torch.stack([m for m, _ in stats]), torch.stack([s for _, s in stats])


def _train_chunk(x: torch.Tensor, y: torch.Tensor, settings: ProbeSettings, progress: bool) -> ProbeFit:
    from vocalgrad_dataset.progress import progress as progress_bar

    device = resolve_device(settings.device)
    n_probes, n, d = x.shape
    upfront = settings.standardize_upfront if settings.standardize_upfront is not None else device.type == "cpu"
    y = y.to(device=device, dtype=torch.float32)
    if upfront:
        # Standardise once (one pass, as the published code does); batches are then plain gathers.
        data = x.to(device=device, dtype=torch.float32, copy=True).contiguous()
        mean, scale = _stats(data)
        data.sub_(mean[:, None]).div_(scale[:, None])
    else:
        # Keep the storage dtype (float16 halves GPU memory) and standardise each gathered batch in float32;
        # (x - mean) / scale is elementwise, so this equals standardising up front.
        data = x.to(device)
        mean, scale = _stats(data)
    w0, b0 = init_linear(d, settings.seed)
    weight = w0.to(device).repeat(n_probes, 1)[:, None, :].contiguous().requires_grad_(True)  # (P, 1, d)
    bias = b0.to(device).repeat(n_probes, 1).contiguous().requires_grad_(True)  # (P, 1)
    # fused: one kernel for the whole (P, d) update (elementwise, so each probe still updates on its own)
    opt = torch.optim.AdamW([weight, bias], lr=settings.lr, weight_decay=settings.weight_decay, fused=True)
    gen = torch.Generator().manual_seed(settings.seed)
    # Gather buffers reused across steps (one per batch length): on CPU a fresh (P, batch, d) tensor
    # per step costs more in page faults than the matmuls themselves.
    buffers: dict[int, torch.Tensor] = {}
    fused = upfront and _fused(settings)
    if fused:
        y_np = y.numpy()
        grad_w = torch.zeros((n_probes, d), dtype=torch.float32)
        grad_b = torch.zeros(n_probes, dtype=torch.float32)
    for _ in progress_bar(range(settings.epochs), desc=f"{n_probes} probes x {d} dims", disable=None if progress else True,
                  leave=False):
        for idx in epoch_batches(n, settings.batch_size, gen):
            if fused:  # CPU: one pass over each batch row (dot, then gradient from L1), no gathered copy
                fused_logistic_grad(data.numpy(), y_np, idx.numpy(), weight.detach()[:, 0].numpy(),
                                    bias.detach()[:, 0].numpy(), grad_w.numpy(), grad_b.numpy())
                weight.grad, bias.grad = grad_w[:, None, :], grad_b[:, None]
                opt.step()
                continue
            idx = idx.to(device)
            if len(idx) not in buffers:
                buffers[len(idx)] = torch.empty((n_probes, len(idx), d), dtype=data.dtype, device=device)
            xb = torch.index_select(data, 1, idx, out=buffers[len(idx)])
            if not upfront:
                xb = (xb.float() - mean[:, None]) / scale[:, None]
            with torch.no_grad():
                z = torch.baddbmm(bias[:, :, None], xb, weight.transpose(1, 2))  # (P, b, 1)
                # d(mean BCEWithLogits)/dz = (sigmoid(z) - y) / b
                gz = (torch.sigmoid(z) - y.index_select(1, idx)[:, :, None]) / len(idx)
                # (P, 1, b) @ (P, b, d) reads xb row by row: faster than xb^T @ gz on CPU, same sums
                weight.grad = torch.bmm(gz.transpose(1, 2), xb)
                bias.grad = gz.sum(1)
            opt.step()
    return ProbeFit(weight.detach()[:, 0].cpu().numpy(), bias.detach()[:, 0].cpu().numpy(),
                    mean.cpu().numpy(), scale.cpu().numpy())


def train_reference(x: Any, y: Any, settings: ProbeSettings = ProbeSettings()) -> ProbeFit:
    """One probe the published way: StandardScaler-style standardisation, nn.Linear, DataLoader, autograd, AdamW.

    The data stay on the CPU and each batch moves to `settings.device`, as a DataLoader loop does.
    """
    from torch.utils.data import DataLoader, TensorDataset

    device = resolve_device(settings.device)
    x, y = _as_tensor(x).float().cpu(), _as_tensor(y).float().cpu()
    n, d = x.shape
    mean, scale = standardizer(x)
    xs = (x - mean) / scale
    model = torch.nn.Linear(d, 1).to(device)
    w0, b0 = init_linear(d, settings.seed)
    with torch.no_grad():
        model.weight.copy_(w0[None])
        model.bias.copy_(b0)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    loader = DataLoader(TensorDataset(xs, y), batch_size=settings.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(settings.seed))
    for _ in range(settings.epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb.to(device))[:, 0], yb.to(device)).backward()
            opt.step()
    return ProbeFit(model.weight.detach().cpu().numpy().copy(), model.bias.detach().cpu().numpy().copy(),
                    mean.numpy()[None], scale.numpy()[None])


def predict_logits(fit: ProbeFit, x: Any, device: str = "auto", rows_per_step: int = 4096) -> np.ndarray:
    """(P, m) logits of P probes on their (P, m, d) test features."""
    dev = resolve_device(device)
    x = _as_tensor(x)
    w = torch.from_numpy(fit.weight).to(dev)[:, :, None]
    b = torch.from_numpy(fit.bias).to(dev)[:, None]
    mean = torch.from_numpy(fit.mean).to(dev)[:, None]
    scale = torch.from_numpy(fit.scale).to(dev)[:, None]
    out = []
    for s in range(0, x.shape[1], rows_per_step):
        xb = (x[:, s : s + rows_per_step].to(dev).float() - mean) / scale
        out.append((torch.bmm(xb, w)[:, :, 0] + b).cpu())
    return torch.cat(out, dim=1).numpy() if out else np.zeros((len(fit), 0), dtype=np.float32)


def accuracy_with_interval(correct: np.ndarray) -> dict[str, Any]:
    """Accuracy, its 95 % binomial interval and n."""
    n, k = len(correct), int(np.sum(correct))
    lo, hi = binomial_interval(k, n)
    return {"accuracy": k / n if n else float("nan"), "ci_low": lo, "ci_high": hi, "n": n}


def probe_metrics(logits: np.ndarray, labels: np.ndarray,
                  groups: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Accuracy, balanced accuracy and per-direction (increase / decrease clip) accuracy, with intervals; with
    `groups` (name -> boolean row mask, e.g. congruent / incongruent / neutral) the accuracy within each."""
    labels = np.asarray(labels).astype(bool)
    correct = (np.asarray(logits) > 0) == labels
    out = accuracy_with_interval(correct)
    if groups:
        out["by_group"] = {name: accuracy_with_interval(correct[np.asarray(mask, dtype=bool)])
                           for name, mask in groups.items()}
    per = {name: accuracy_with_interval(correct[labels == want]) for name, want in (("increase", True), ("decrease", False))}
    out["balanced_accuracy"] = float(np.nanmean([per["increase"]["accuracy"], per["decrease"]["accuracy"]]))
    out["per_direction"] = per
    out["increase_ratio"] = float(np.mean(np.asarray(logits) > 0)) if len(labels) else float("nan")
    return out


@dataclass
class ProbeJob:
    """One probe to train: train features/labels, and optionally test features/labels to score.

    Features are arrays or zero-argument callables returning one (read when the job's group trains);
    a callable needs `dim`.
    """

    key: tuple[str, ...]  # e.g. (representation/layer, config)
    x_train: Any  # (n, d) or a loader
    y_train: Any  # (n,)
    x_test: Any = None  # (m, d) or a loader
    y_test: Any = None  # (m,)
    dim: int | None = None
    test_groups: Mapping[str, np.ndarray] | None = None  # named test-row masks scored apart (congruence)

    @property
    def shape(self) -> tuple[int, int]:
        """(n_train, d) without loading anything."""
        d = self.dim if self.dim is not None else int(np.shape(self.x_train)[1])
        return len(self.y_train), d


def _materialise(x: Any) -> torch.Tensor:
    return _as_tensor(x() if callable(x) else x)


def fit_jobs(jobs: Sequence[ProbeJob], settings: ProbeSettings = ProbeSettings(),
             progress: bool = False) -> dict[tuple[str, ...], tuple[ProbeFit, dict[str, Any] | None]]:
    """Train every job, batching jobs that share (n_train, d) into one computation; score the test sets.

    A group larger than `settings.max_group_bytes` (float16 storage) is trained in chunks; chunks give
    the same weights, since every probe's trajectory is independent of the others.
    """
    groups: dict[tuple[int, int], list[ProbeJob]] = defaultdict(list)
    for job in jobs:
        groups[job.shape].append(job)
    budget = settings.max_group_bytes or ((16 << 30) if resolve_device(settings.device).type == "cuda" else (2 << 30))
    results: dict[tuple[str, ...], tuple[ProbeFit, dict[str, Any] | None]] = {}
    for (n, d), members in groups.items():
        size = max(1, budget // max(1, n * d * 2))
        for s in range(0, len(members), size):
            results.update(_fit_group(members[s : s + size], settings, progress))
    return results


def _fit_group(members: list[ProbeJob], settings: ProbeSettings,
               progress: bool) -> dict[tuple[str, ...], tuple[ProbeFit, dict[str, Any] | None]]:
    xs = [_materialise(j.x_train) for j in members]
    for j, x in zip(members, xs, strict=True):
        if tuple(x.shape) != j.shape:
            raise ValueError(f"probe {'/'.join(j.key)}: features {tuple(x.shape)} do not match {j.shape}")
    y = torch.stack([_as_tensor(np.asarray(j.y_train, dtype=np.float32)) for j in members])
    fit = train_batched(torch.stack(xs), y, settings, progress=progress)
    del xs
    out: dict[tuple[str, ...], tuple[ProbeFit, dict[str, Any] | None]] = {}
    tests = {i: _materialise(j.x_test) for i, j in enumerate(members) if j.x_test is not None}
    # Score test sets of equal length together (categories may differ in length).
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, x in tests.items():
        by_len[len(x)].append(i)
    logits: dict[int, np.ndarray] = {}
    for idx in by_len.values():
        sub = ProbeFit(fit.weight[idx], fit.bias[idx], fit.mean[idx], fit.scale[idx])
        lg = predict_logits(sub, torch.stack([tests[i] for i in idx]), settings.device)
        logits.update({i: lg[r] for r, i in enumerate(idx)})
    for i, j in enumerate(members):
        one = ProbeFit(fit.weight[i : i + 1], fit.bias[i : i + 1], fit.mean[i : i + 1], fit.scale[i : i + 1])
        out[j.key] = (one, probe_metrics(logits[i], np.asarray(j.y_test), j.test_groups) if i in logits else None)
    return out


def grouped_folds(groups: Sequence[str], k: int) -> list[np.ndarray]:
    """k folds of row indices with no group split across folds (groups dealt round-robin in sorted order)."""
    names = sorted(set(groups))
    if len(names) < k:
        raise ValueError(f"{k}-fold grouped CV needs at least {k} groups, found {len(names)}")
    fold_of = {g: i % k for i, g in enumerate(names)}
    assignment = np.array([fold_of[g] for g in groups])
    return [np.flatnonzero(assignment == f) for f in range(k)]
