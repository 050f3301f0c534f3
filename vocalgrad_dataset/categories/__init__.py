"""The nine VocalGrad categories, each registered by its own module (metadata beside its transform)."""

from vocalgrad_dataset.categories import (  # noqa: F401
    clarity,
    distortion,
    echo,
    noise,
    pitch,
    roughness,
    speed,
    vibration,
    volume,
)
from vocalgrad_dataset.categories.base import ALIASES, REGISTRY, Category, get_category, noise_seed

CATEGORY_NAMES: tuple[str, ...] = ("speed", "pitch", "volume", "distortion", "roughness", "noise", "echo", "clarity", "vibration")
CATEGORIES: dict[str, Category] = {name: REGISTRY[name] for name in CATEGORY_NAMES}

__all__ = ["ALIASES", "CATEGORIES", "CATEGORY_NAMES", "Category", "get_category", "noise_seed"]
