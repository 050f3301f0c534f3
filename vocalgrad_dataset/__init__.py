"""VocalGrad: the benchmark dataset generator."""
