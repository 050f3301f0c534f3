"""`--model openai-compatible` against a loopback server that checks vLLM's documented chat-completions schema.

The server here is written from vLLM's documentation and source, not from our wrapper: a request is the OpenAI
chat-completions body vLLM's ChatCompletionRequest takes, whose user content parts are `text` or
`input_audio {data: base64, format}` (vllm/entrypoints/chat_utils.py turns the latter into
data:audio/<format>;base64,<data>); the answer is vLLM's ChatCompletionResponse (id, object, created, model,
choices[].message / finish_reason / stop_reason, usage); GET /version answers {"version": ...}
(vllm/entrypoints/openai/api_server.py show_version).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.cli import main as harness_cli
from harness.models.base import ModelError
from harness.models.protocol import AudioClip, Prompt
from harness.models.registry import get_model
from harness.models.served import ServedAudioLM, served_family
from tests.helpers.vllm_server import KEY, SERVED_ID, VLLM_VERSION, VLLMServer, schema_errors, vllm_answer  # noqa: F401


@pytest.fixture
def server():
    srv = VLLMServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _prompt(i: int, sr: int = 48000) -> Prompt:
    x = (0.2 * np.sin(np.arange(sr // 4) * (i + 1) / 50)).astype(np.float32)
    return Prompt((f"clip {i}: does the pitch increase or decrease?\n\n", AudioClip(x, sr)), clip_id=f"c{i}")


def _model(srv: VLLMServer, **kwargs: Any) -> ServedAudioLM:
    lm = ServedAudioLM(base_url=srv.url, api_key=KEY, **kwargs)
    lm.sleep = lambda s: None  # back-off is not waited out in tests
    return lm


def _echo_clip(n: int, body: dict) -> tuple[int, dict]:
    text = body["messages"][0]["content"][0]["text"]
    return 200, vllm_answer(SERVED_ID, text.split(":")[0] + ": increase")


def test_48_clips_at_concurrency_8_answer_in_input_order(server: VLLMServer) -> None:
    server.gate = threading.Barrier(8)  # the first 8 requests wait for each other: 8 must be in flight at once
    server.script = _echo_clip
    lm = _model(server, concurrency=8)
    answers = lm.generate_items([_prompt(i) for i in range(48)], max_new_tokens=128)
    assert server.errors == [] and len(server.requests) == 48
    assert answers == [f"clip {i}: increase" for i in range(48)]
    assert server.max_in_flight == 8  # reached, never exceeded
    body = server.requests[0]
    assert body["max_tokens"] == 128 and body["temperature"] == 0.0 and "modalities" not in body
    info = lm.provenance()
    assert info["served_model"] == SERVED_ID and info["vllm_version"] == VLLM_VERSION
    assert info["family"] == "qwen2-audio" and info["sampling_rate"] == 16000
    assert info["api_model_versions"] == [f"model={SERVED_ID}"]
    assert info["not_paper_protocol"] and "vLLM 0.11.0" in info["not_paper_protocol"][0]
    assert KEY not in json.dumps(info) and KEY not in repr(lm)


def test_two_500s_then_200_is_retried(server: VLLMServer) -> None:
    server.script = lambda n, body: (500, {"object": "error", "message": "engine busy"}) if n <= 2 else (
        200, vllm_answer(SERVED_ID, "decrease"))
    assert _model(server, max_retries=3).generate_items([_prompt(0)]) == ["decrease"]
    assert len(server.requests) == 3


def test_a_connection_closed_mid_answer_is_an_error_row_not_a_crash(server: VLLMServer) -> None:
    server.script = lambda n, body: "close" if body["messages"][0]["content"][0]["text"].startswith("clip 1:") else (
        200, vllm_answer(SERVED_ID, "increase"))
    out = _model(server, max_retries=1).generate_items([_prompt(0), _prompt(1), _prompt(2)])
    assert out[0] == "increase" and out[2] == "increase"
    assert isinstance(out[1], ModelError) and out[1].clip_id == "c1" and "IncompleteRead" in out[1].message


def test_a_cut_answer_once_is_retried(server: VLLMServer) -> None:
    server.script = lambda n, body: "close" if n == 1 else (200, vllm_answer(SERVED_ID, "increase"))
    assert _model(server, max_retries=2).generate_items([_prompt(0)]) == ["increase"]


def test_the_served_model_is_read_from_the_server_and_unknown_families_need_a_rate(server: VLLMServer) -> None:
    assert _model(server).model == SERVED_ID  # GET /v1/models lists one model
    server.served_id = "my-finetune"
    with pytest.raises(ModelError, match="sampling_rate="):
        _model(server, model="my-finetune")
    server.rate = 24000
    lm = _model(server, model="my-finetune", sampling_rate=24000)
    assert lm.generate_items([_prompt(0, sr=16000)]) == ["increase"] and server.errors == []


@pytest.mark.parametrize(("served", "family"), [
    ("Qwen/Qwen2-Audio-7B-Instruct", "qwen2-audio"), ("/models/Qwen2.5-Omni-3B", "qwen2.5-omni"),
    ("mistralai/Voxtral-Small-24B-2507", "voxtral"), ("google/gemma-3n-E2B-it", "gemma-3n"),
    ("nvidia/audio-flamingo-3-hf", "audio-flamingo-3"), ("ibm-granite/granite-speech-3.3-2b", "granite-speech"),
    ("microsoft/Phi-4-multimodal-instruct", "phi-4-multimodal"), ("speech", None), ("meta-llama/Llama-3-8B", None),
])  # fmt: skip
def test_served_family_from_the_model_id(served: str, family: str | None) -> None:
    found = served_family(served)
    assert (found.name if found else None) == family


def test_no_key_sends_no_authorization_and_a_key_file_is_read(server: VLLMServer, tmp_path: Path) -> None:
    server.key = None
    ServedAudioLM(base_url=server.url).generate_items([_prompt(0)])
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    server.key = KEY
    assert ServedAudioLM(base_url=server.url, api_key_file=str(key_file)).generate_items([_prompt(0)]) == ["increase"]
    with pytest.raises(ModelError, match="base_url="):
        ServedAudioLM()


def test_registry_takes_model_and_base_url_as_model_args(server: VLLMServer) -> None:
    lm = get_model("openai-compatible", base_url=server.url, model=SERVED_ID, api_key=KEY)
    assert isinstance(lm, ServedAudioLM) and lm.model == SERVED_ID


def test_several_servers_share_a_run_round_robin() -> None:
    servers = [VLLMServer(), VLLMServer()]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        lm = ServedAudioLM(base_url=",".join(s.url for s in servers), api_key=KEY, concurrency=2)
        assert lm.generate_items([_prompt(i) for i in range(6)]) == ["increase"] * 6
        assert [len(s.requests) for s in servers] == [3, 3]
        assert lm.provenance()["endpoint"] == [s.url for s in servers]
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def test_harness_eval_against_the_server_records_and_flags_the_run(server: VLLMServer, tmp_path: Path) -> None:
    key_file = tmp_path / "secret" / "key"
    key_file.parent.mkdir()
    key_file.write_text(KEY)
    out = tmp_path / "run"
    assert harness_cli(["eval", "--model", "openai-compatible", "--model-arg",
                        f"base_url={server.url},model={SERVED_ID},api_key_file={key_file},concurrency=8",
                        "--configs", "pitch", "--source", "demo", "--limit", "48", "--batch-size", "48",
                        "--no-preflight", "--out", str(out)]) == 0  # fmt: skip
    assert server.errors == [] and len(server.requests) == 48
    results = json.loads((out / "results.json").read_text())
    info = results["model_info"]
    assert info["served_model"] == SERVED_ID and info["vllm_version"] == VLLM_VERSION
    assert "not_paper_protocol" in info
    assert harness_cli(["report", str(out), "--no-figures"]) == 0
    assert "not the paper's protocol: served over an OpenAI-compatible endpoint (vLLM 0.11.0)" in (
        out / "report.md").read_text()
    from harness.leaderboard.build import protocol_note, submission_row
    from harness.leaderboard.submit import make_submission

    row = submission_row(make_submission(out, model_name="served qwen2-audio"), "served.json")
    assert "not the paper's protocol: served over an OpenAI-compatible endpoint" in protocol_note(row)
    for f in out.rglob("*"):  # no file of the run holds the key
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


def test_a_server_list_survives_model_arg_parsing() -> None:
    from harness.settings import parse_model_arg

    assert parse_model_arg("base_url=http://a:8000/v1,http://b:8001/v1,model=m,concurrency=16") == [
        ("base_url", "http://a:8000/v1,http://b:8001/v1"), ("model", "m"), ("concurrency", 16)]
