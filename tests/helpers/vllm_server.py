"""A loopback server that answers like vLLM's OpenAI-compatible chat completions and checks each request
against vLLM's documented schema (shared by the served-model and tracking tests; see tests/test_served_model.py)."""

from __future__ import annotations

import base64
import binascii
import io
import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import soundfile as sf

KEY = "vllm-test-key-5f3a9c"
SERVED_ID = "Qwen/Qwen2-Audio-7B-Instruct"
VLLM_VERSION = "0.11.0"
# Top-level request fields of vLLM's ChatCompletionRequest that a greedy text request may use; anything else
# (OpenAI's `modalities`, say) is refused here, so a request carrying it fails the test.
REQUEST_FIELDS = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
                  "seed", "n", "stop", "stream"}
PART_KEYS = {"text": {"type", "text"}, "input_audio": {"type", "input_audio"}}


def schema_errors(body: Any, served_id: str, rate: int) -> list[str]:
    """What in `body` breaks vLLM's documented chat-completions schema for audio (empty: a valid request)."""
    if not isinstance(body, dict):
        return ["body is not an object"]
    errors = [f"unknown field {k!r}" for k in body if k not in REQUEST_FIELDS]
    if body.get("model") != served_id:
        errors.append(f"model {body.get('model')!r} is not the served {served_id!r}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*errors, "messages must be a non-empty list"]
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            errors.append("a message without a known role")
            continue
        content = m.get("content")
        parts = content if isinstance(content, list) else []
        errors += [e for p in parts for e in _part_errors(p, rate)]
    return errors


def _part_errors(part: Any, rate: int) -> list[str]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind not in PART_KEYS or set(part) != PART_KEYS[kind]:
        return [f"content part {part if not isinstance(part, dict) else sorted(part)} is not text / input_audio"]
    if kind == "text":
        return [] if isinstance(part["text"], str) else ["text part without a string"]
    audio = part["input_audio"]
    if not isinstance(audio, dict) or set(audio) != {"data", "format"} or audio["format"] != "wav":
        return ["input_audio must be {data, format: wav}"]
    try:
        wav = base64.b64decode(audio["data"], validate=True)
        info = sf.info(io.BytesIO(wav))
    except (binascii.Error, ValueError, RuntimeError, TypeError) as err:
        return [f"input_audio data is not base64 WAV ({err})"]
    return [] if info.samplerate == rate and info.channels == 1 else [f"audio at {info.samplerate} Hz, not {rate}"]


def vllm_answer(served_id: str, text: str, finish: str = "stop") -> dict[str, Any]:
    """A chat completion as vLLM's ChatCompletionResponse serialises it."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": served_id,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "reasoning_content": None,
                                              "tool_calls": []},
                     "logprobs": None, "finish_reason": finish, "stop_reason": None}],
        "usage": {"prompt_tokens": 120, "total_tokens": 121, "completion_tokens": 1, "prompt_tokens_details": None},
        "prompt_logprobs": None,
    }


class VLLMServer(ThreadingHTTPServer):
    """A loopback stand-in for `vllm serve`: validates every request, answers through `script`."""

    daemon_threads = True

    def __init__(self, served_id: str = SERVED_ID, key: str | None = KEY, rate: int = 16000) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.served_id, self.key, self.rate = served_id, key, rate
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.gate: threading.Barrier | None = None  # the first requests wait here until that many are in flight
        # (n-th request, body) -> (status, json body) or "close" (headers sent, body cut short)
        self.script: Callable[[int, dict], tuple[int, dict] | str] = lambda n, body: (200, vllm_answer(
            self.served_id, "increase"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: VLLMServer

    def _authorised(self) -> bool:
        if self.server.key is None or self.headers.get("Authorization") == f"Bearer {self.server.key}":
            return True
        self._send(401, {"error": {"message": "Unauthorized"}})
        return False

    def _send(self, status: int, payload: dict, cut: bool = False) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2] if cut else data)
        if cut:
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path == "/version":  # unauthenticated in vLLM (only /v1 paths need the key)
            self._send(200, {"version": VLLM_VERSION})
        elif self.path == "/v1/models" and self._authorised():
            self._send(200, {"object": "list", "data": [{"id": self.server.served_id, "object": "model"}]})
        elif self.path != "/v1/models":
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions" or not self._authorised():
            if self.path != "/v1/chat/completions":
                self._send(404, {"detail": "Not Found"})
            return
        srv = self.server
        with srv.lock:
            srv.requests.append(body)
            n = len(srv.requests)
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
            bad = schema_errors(body, srv.served_id, srv.rate)
            srv.errors += bad
        try:
            if srv.gate is not None and n <= srv.gate.parties:
                srv.gate.wait(timeout=60)  # a condition, not a sleep: every party must be in flight at once
            reply = (400, {"object": "error", "message": "; ".join(bad)}) if bad else srv.script(n, body)
        finally:
            with srv.lock:
                srv.in_flight -= 1
        if reply == "close":
            self._send(200, vllm_answer(srv.served_id, "increase"), cut=True)
        else:
            self._send(*reply)

    def log_message(self, *args: object) -> None:
        pass
