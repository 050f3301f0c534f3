"""Probing: where in an audio LM the direction of change is lost (SPEC §6).

extract.py (features from any AudioLM's hidden states) -> store.py (float16 safetensors shards) ->
probes.py (all linear probes trained as one batched computation) -> train.py (the CLI) ->
directions.py (direction alignment between categories) -> report.py (figures and tables).
"""
