"""The listening-test server in a thread on 127.0.0.1, a minimal client for its API, and where the headless
browser is (shared by the listening tests)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from listening.app import create_app
from listening.store import Store
from listening.study import AudioProvider

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required",
                 "--mute-audio"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """A minimal HTTP client for the API (urllib, loopback only)."""

    def __init__(self, base: str, token: str | None) -> None:
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(HTTP status, JSON body or raw bytes) of one request to the server."""
        assert self.base.startswith("http://127.0.0.1:")
        headers = {"Content-Type": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                data, status, kind = r.read(), r.status, r.headers.get("content-type", "")
        except urllib.error.HTTPError as err:
            data, status, kind = err.read(), err.code, err.headers.get("content-type", "")
        return status, json.loads(data) if kind.split(";")[0] == "application/json" else data

    def ready(self) -> dict[str, Any]:
        """Log in, consent, hear the examples and finish training; the state of the first item (a study
        without a headphone screen)."""
        status, state = self.call("POST", "/api/consent")
        assert status == 200
        for ex in state["training"]:
            assert self.call("GET", f"/api/training/{ex['index']}/audio")[0] == 200
        status, state = self.call("POST", "/api/training/done")
        assert status == 200
        return state

    def answer(self, item: dict[str, Any], answer: str, fetch_audio: bool = True) -> tuple[int, Any]:
        """Answer one item, after fetching its audio as the page does (unless fetch_audio is False)."""
        if fetch_audio:
            status, wav = self.call("GET", f"/api/item/{item['seq']}/audio?nonce={item['nonce']}")
            assert status == 200 and wav[:4] == b"RIFF"
        return self.call("POST", "/api/answer", {"seq": item["seq"], "nonce": item["nonce"], "answer": answer,
                                                 "client_ms": 500, "plays": 1})


class Server:
    """uvicorn serving a study in a thread on 127.0.0.1."""

    def __init__(self, store: Store) -> None:
        import uvicorn

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.audio = AudioProvider(store)
        self.server = uvicorn.Server(uvicorn.Config(create_app(store, self.audio), host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
