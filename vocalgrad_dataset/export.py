"""Build Parquet shards + a data card that `datasets.load_dataset(DIR, config)` reads; push to the Hub.

Layout: DIR/<config>/<split>-<i>-of-<n>.parquet, one shard per group of source clips, each written to a
temporary name and renamed, so a killed build resumes by skipping finished shards and never leaves a
partial file under a final name.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .card import write_card
from .features import encode_row, vocalgrad_features
from .generate import expand_config, parse_config, render_config_rows, resolve_source, source_splits
from .sources import SourceClip, get_source

DEFAULT_CLIPS_PER_SHARD = 4


@dataclass(frozen=True)
class ShardTask:
    """One Parquet file to produce: a config's rows for a run of source clips."""

    config: str  # single config name, also the folder: "pitch", "beep-pitch", "volume-ternary"
    split: str
    index: int
    count: int
    clips: tuple[SourceClip, ...]
    source: str
    data_dir: str | None

    def path(self, out_dir: Path) -> Path:
        return out_dir / self.config / f"{self.split}-{self.index:05d}-of-{self.count:05d}.parquet"


def plan_shards(
    configs: Sequence[str], splits: Sequence[str], source: str, data_dir: str | None, clips_per_shard: int
) -> list[ShardTask]:
    """Every shard of a build, in a deterministic order."""
    src = get_source(source, data_dir)
    tasks = []
    for split in splits:
        if split not in source_splits(src):
            raise ValueError(f"source {source!r} has no {split!r} split (it has: {', '.join(source_splits(src))})")
        clips = src.clips(split)
        groups = [tuple(clips[i : i + clips_per_shard]) for i in range(0, len(clips), clips_per_shard)]
        for config in configs:
            tasks += [ShardTask(config, split, i, len(groups), g, source, data_dir) for i, g in enumerate(groups)]
    return tasks


def write_shard(task: ShardTask, out_dir: Path) -> tuple[Path, int]:
    """Render and write one shard atomically (tmp + rename); returns its path and row count."""
    final = task.path(out_dir)
    src = get_source(task.source, task.data_dir)
    spec = parse_config(task.config)
    features = vocalgrad_features(spec.format)
    rows = []
    for clip in task.clips:
        pcm = src.read(clip)
        rendered = render_config_rows(spec, clip, pcm.samples, pcm.sample_rate, audio_format="wav")
        rows += [encode_row(r, features) for r in rendered]
    table = pa.Table.from_pylist(rows, schema=features.arrow_schema)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final, len(rows)


def _write_shard_star(args: tuple[ShardTask, Path]) -> tuple[Path, int]:
    return write_shard(*args)


def build(
    config: str,
    splits: Sequence[str],
    out_dir: str | Path,
    *,
    source: str | None = None,
    data_dir: str | None = None,
    num_proc: int = 1,
    clips_per_shard: int = DEFAULT_CLIPS_PER_SHARD,
    progress: bool = True,
) -> dict[str, int]:
    """Write the Parquet shards of a config ("all", "all-ternary", "beep-all": each its own config) and the card.

    `source` defaults to vctk, or to the config's own source (beep configs).
    """
    out = Path(out_dir)
    source = resolve_source(config, source)
    configs = [spec.name for spec in expand_config(config)]
    tasks = plan_shards(configs, splits, source, data_dir, clips_per_shard)
    todo = [t for t in tasks if not t.path(out).exists()]  # finished shards survive a kill: resume skips them
    written = 0
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="shard", disable=not progress, desc="build")
    if num_proc > 1 and len(todo) > 1:
        # spawn: no inherited locks or thread pools from the parent (pyarrow, BLAS)
        with mp.get_context("spawn").Pool(num_proc) as pool:
            for _, n in pool.imap_unordered(_write_shard_star, [(t, out) for t in todo]):
                written += n
                bar.update()
    else:
        for t in todo:
            written += write_shard(t, out)[1]
            bar.update()
    bar.close()
    write_card(out, source=source)
    return {"shards": len(tasks), "written_shards": len(todo), "written_rows": written}


def push_to_hub(out_dir: str | Path, repo_id: str, *, private: bool = False) -> str:
    """Upload a build folder (every config in it) to a dataset repo; the token comes from env/login."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(out_dir), repo_id=repo_id, repo_type="dataset", commit_message="VocalGrad build"
    )
    return str(getattr(info, "commit_url", info))
