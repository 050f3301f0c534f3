"""Training checkpoints: adapter weights, optimizer, scheduler, every process's RNG state and the loop state.

Layout: OUT/checkpoints/step-000120/{adapter_model.safetensors, optimizer.pt, scheduler.pt, state.json,
rng_rank<R>.pt, sha256sums.json} and OUT/checkpoints/latest naming the newest complete one. A checkpoint is assembled
under a temporary name and renamed into place, and `latest` is replaced atomically after that, so a kill
at any moment leaves the previous checkpoint intact and `latest` pointing at a complete one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from harness.results import atomic_write_text
from vocalgrad_dataset.fileio import file_sha256

CHECKPOINTS = "checkpoints"
CHECKSUMS = "sha256sums.json"  # {file name: sha256} of every other file, written last
LATEST = "latest"


def _dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / CHECKPOINTS


def rng_state() -> dict[str, Any]:
    """Every generator a training step draws from (dropout, augmentation fallbacks, CUDA kernels)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    # numpy's key array as a tensor: the file then loads with torch.load(weights_only=True)
    numpy_state = (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss))
    state: dict[str, Any] = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what rng_state() captured."""
    random.setstate(state["python"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(out_dir: str | Path, step: int, *, adapter: dict[str, torch.Tensor], optimizer: Any, scheduler: Any,
         state: dict[str, Any], rank: int, is_main: bool, barrier: Any, keep: int = 2) -> Path:
    """Write checkpoint `step` from every process (each adds its RNG file); returns its directory."""
    root = _dir(out_dir)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}"
    if is_main:
        shutil.rmtree(tmp, ignore_errors=True)  # a torn one from a kill mid-save
        tmp.mkdir(parents=True)
    barrier()
    torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")
    if is_main:
        save_file({k: v.detach().contiguous().cpu() for k, v in adapter.items()}, str(tmp / "adapter_model.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    barrier()
    if is_main:
        # every file's sha256, checked on resume: flipped bits that still load would train on silently
        sums = {f.name: file_sha256(f) for f in sorted(tmp.iterdir())}
        (tmp / CHECKSUMS).write_text(json.dumps(sums, indent=1) + "\n", encoding="utf-8")
        for f in tmp.iterdir():  # durable before the rename makes the checkpoint visible
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        atomic_write_text(root / LATEST, final.name + "\n")
        for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def problem(path: Path) -> str | None:
    """Why checkpoint `path` cannot be resumed from (the file and the error), or None when every file loads."""
    try:
        state = read_state(path)
    except (OSError, ValueError) as err:  # missing, unreadable, not JSON
        return f"state.json: {err}"
    if not isinstance(state, dict) or not {"step", "fingerprint", "seed"} <= set(state):
        return "state.json: no step/seed/fingerprint"
    files = ["adapter_model.safetensors", "optimizer.pt", "scheduler.pt",
             *sorted(p.name for p in path.glob("rng_rank*.pt"))]
    changed = _checksum_problem(path)
    if changed:
        return changed
    for name in files:
        try:
            if name.endswith(".safetensors"):
                load_file(str(path / name))
            else:
                torch.load(path / name, weights_only=True)
        except Exception as err:  # truncated zip, corrupt header, missing file: all mean "not this one"
            return f"{name}: {type(err).__name__}: {err}"
    return None


def _checksum_problem(path: Path) -> str | None:
    """A file whose bytes differ from the sha256 recorded at save (none recorded: checkpoints from before)."""
    sums_file = path / CHECKSUMS
    if not sums_file.is_file():
        return None
    try:
        sums = json.loads(sums_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"{CHECKSUMS}: {err}"
    for name, want in sorted(sums.items()):
        if not (path / name).is_file():
            return f"{name}: missing"
        if file_sha256(path / name) != want:
            return f"{name}: sha256 differs from the one recorded at save (flipped bits, or edited)"
    return None


def latest(out_dir: str | Path) -> Path | None:
    """The newest checkpoint whose every file loads, or None when there is none at all.

    A corrupt newest one (a disk error, a copy cut short) is skipped with a warning naming it and why, and
    the previous valid one is used; if none is usable, a ValueError says so.
    """
    root = _dir(out_dir)
    pointer = root / LATEST
    named = root / pointer.read_text(encoding="utf-8").strip() if pointer.is_file() else None
    found = sorted((p for p in root.glob("step-*") if p.is_dir()), reverse=True) if root.is_dir() else []
    candidates = ([named] if named is not None else []) + [p for p in found if p != named]
    if not candidates:
        return None
    skipped = []
    for path in candidates:
        why = problem(path) if path.is_dir() else "missing"
        if why is None:
            for name, reason in skipped:
                print(f"warning: checkpoint {name} is unusable ({reason}); resuming from {path.name} instead",
                      file=sys.stderr)
            return path
        skipped.append((path.name, why))
    raise ValueError(f"no usable checkpoint in {root} ({'; '.join(f'{n}: {w}' for n, w in skipped)}); "
                     f"remove {root} to train from the start")


def read_state(path: Path) -> dict[str, Any]:
    """The loop state (step, fingerprint, log) of a checkpoint."""
    return json.loads((path / "state.json").read_text(encoding="utf-8"))


def load(path: Path, *, optimizer: Any, scheduler: Any, rank: int) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Restore optimizer, scheduler and this process's RNG from a checkpoint; returns (adapter, state)."""
    adapter = load_file(str(path / "adapter_model.safetensors"))
    # Our own files, written by save(): optimizer/RNG states hold Python objects that weights_only refuses.
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    rng = path / f"rng_rank{rank}.pt"
    if rng.is_file():
        set_rng_state(torch.load(rng, weights_only=True))
    else:  # resumed on more processes than saved it: a fresh, still deterministic stream for this rank
        state = read_state(path)
        torch.manual_seed(int(state["seed"]) + 7919 * (rank + 1) + int(state["step"]))
    return adapter, read_state(path)
