"""`VocalGrad`: a datasets.GeneratorBasedBuilder with one config per category plus "all"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import datasets

from vocalgrad_dataset.features import vocalgrad_features
from vocalgrad_dataset.generate import (
    GENERATOR_VERSION,
    iter_config_rows,
    resolve_source,
    serves,
    source_splits,
)
from vocalgrad_dataset.sources import SourceClip, get_source
from vocalgrad_dataset.tasks import config_names, config_spec, expand_specs

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
    """Which config (a category, beep-<category>, <category>-yesno/-ternary/-source, or "all") to generate,
    and from which source corpus (default vctk; beep configs always use the beep source)."""

    source: str | None = None
    download: bool = False  # vctk only: fetch the official 0.80 release when no data_dir is given


class VocalGrad(datasets.GeneratorBasedBuilder):
    """VocalGrad generated from a source corpus; shards are source clips (24 rows each per category, 25 in the
    yes/no and ternary formats)."""

    VERSION = datasets.Version(GENERATOR_VERSION)
    BUILDER_CONFIG_CLASS = VocalGradConfig
    BUILDER_CONFIGS = [
        VocalGradConfig(name=n, version=datasets.Version(GENERATOR_VERSION), description=config_spec(n).category.description)
        for n in config_names()
    ] + [VocalGradConfig(name="all", version=datasets.Version(GENERATOR_VERSION), description="all nine categories")]
    DEFAULT_CONFIG_NAME = "pitch"

    def _create_builder_config(self, config_name: str | None = None, custom_features: Any = None, **config_kwargs: Any) -> Any:
        # published long names ("voice_pitch", "background_noise-ternary", ...) are accepted as aliases
        if config_name not in (None, "all"):
            config_name = config_spec(config_name).name
        return super()._create_builder_config(config_name, custom_features, **config_kwargs)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            features=vocalgrad_features(expand_specs(self.config.name)[0].recipe),
            homepage="https://huggingface.co/datasets/ynklab/vocalgrad",
            license="cc-by-4.0",
        )

    def _source_name(self) -> str:
        return resolve_source(self.config.name, self.config.source)

    def _source_root(self, dl_manager: Any) -> str | None:
        if self._source_name() == "vctk" and self.config.data_dir is None and self.config.download:
            from vocalgrad_dataset.sources import download_vctk

            return str(download_vctk(dl_manager))
        return self.config.data_dir

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self._source_root(dl_manager)
        name = self._source_name()
        source = get_source(name, root)
        specs = expand_specs(self.config.name)
        return [
            datasets.SplitGenerator(
                name=split,
                # a list in gen_kwargs is what datasets shards on: one shard per source clip
                gen_kwargs={"clips": [c for c in source.clips(split) if any(serves(c, s) for s in specs)],
                            "source": name, "root": root},
            )
            for split in source_splits(source)  # beep and the alternative sources are test only
        ]

    def _generate_examples(self, clips: list[SourceClip], source: str, root: str | None) -> Iterator[tuple[str, dict]]:
        src = get_source(source, root)
        specs = expand_specs(self.config.name)
        for clip in clips:
            pcm = src.read(clip)
            for spec in specs:
                for row in iter_config_rows(spec, clip, pcm.samples, pcm.sample_rate, audio_format="wav"):
                    yield row["benchmark_clip_id"], row
