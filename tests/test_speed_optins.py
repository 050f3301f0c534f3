"""Issue 37: the speed opt-ins (--dtype, --tf32, --attn-implementation) reach the model, and a run that takes
one is recorded as not the paper's protocol (model_info["not_paper_protocol"], which the report flags)."""

from __future__ import annotations

import argparse

import pytest
import torch

from harness.models.tiny import tiny_model
from harness.settings import ModelSettings, add_model_arguments


def test_the_protocols_own_choices_record_no_deviation() -> None:
    lm = tiny_model("qwen2-audio")
    info = lm.provenance()
    assert info["not_paper_protocol"] == [] and info["attn_implementation"] == "sdpa"
    assert tiny_model("qwen2-audio", dtype="float32").provenance()["not_paper_protocol"] == []  # the family's own


def test_each_opt_in_is_applied_and_recorded() -> None:
    kwargs = ModelSettings(model="tiny-qwen2-audio", dtype="bfloat16", tf32=True,
                           attn_implementation="eager").model_kwargs()
    assert kwargs == {"dtype": "bfloat16", "tf32": True, "attn_implementation": "eager"}
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.allow_tf32 = False
        lm = tiny_model("qwen2-audio", **kwargs)
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    finally:  # a process-wide switch: restored for the tests after this one
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]
    assert lm.model.config._attn_implementation == "eager" and lm.dtype == torch.bfloat16
    assert lm.provenance()["not_paper_protocol"] == [
        "dtype bfloat16 (the protocol's: float32)", "tf32 matmuls", "attn_implementation eager (the family's: sdpa)"]
    assert ModelSettings(model="m").model_kwargs() == {}  # off by default: nothing reaches a factory


def test_dtype_short_names_are_the_dtypes_they_abbreviate() -> None:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    for short, full in (("bf16", "bfloat16"), ("fp16", "float16"), ("fp32", "float32"), ("bfloat16", "bfloat16")):
        assert parser.parse_args(["--model", "m", "--dtype", short]).dtype == full
    with pytest.raises(SystemExit):
        parser.parse_args(["--model", "m", "--dtype", "int8"])
