"""API wrappers against a local HTTP server speaking each provider's wire format."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
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
                            "finishReason": "STOP"}]}


def _openai_ok(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def test_gemini_wire_format(server):
    server.script = lambda req, n: (200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY)
    assert lm.generate([_prompt("a", sr=48000)]) == ["increase"]  # the thought part is not the answer
    (req,) = server.requests
    assert req["path"] == "/v1beta/models/gemini-3-flash-preview:generateContent"
    assert req["headers"]["x-goog-api-key"] == KEY
    parts = req["body"]["contents"][0]["parts"]
    assert parts[0] == {"text": QUESTION + "\n\n"}
    audio, sr = _decode_wav(parts[1]["inlineData"]["data"])
    assert parts[1]["inlineData"]["mimeType"] == "audio/wav" and sr == 48000 and len(audio) == 24000
    assert req["body"]["generationConfig"] == {"temperature": 1.0, "thinkingConfig": {"thinkingLevel": "low"}}


def test_openai_wire_format(server):
    server.script = lambda req, n: (200, {}, _openai_ok("decrease"))
    lm = OpenAIAudioLM(base_url=_url(server) + "/v1", api_key=KEY)
    assert lm.generate([_prompt("a")], max_new_tokens=128) == ["decrease"]
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "gpt-4o-audio-preview" and body["modalities"] == ["text"]
    assert body["max_tokens"] == 128 and body["temperature"] == 0.0
    text, audio = body["messages"][0]["content"]
    assert text == {"type": "text", "text": QUESTION + "\n\n"}
    assert audio["type"] == "input_audio" and audio["input_audio"]["format"] == "wav"
    samples, sr = _decode_wav(audio["input_audio"]["data"])
    assert sr == 16000 and len(samples) == 8000


def test_429_backs_off_honouring_retry_after(server):
    server.script = lambda req, n: (429, {"Retry-After": "0.3"}, {"error": "slow down"}) if n == 1 else (
        200, {}, _gemini_ok("increase"))
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, backoff_s=0.001)
    start = time.monotonic()
    assert lm.generate([_prompt("a")]) == ["increase"]
    assert time.monotonic() - start >= 0.3  # waited what the server asked, not the 1 ms back-off
    assert len(server.requests) == 2


def test_persistent_500_becomes_an_error_row(server):
    def script(req, n):
        text = req["body"]["contents"][0]["parts"][0]["text"]
        return (500, {}, {"error": "boom"}) if "fail" in text else (200, {}, _gemini_ok("decrease"))

    server.script = script
    lm = GeminiAudioLM(base_url=_url(server), api_key=KEY, backoff_s=0.001, max_retries=3)
    bad = Prompt(("fail " + QUESTION, _prompt("x").audios[0]), clip_id="bad")
    items = lm.generate_items([_prompt("ok1"), bad, _prompt("ok2")])
    assert items[0] == "decrease" and items[2] == "decrease"
    assert isinstance(items[1], ModelError) and items[1].clip_id == "bad" and "HTTP 500" in items[1].message
    assert sum("fail" in r["body"]["contents"][0]["parts"][0]["text"] for r in server.requests) == 4
    with pytest.raises(ItemErrors):
        lm.generate([bad])


def test_results_keep_input_order_under_concurrency(server):
    def script(req, n):
        idx = int(req["body"]["messages"][0]["content"][0]["text"])
        time.sleep(0.05 * (5 - idx))  # later prompts finish first
        return 200, {}, _openai_ok(f"answer {idx}")

    server.script = script
    lm = OpenAIAudioLM(base_url=_url(server), api_key=KEY, concurrency=5)
    prompts = [Prompt((str(i), _prompt("x").audios[0]), clip_id=str(i)) for i in range(5)]
    start = time.monotonic()
    assert lm.generate(prompts) == [f"answer {i}" for i in range(5)]
    assert time.monotonic() - start < 0.5  # concurrent, not 0.75 s of serial sleeps


def test_key_never_appears_in_errors(server):
    server.script = lambda req, n: (400, {}, {"error": f"bad key {KEY}"})
    lm = OpenAIAudioLM(base_url=_url(server), api_key=KEY)
    (item,) = lm.generate_items([_prompt("a")])
    assert isinstance(item, ModelError) and "HTTP 400" in item.message and KEY not in item.message
    assert len(server.requests) == 1  # a 400 is not retried
    assert KEY not in repr(lm)


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
