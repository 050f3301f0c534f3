"""The submission format (JSON schema, versioned): a harness results.json, its samples and model metadata."""

from __future__ import annotations

from typing import Any

from harness.results import RESULTS_SCHEMA, json_schema_errors

# Bump when a field is added, removed or changes meaning; validate refuses versions it does not know.
SUBMISSION_SCHEMA_VERSION = "1"

MODEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "registry_name", "params", "precision", "revision", "adapter", "prompt_variant",
                 "scoring_mode"],
    "properties": {
        "name": {"type": "string", "description": "display name on the leaderboard"},
        "registry_name": {"type": "string", "description": "the harness model the run used"},
        "params": {"type": ["integer", "null"], "description": "parameter count, null when unknown"},
        "precision": {"type": "string", "description": "weights dtype, e.g. bfloat16"},
        "revision": {"type": ["string", "null"], "description": "commit of the base weights"},
        "adapter": {"type": ["string", "null"], "description": "LoRA adapter (Hub repo or path), null for none"},
        "prompt_variant": {"type": "string", "description": "SPEC §5 prompt variant"},
        "scoring_mode": {"type": "string", "description": "generate (parsed answers) or choices (log-probs)"},
        "notes": {"type": ["string", "null"]},
    },
}

SUBMISSION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://github.com/vocalgrad/vocalgrad/leaderboard/submission-v{SUBMISSION_SCHEMA_VERSION}.json",
    "title": "VocalGrad leaderboard submission",
    "type": "object",
    "required": ["schema_version", "model", "results", "samples", "samples_sha256", "created"],
    "properties": {
        "schema_version": {"type": "string", "const": SUBMISSION_SCHEMA_VERSION},
        "model": MODEL_SCHEMA,
        "results": RESULTS_SCHEMA,
        "samples": {
            "type": "object",
            "description": "config -> samples rows in dataset order, exactly as samples_<config>.jsonl holds them",
            "additionalProperties": {"type": "array", "items": {"type": "object"}},
        },
        "samples_sha256": {
            "type": "object",
            "description": "config -> sha256 of the samples rows serialised as the harness writes JSON lines",
            "additionalProperties": {"type": "string"},
        },
        "created": {"type": "string", "description": "ISO-8601 time the submission was made"},
    },
}


def schema_errors(obj: Any) -> list[str]:
    """Structural problems of a submission (types, required fields); [] when it has the right shape."""
    errors = json_schema_errors(obj, SUBMISSION_SCHEMA, "submission")
    if isinstance(obj, dict) and obj.get("schema_version") not in (None, SUBMISSION_SCHEMA_VERSION):
        errors.insert(0, f"submission: schema version {obj.get('schema_version')!r} is not supported "
                         f"(this harness reads version {SUBMISSION_SCHEMA_VERSION})")
    return errors
