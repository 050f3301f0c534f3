"""VocalGrad: the benchmark dataset generator.

`from vocalgrad_dataset import VocalGrad` gives the datasets builder; it is imported lazily so that the
light modules (grid, categories, generate) load without `datasets`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["VocalGrad", "VocalGradConfig"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from vocalgrad_dataset import builder
        return getattr(builder, name)
    raise AttributeError(f"module 'vocalgrad_dataset' has no attribute {name!r}")
