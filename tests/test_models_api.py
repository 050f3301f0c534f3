"""API wrappers against a local HTTP server speaking each provider's wire format."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import soundfile as sf

from harness.models.api import GeminiAudioLM, OpenAIAudioLM
from harness.models.base import ItemErrors, ModelError
from harness.models.protocol import AudioClip, Prompt

KEY = "sk-test-secret-123"
QUESTION = "Does the volume increase or decrease over time?"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.script = lambda req, n: (200, {}, {})  # (status, headers, json body) for the n-th request


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        with self.server.lock:
            self.server.requests.append(req)
            n = len(self.server.requests)
        status, headers, payload = self.server.script(req, n)
        data = json.dumps(payload).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: _Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _prompt(clip_id: str, seconds: float = 0.5, sr: int = 16000) -> Prompt:
    x = (0.2 * np.sin(np.arange(int(seconds * sr)) / 10)).astype(np.float32)
    return Prompt((QUESTION + "\n\n", AudioClip(x, sr)), clip_id=clip_id)


def _decode_wav(b64: str) -> tuple[np.ndarray, int]:
    data, sr = sf.read(io.BytesIO(base64.b64decode(b64)), dtype="float32")
    return data, sr


def _gemini_ok(text: str) -> dict:
    return {"candidates": [{"content": {"parts": [{"text": "thinking...", "thought": True}, {"text": text}]},
                            "finishReason": "STOP"}], "modelVersion": "gemini-3-flash-preview-11-2025"}


def _openai_ok(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "model": "gpt-4o-audio-preview-2025-06-03", "system_fingerprint": "fp_abc"}


def _seed(seed: int, clip_id: str, budget: int) -> int:
    """The documented per-answer seed, computed here independently of the wrapper."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{clip_id}:{budget}".encode()).digest()[:8], "big") % 2**31


def _recording(lm):
    """Replace the model's back-off sleep by a recorder: delays are checked exactly, not timed."""
    delays: list[float] = []
    lm.sleep = delays.append
    return delays


def test_gemini_wire_format(server):
    server.script = lambda req, n: (200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, protocol="card")
    assert lm.generate([_prompt("a", sr=48000)]) == ["increase"]  # the thought part is not the answer
    (req,) = server.requests
    assert req["path"] == "/v1beta/models/gemini-3-flash-preview:generateContent"  # no ?key= in the URL
    assert req["headers"]["x-goog-api-key"] == KEY and "authorization" not in req["headers"]
    parts = req["body"]["contents"][0]["parts"]
    assert parts[0] == {"text": QUESTION + "\n\n"}
    audio, sr = _decode_wav(parts[1]["inlineData"]["data"])
    assert parts[1]["inlineData"]["mimeType"] == "audio/wav" and sr == 48000 and len(audio) == 24000
    # no maxOutputTokens: thinking tokens would count against the runner's 128
    assert req["body"]["generationConfig"] == {"temperature": 1.0, "thinkingConfig": {"thinkingLevel": "low"},
                                               "seed": _seed(1234, "a", 128)}


def test_gemini_retry_draws_a_new_reproducible_sample(server):
    server.script = lambda req, n: (200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, seed=7, protocol="card")
    lm.generate([_prompt("a")], max_new_tokens=128)
    lm.generate([_prompt("a")], max_new_tokens=256)  # the runner's retry
    GeminiAudioLM(base_url=_url(server), api_key=KEY, seed=7, protocol="card").generate([_prompt("a")], max_new_tokens=128)
    seeds = [r["body"]["generationConfig"]["seed"] for r in server.requests]
    assert seeds == [_seed(7, "a", 128), _seed(7, "a", 256), _seed(7, "a", 128)]
    assert seeds[0] != seeds[1]


def test_gemini_paper_request_by_default(server):
    """ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_gemini: GenerateContentConfig(
    temperature=1.0 (its default for gemini-3 ids), top_k=5, max_output_tokens=max_new_tokens (128, then 256 on the
    retry), thinking_config={"thinking_level": "low"}); no seed. REST spells them temperature, topK,
    maxOutputTokens, thinkingConfig.thinkingLevel (ai.google.dev/api/generate-content)."""
    server.script = lambda req, n: (200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY)
    lm.generate([_prompt("a")], max_new_tokens=128)
    lm.generate([_prompt("a")], max_new_tokens=256)
    configs = [r["body"]["generationConfig"] for r in server.requests]
    assert configs == [{"temperature": 1.0, "topK": 5, "maxOutputTokens": budget,
                        "thinkingConfig": {"thinkingLevel": "low"}} for budget in (128, 256)]
    info = lm.provenance()
    assert (info["protocol"], info["seed"], info["budget_field"]) == ("paper", None, "maxOutputTokens")


def test_openai_wire_format(server):
    server.script = lambda req, n: (200, {}, _openai_ok("decrease"))
    lm = OpenAIAudioLM(base_url=_url(server) + "/v1", api_key=KEY)
    assert lm.generate([_prompt("a")], max_new_tokens=128) == ["decrease"]
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert set(body) == {"model", "modalities", "temperature", "max_completion_tokens", "messages"}
    assert body["model"] == "gpt-4o-audio-preview" and body["modalities"] == ["text"]
    assert body["max_completion_tokens"] == 128 and body["temperature"] == 0.0
    text, audio = body["messages"][0]["content"]
    assert text == {"type": "text", "text": QUESTION + "\n\n"}
    assert audio["type"] == "input_audio" and audio["input_audio"]["format"] == "wav"
    samples, sr = _decode_wav(audio["input_audio"]["data"])
    assert sr == 16000 and len(samples) == 8000


def test_provenance_records_the_served_model_version(server):
    server.script = lambda req, n: (200, {}, _openai_ok("decrease"))
    lm = OpenAIAudioLM(base_url=_url(server), api_key=KEY)
    lm.generate([_prompt("a"), _prompt("b")])
    info = lm.provenance()
    assert info["model_id"] == "gpt-4o-audio-preview"
    assert info["api_model_versions"] == ["model=gpt-4o-audio-preview-2025-06-03, system_fingerprint=fp_abc"]
    assert info["generation"] == {"modalities": ["text"], "temperature": 0.0}
    json.dumps(info)  # goes into results.json as is
    gem = GeminiAudioLM(base_url=_url(server), api_key=KEY, thinking_level="high", protocol="card")
    server.script = lambda req, n: (200, {}, _gemini_ok("increase"))
    gem.generate([_prompt("a")])
    assert gem.provenance()["api_model_versions"] == ["modelVersion=gemini-3-flash-preview-11-2025"]
    assert gem.provenance()["generation"] == {"temperature": 1.0, "thinkingConfig": {"thinkingLevel": "high"}}


def test_429_backs_off_honouring_retry_after(server):
    server.script = lambda req, n: (429, {"Retry-After": "0.3"}, {"error": "slow down"}) if n == 1 else (
        200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, backoff_s=0.001)
    delays = _recording(lm)
    assert lm.generate([_prompt("a")]) == ["increase"]
    assert delays == [0.3]  # what the server asked, not the 1 ms back-off
    assert len(server.requests) == 2


@pytest.mark.parametrize("retry_after", ["3600", "Wed, 21 Oct 2099 07:28:00 GMT"])
def test_retry_after_is_capped_by_max_backoff(server, retry_after):
    server.script = lambda req, n: (429, {"Retry-After": retry_after}, {"error": "slow down"}) if n == 1 else (
        200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, max_backoff_s=2.5)
    delays = _recording(lm)
    assert lm.generate([_prompt("a")]) == ["increase"]
    assert delays == [2.5]  # an hour (or 2099) asked, the cap waited


def test_backoff_without_retry_after_grows_and_stays_under_the_cap(server):
    server.script = lambda req, n: (503, {}, {"error": "busy"}) if n <= 5 else (200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, backoff_s=1.0, max_backoff_s=4.0)
    delays = _recording(lm)
    assert lm.generate([_prompt("a")]) == ["increase"]
    ceilings = [1.0, 2.0, 4.0, 4.0, 4.0]  # backoff_s * 2**attempt, capped; jitter keeps 50-100 % of it
    assert len(delays) == 5 and all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))


def test_persistent_500_becomes_an_error_row(server):
    def script(req, n):
        text = req["body"]["contents"][0]["parts"][0]["text"]
        return (500, {}, {"error": "boom"}) if "fail" in text else (200, {}, _gemini_ok("decrease"))

    server.script = script
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, backoff_s=0.001, max_retries=3)
    delays = _recording(lm)
    bad = Prompt(("fail " + QUESTION, _prompt("x").audios[0]), clip_id="bad")
    items = lm.generate_items([_prompt("ok1"), bad, _prompt("ok2")])
    assert items[0] == "decrease" and items[2] == "decrease"
    assert isinstance(items[1], ModelError) and items[1].clip_id == "bad" and "HTTP 500" in items[1].message
    assert sum("fail" in r["body"]["contents"][0]["parts"][0]["text"] for r in server.requests) == 4
    assert len(delays) == 3
    with pytest.raises(ItemErrors):
        lm.generate([bad])


def test_results_keep_input_order_under_concurrency(server):
    everyone_in = threading.Barrier(5, timeout=10)  # passes only when all 5 requests are in flight at once

    def script(req, n):
        idx = int(req["body"]["messages"][0]["content"][0]["text"])
        try:
            everyone_in.wait()
        except threading.BrokenBarrierError:
            return 400, {}, {"error": "requests were not concurrent"}
        return 200, {}, _openai_ok(f"answer {idx}")

    server.script = script
    lm = OpenAIAudioLM(base_url=_url(server), api_key=KEY, concurrency=5)
    prompts = [Prompt((str(i), _prompt("x").audios[0]), clip_id=str(i)) for i in range(5)]
    assert lm.generate(prompts) == [f"answer {i}" for i in range(5)]
    lm.auto_batch(64)  # --batch-size auto sizes GPU batches; it must not open 64 connections
    assert lm.concurrency == lm.batch_size == 5
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIAudioLM(api_key=KEY, concurrency=0)


def test_key_never_appears_in_errors_logs_repr_or_provenance(server, caplog):
    # The server echoes the key in every error body; the wrapper must not pass it on anywhere.
    server.script = lambda req, n: (503, {}, {"error": f"bad key {KEY}"}) if n == 1 else (
        400, {}, {"error": f"bad key {KEY}"})
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY)
    _recording(lm)
    with caplog.at_level(logging.DEBUG):
        (item,) = lm.generate_items([_prompt("a")])
    assert isinstance(item, ModelError) and "HTTP 400" in item.message and "***" in item.message
    assert len(server.requests) == 2  # the 503 is retried, the 400 is not
    assert "HTTP 503" in caplog.text  # the retry was logged...
    for text in (item.message, repr(item), str(item), caplog.text, repr(lm), str(lm), json.dumps(lm.provenance())):
        assert KEY not in text  # ...without the key
    assert all(KEY not in r["path"] for r in server.requests)


def test_connection_errors_and_credentials_in_urls_stay_secret(caplog):
    with socket.socket() as s:  # a port nothing listens on: a connection error whose text must not carry the key
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lm = OpenAIAudioLM(base_url=f"http://user:{KEY}@127.0.0.1:{port}/v1", api_key=KEY, max_retries=1)
    _recording(lm)
    with caplog.at_level(logging.DEBUG):
        (item,) = lm.generate_items([_prompt("a")])
    assert isinstance(item, ModelError) and "gave up after 2 attempts" in item.message
    for text in (item.message, caplog.text, repr(lm), json.dumps(lm.provenance())):
        assert KEY not in text
    assert lm.provenance()["endpoint"] == f"http://127.0.0.1:{port}/v1"


def test_a_key_with_control_characters_is_refused_without_echoing_it(server):
    with pytest.raises(ModelError) as err:
        GeminiAudioLM(api_key="sk-secret-part\nx")
    assert "control characters" in err.value.message and "sk-secret-part" not in str(err.value)
    server.script = lambda req, n: (200, {}, _gemini_ok("increase"))
    GeminiAudioLM(base_url=_url(server), api_key=f"  {KEY}\n").generate([_prompt("a")])  # e.g. read from a file
    assert server.requests[0]["headers"]["x-goog-api-key"] == KEY  # the stray whitespace is trimmed


def test_empty_answer_is_an_error_not_a_blank(server):
    server.script = lambda req, n: (200, {}, {"candidates": [{"content": {"parts": []}, "finishReason": "SAFETY"}]})
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY)
    (item,) = lm.generate_items([_prompt("a")])
    assert isinstance(item, ModelError) and "SAFETY" in item.message


def test_no_choices_and_key_required(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="GEMINI_API_KEY"):
        GeminiAudioLM()
    lm = OpenAIAudioLM(api_key=KEY)
    assert lm.supports_choices is False
    with pytest.raises(ModelError, match="--mode generate"):
        lm.score_choices([_prompt("a")], ("increase", "decrease"))
