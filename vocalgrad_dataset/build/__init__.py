"""Building a release: Parquet shards (export), the dataset card, manifests, build records."""
