"""Hosted audio models over their REST wire formats (no SDK needed): Gemini and OpenAI chat completions.

Bounded concurrency (a thread pool), exponential back-off on 429/5xx/connection errors honouring
Retry-After, answers in input order, and a ModelError row for anything that still fails. API keys come
from the environment, are sent only in request headers and are scrubbed from every error message.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .base import BaseAudioLM, ModelError, wav_base64
from .protocol import Prompt

log = logging.getLogger(__name__)


class _Retryable(Exception):
    """A failure worth retrying (rate limit, server error, network), with the server's Retry-After if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class APIAudioLM(BaseAudioLM):
    """Shared retry/concurrency machinery; subclasses build one request and read one response."""

    kind = "api"
    supports_choices = False  # no token log-probabilities for audio prompts
    key_env = ""
    base_url_env = ""
    default_base_url = ""

    def __init__(
        self,
        name: str | None = None,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 120.0,
    ) -> None:
        super().__init__(name, batch_size=max(1, concurrency))
        self.model = model
        self.base_url = (base_url or os.environ.get(self.base_url_env) or self.default_base_url).rstrip("/")
        self._key = api_key if api_key is not None else os.environ.get(self.key_env, "")
        if not self._key:
            raise ModelError(f"{self.name}: set {self.key_env} to call {self.model}")
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # ---- subclass hooks -----------------------------------------------------------------------------
    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict[str, str], dict]:
        """(url, headers, JSON body) for one prompt."""
        raise NotImplementedError

    def _answer(self, data: dict) -> str:
        """The answer text of one response; raises ModelError when there is none."""
        raise NotImplementedError

    # ---- machinery ----------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _post(self, url: str, headers: dict[str, str], body: dict) -> dict:
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            detail = self._scrub(e.read().decode("utf-8", "replace")[:500])
            if e.code == 429 or e.code >= 500:
                raise _Retryable(f"HTTP {e.code}: {detail}", _retry_after(e.headers.get("Retry-After"))) from None
            raise ModelError(f"HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise _Retryable(self._scrub(f"{type(e).__name__}: {e}")) from None

    def _call(self, prompt: Prompt, max_new_tokens: int) -> str:
        url, headers, body = self._request(prompt, max_new_tokens)
        for attempt in range(self.max_retries + 1):
            try:
                return self._answer(self._post(url, headers, body))
            except _Retryable as e:
                if attempt == self.max_retries:
                    raise ModelError(f"gave up after {attempt + 1} attempts: {e}") from None
                backoff = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
                delay = e.retry_after if e.retry_after is not None else backoff
                log.info("%s: %s; retry %d in %.2fs", self.name, e, attempt + 1, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _call_safe(self, prompt: Prompt, max_new_tokens: int) -> str | ModelError:
        try:
            return self._call(prompt, max_new_tokens)
        except ModelError as e:
            return ModelError(self._scrub(e.message), prompt.clip_id)
        except Exception as e:  # noqa: BLE001 - any failure is that row's error
            return ModelError(self._scrub(f"{type(e).__name__}: {e}"), prompt.clip_id)

    def generate_items(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str | ModelError]:
        """One answer or ModelError per prompt, in input order, at most `concurrency` requests in flight."""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            results = list(pool.map(lambda p: self._call_safe(p, max_new_tokens), prompts))
        self.stats["item_errors"] += sum(isinstance(r, ModelError) for r in results)
        return results

    def score_items(self, prompts: list[Prompt], choices: tuple[str, ...]) -> list:
        raise ModelError(f"{self.name} is an API model without log-probabilities: use --mode generate")


class GeminiAudioLM(APIAudioLM):
    """Gemini generateContent with inline WAV; thinking level "low", temperature 1.0 (the published setup)."""

    key_env = "GEMINI_API_KEY"
    base_url_env = "GEMINI_BASE_URL"
    default_base_url = "https://generativelanguage.googleapis.com"

    def __init__(
        self,
        name: str | None = None,
        *,
        model: str = "gemini-3-flash-preview",
        temperature: float = 1.0,
        thinking_level: str = "low",
        **kwargs: Any,
    ) -> None:
        super().__init__(name, model=model, **kwargs)
        self.temperature = temperature
        self.thinking_level = thinking_level

    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict[str, str], dict]:
        parts = [
            {"text": s}
            if isinstance(s, str)
            else {"inlineData": {"mimeType": "audio/wav", "data": wav_base64(s.array, s.sampling_rate)}}
            for s in prompt.segments
        ]
        # No maxOutputTokens: thinking tokens count against it and would cut answers off.
        body = {
            "contents": [{"role": "user", "parts": parts}],
            "generationConfig": {
                "temperature": self.temperature,
                "thinkingConfig": {"thinkingLevel": self.thinking_level},
            },
        }
        url = f"{self.base_url}/v1beta/models/{self.model}:generateContent"
        return url, {"x-goog-api-key": self._key}, body

    def _answer(self, data: dict) -> str:
        candidates = data.get("candidates") or []
        if not candidates:
            reason = (data.get("promptFeedback") or {}).get("blockReason", "no candidates")
            raise ModelError(f"Gemini returned no answer ({reason})")
        first = candidates[0]
        parts = (first.get("content") or {}).get("parts") or []
        text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
        if not text:
            raise ModelError(f"Gemini returned no text (finishReason={first.get('finishReason')})")
        return text


class OpenAIAudioLM(APIAudioLM):
    """OpenAI chat completions with input_audio (base64 WAV), text output, temperature 0."""

    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self, name: str | None = None, *, model: str = "gpt-4o-audio-preview", temperature: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(name, model=model, **kwargs)
        self.temperature = temperature

    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict[str, str], dict]:
        content = [
            {"type": "text", "text": s}
            if isinstance(s, str)
            else {"type": "input_audio", "input_audio": {"data": wav_base64(s.array, s.sampling_rate), "format": "wav"}}
            for s in prompt.segments
        ]
        body = {
            "model": self.model,
            "modalities": ["text"],
            "temperature": self.temperature,
            "max_tokens": max_new_tokens,
            "messages": [{"role": "user", "content": content}],
        }
        return f"{self.base_url}/chat/completions", {"Authorization": f"Bearer {self._key}"}, body

    def _answer(self, data: dict) -> str:
        choices = data.get("choices") or []
        message = (choices[0].get("message") or {}) if choices else {}
        text = message.get("content")
        if not text:
            reason = choices[0].get("finish_reason") if choices else "no choices"
            raise ModelError(f"OpenAI returned no text ({message.get('refusal') or reason})")
        return text
