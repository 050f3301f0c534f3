"""`VocalGrad`: a datasets.GeneratorBasedBuilder with one config per category plus "all"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import datasets

from .categories import CATEGORIES, CATEGORY_NAMES, get_category
from .features import vocalgrad_features
from .generate import GENERATOR_VERSION, SPLITS, config_categories, render_clip_rows
from .sources import SourceClip, get_source

_DESCRIPTION = (
    "VocalGrad (Ryu & Yanaka 2026): speech clips in which exactly one acoustic factor rises or falls over "
    "time; the task is to answer 'increase' or 'decrease'. Regenerated on the fly from the source corpus."
)
_CITATION = (
    "@inproceedings{ryu2026vocalgrad, title={VocalGrad: Evaluating Acoustic Perception in Audio Language Models}, "
    "author={Ryu and Yanaka}, year={2026}}"
)


@dataclass
class VocalGradConfig(datasets.BuilderConfig):
    """Which category (or "all") to generate, and from which source corpus (vctk, demo, folder)."""

    source: str = "vctk"
    download: bool = False  # vctk only: fetch the official 0.80 release when no data_dir is given


class VocalGrad(datasets.GeneratorBasedBuilder):
    """VocalGrad generated from a source corpus; shards are source clips (24 rows each per category)."""

    VERSION = datasets.Version(GENERATOR_VERSION)
    BUILDER_CONFIG_CLASS = VocalGradConfig
    BUILDER_CONFIGS = [
        VocalGradConfig(name=n, version=datasets.Version(GENERATOR_VERSION), description=CATEGORIES[n].description)
        for n in CATEGORY_NAMES
    ] + [VocalGradConfig(name="all", version=datasets.Version(GENERATOR_VERSION), description="all nine categories")]
    DEFAULT_CONFIG_NAME = "pitch"

    def _create_builder_config(self, config_name: str | None = None, custom_features: Any = None, **config_kwargs: Any) -> Any:
        # published long names ("voice_pitch", "background_noise", ...) are accepted as aliases
        if config_name not in (None, "all"):
            config_name = get_category(config_name).name
        return super()._create_builder_config(config_name, custom_features, **config_kwargs)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            features=vocalgrad_features(),
            homepage="https://huggingface.co/datasets/ynklab/vocalgrad",
            license="cc-by-4.0",
        )

    def _source_root(self, dl_manager: Any) -> str | None:
        if self.config.source == "vctk" and self.config.data_dir is None and self.config.download:
            from .sources import download_vctk

            return str(download_vctk(dl_manager))
        return self.config.data_dir

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self._source_root(dl_manager)
        source = get_source(self.config.source, root)
        return [
            datasets.SplitGenerator(
                name=split,
                # a list in gen_kwargs is what datasets shards on: one shard per source clip
                gen_kwargs={"clips": source.clips(split), "source": self.config.source, "root": root},
            )
            for split in SPLITS
        ]

    def _generate_examples(self, clips: list[SourceClip], source: str, root: str | None) -> Iterator[tuple[str, dict]]:
        src = get_source(source, root)
        cats = config_categories(self.config.name)
        for clip in clips:
            pcm = src.read(clip)
            for cat in cats:
                for row in render_clip_rows(cat, clip, pcm.samples, pcm.sample_rate, audio_format="wav"):
                    yield row["benchmark_clip_id"], row
