"""Hosted audio models over their REST wire formats (no SDK needed): Gemini and OpenAI chat completions.

Bounded concurrency (a thread pool), exponential back-off on 429/5xx/connection errors honouring
Retry-After (never longer than max_backoff_s), answers in input order, and a ModelError row for anything
that still fails. What each provider's request holds is data in its APISpec, with the documentation it
follows.

API keys come from the environment (or api_key=), are sent only in a request header (never in a URL),
and are scrubbed from every error message and log line; repr() and provenance() never show them.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import os
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .base import BaseAudioLM, ModelError, wav_base64
from .external import answer_seed, check_protocol_name
from .protocol import Listing, Prompt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class APISpec(Listing):
    """How one provider's endpoint is called: authentication, fixed generation settings, token budget."""

    name: str
    model: str  # default model id
    default_base_url: str
    base_url_env: str
    key_env: str
    auth_header: str  # the one header that carries the key
    auth_scheme: str  # prefix of the header value ("Bearer " or "")
    generation: dict[str, Any] = field(default_factory=dict)  # sent with every request
    budget_field: str | None = None  # request field carrying max_new_tokens; None: the budget is not sent
    samples: bool = False  # answers are sampled: each request carries answer_seed(...) as its seed
    version_fields: tuple[str, ...] = ()  # response fields naming the model version that answered
    key_required: bool = True  # False: a server that may run without a key (a local vLLM); none sent then


GEMINI = APISpec(
    name="gemini",
    registry_name="gemini-3-flash",
    description=("gemini-3-flash-preview generateContent, inline WAV (GEMINI_API_KEY, sent as the x-goog-api-key "
                 "header); the paper's thinking low, T 1.0, top-k 5, output tokens capped at the budget "
                 "(protocol=card: the docs' settings, no cap, seeded)"),
    model="gemini-3-flash-preview",
    default_base_url="https://generativelanguage.googleapis.com",
    base_url_env="GEMINI_BASE_URL",
    key_env="GEMINI_API_KEY",
    auth_header="x-goog-api-key",  # the documented REST header; a ?key= query would put the key in URLs
    auth_scheme="",
    # The published setup: thinking level "low", temperature 1.0 (also Gemini 3's documented default; the
    # docs advise against lowering it). No maxOutputTokens: thinking tokens count against it, so the
    # runner's 128-token budget would cut answers off before they start.
    generation={"temperature": 1.0, "thinkingConfig": {"thinkingLevel": "low"}},
    budget_field=None,
    samples=True,  # generationConfig.seed makes the sample reproducible (best effort, server side)
    version_fields=("modelVersion",),
    source="ai.google.dev/api/generate-content (POST v1beta/models/{model}:generateContent, contents[].parts[] "
    "of text and inlineData {mimeType, data}; GenerationConfig temperature, seed, thinkingConfig.thinkingLevel; "
    "x-goog-api-key header); ai.google.dev/gemini-api/docs/audio (audio/wav inline data)",
)

OPENAI = APISpec(
    name="openai",
    registry_name="gpt-4o-audio",
    description=("gpt-4o-audio-preview chat completions with input_audio (OPENAI_API_KEY); text only, T 0, "
                 "max_completion_tokens"),
    model="gpt-4o-audio-preview",
    default_base_url="https://api.openai.com/v1",
    base_url_env="OPENAI_BASE_URL",
    key_env="OPENAI_API_KEY",
    auth_header="Authorization",
    auth_scheme="Bearer ",
    # Text answers only; temperature 0 answers greedily like the open models (not a model in the paper).
    generation={"modalities": ["text"], "temperature": 0.0},
    budget_field="max_completion_tokens",  # the current name; max_tokens is deprecated
    samples=False,
    version_fields=("model", "system_fingerprint"),
    source="platform.openai.com/docs/api-reference/chat/create (messages[].content parts {type: text} and "
    "{type: input_audio, input_audio: {data: base64, format: wav}}, modalities, max_completion_tokens) and "
    "platform.openai.com/docs/guides/audio",
)


# What a provider's model / version echo may be (names like "gpt-4o-audio-preview-2024-12-17", "fp_1a2b3c",
# "models/gemini-2.5-flash-001"); anything else (a huge string, control characters, an object) is not recorded.
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")
MODEL_FIELDS = frozenset({"model", "modelVersion"})  # echoes naming the model (system_fingerprint does not)


class RetryableError(Exception):
    """A failure worth retrying (rate limit, server error, network), with the server's Retry-After if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
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


def without_credentials(url: str) -> str:
    """`url` without user:password@ and without a query string (either may hold a secret)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class APIAudioLM(BaseAudioLM):
    """Shared retry/concurrency machinery; subclasses build one request and read one response."""

    kind = "api"
    supports_choices = False  # no token log-probabilities for audio prompts
    spec: APISpec
    sleep = staticmethod(time.sleep)  # how back-off waits (tests record the delays instead)

    def __init__(
        self,
        name: str | None = None,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 120.0,
        seed: int = 1234,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        # Requests in flight at once; the base class's batch is the same number (one call = one pool).
        super().__init__(name or self.spec.registry_name, batch_size=concurrency)
        self.model = model or self.spec.model
        self.base_url = (base_url or os.environ.get(self.spec.base_url_env) or self.spec.default_base_url).rstrip("/")
        key = (api_key if api_key is not None else os.environ.get(self.spec.key_env, "")).strip()
        if not key and self.spec.key_required:
            raise ModelError(f"{self.name}: set {self.spec.key_env} to call {self.model}")
        if any(c.isspace() or not c.isprintable() for c in key):
            # http.client would refuse the header with the key's repr in its message; say it without the key
            raise ModelError(f"{self.name}: {self.spec.key_env} holds whitespace or control characters")
        self._key = key
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self.seed = seed
        self._versions: set[str] = set()  # model versions the server reported answering with
        self._versions_lock = threading.Lock()

    @property
    def concurrency(self) -> int:
        return self.batch_size

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={without_credentials(self.base_url)!r})"

    def auto_batch(self, start: int) -> None:
        """`--batch-size auto` sizes GPU batches; an API call's width is `concurrency`, so it is kept."""

    # ---- subclass hooks -----------------------------------------------------------------------------
    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict]:
        """(url, JSON body) for one prompt."""
        raise NotImplementedError

    def _answer(self, data: dict) -> str:
        """The answer text of one response; raises ModelError when there is none."""
        raise NotImplementedError

    # ---- machinery ----------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        """`text` without the key (a server may echo it in an error body)."""
        return text.replace(self._key, "***") if self._key else text

    def _headers(self) -> dict[str, str]:
        auth = {self.spec.auth_header: self.spec.auth_scheme + self._key} if self._key else {}
        return {"Content-Type": "application/json", **auth}

    def _post(self, url: str, body: dict) -> dict:
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                data = json.loads(response.read())
        except urllib.error.HTTPError as e:
            detail = self._scrub(e.read().decode("utf-8", "replace")[:500])
            if e.code == 429 or e.code >= 500:
                raise RetryableError(f"HTTP {e.code}: {detail}", retry_after_seconds(e.headers.get("Retry-After"))) from None
            raise ModelError(f"HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as e:
            # HTTPException: a connection closed mid-answer (IncompleteRead) or a garbled status line
            raise RetryableError(self._scrub(f"{type(e).__name__}: {e}")) from None
        self._record_version(data)
        return data

    def _record_version(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        found = [self._checked_echo(k, data[k]) for k in self.spec.version_fields if k in data]
        if found:
            with self._versions_lock:
                self._versions.add(", ".join(found))

    def _checked_echo(self, field: str, value: Any) -> str:
        """`field=value` of a version field the server echoed, once checked: a short identifier without the key
        (else dropped, saying so), and a model name that is not the one asked for is marked."""
        text = self._scrub(value) if isinstance(value, str) else None
        if text is None or not IDENTIFIER.fullmatch(text):
            log.warning("%s: the server's %r field is not a model identifier; not recorded", self.name, field)
            return f"{field}=<not an identifier: dropped>"
        if field in MODEL_FIELDS and not (text.startswith(self.model) or self.model.startswith(text)):
            log.warning("%s: asked for %s, the server says it answered with %s", self.name, self.model, text)
            return f"{field}={text} (asked for {self.model})"
        return f"{field}={text}"

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry `attempt` + 1: the server's Retry-After, else jittered exponential back-off;
        never more than max_backoff_s (a Retry-After of an hour must not stall a run for an hour)."""
        if retry_after is not None:
            return min(self.max_backoff_s, retry_after)
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)

    def _call(self, prompt: Prompt, max_new_tokens: int) -> str:
        url, body = self._request(prompt, max_new_tokens)
        for attempt in range(self.max_retries + 1):
            try:
                return self._scrub(self._answer(self._post(url, body)))  # an echoed key stops here
            except RetryableError as e:
                if attempt == self.max_retries:
                    raise ModelError(f"gave up after {attempt + 1} attempts: {e}") from None
                delay = self._delay(attempt, e.retry_after)
                log.info("%s: %s; retry %d in %.2fs", self.name, e, attempt + 1, delay)
                self.sleep(delay)
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

    def provenance(self) -> dict[str, Any]:
        """results.json model_info: the model asked for, the versions the server answered with, the
        endpoint (without credentials) and every fixed request setting. Never the key."""
        with self._versions_lock:
            versions = sorted(self._versions)
        return {
            "model_id": self.model,
            "revision": None,
            "commit": None,
            "api_model_versions": versions,
            "dtype": None,
            "device": "api",
            "endpoint": without_credentials(self.base_url),
            "api": self.spec.name,
            "generation": self._generation(),
            "budget_field": self.spec.budget_field,
            "seed": self.seed if self.spec.samples else None,
            "seeding": "per request: sha256(seed:clip_id:max_new_tokens)" if self.spec.samples else "not sampled",
            "source": self.spec.source,
        }

    def _generation(self) -> dict[str, Any]:
        """The generation settings this instance sends (the spec's, with constructor overrides)."""
        return dict(self.spec.generation)


class GeminiAudioLM(APIAudioLM):
    """Gemini generateContent with inline WAV; thinking level "low", temperature 1.0 (the published setup)."""

    spec = GEMINI

    # The paper's request (ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_gemini):
    # GenerateContentConfig(temperature, top_k=5, max_output_tokens=the budget, thinking level), no seed.
    PAPER_TOP_K = 5

    def __init__(
        self,
        name: str | None = None,
        *,
        temperature: float = GEMINI.generation["temperature"],
        thinking_level: str = GEMINI.generation["thinkingConfig"]["thinkingLevel"],
        protocol: str = "paper",
        **kwargs: Any,
    ) -> None:
        super().__init__(name, **kwargs)
        self.temperature = temperature
        self.thinking_level = thinking_level
        self.protocol = check_protocol_name(protocol, self.name)

    def _generation(self) -> dict[str, Any]:
        base = {"temperature": self.temperature, "thinkingConfig": {"thinkingLevel": self.thinking_level}}
        if self.protocol == "paper":  # the budget is each request's maxOutputTokens (128, then 256 on the retry)
            return {**base, "topK": self.PAPER_TOP_K}
        return base

    def provenance(self) -> dict[str, Any]:
        """The common record plus the protocol; under the paper's, the budget field and no seed."""
        info = {**super().provenance(), "protocol": self.protocol}
        if self.protocol == "paper":
            info.update(budget_field="maxOutputTokens", seed=None, seeding="none (as in the paper)",
                        source="ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_gemini; " + GEMINI.source)
        return info

    def _config(self, prompt: Prompt, max_new_tokens: int) -> dict[str, Any]:
        """generationConfig of one request: the paper's (budget as maxOutputTokens) or the docs' (seeded)."""
        if self.protocol == "paper":
            return {**self._generation(), "maxOutputTokens": max_new_tokens}
        return {**self._generation(), "seed": answer_seed(self.seed, prompt.clip_id, max_new_tokens)}

    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict]:
        parts = [
            {"text": s}
            if isinstance(s, str)
            else {"inlineData": {"mimeType": "audio/wav", "data": wav_base64(s.array, s.sampling_rate)}}
            for s in prompt.segments
        ]
        body = {"contents": [{"role": "user", "parts": parts}], "generationConfig": self._config(prompt, max_new_tokens)}
        return f"{self.base_url}/v1beta/models/{self.model}:generateContent", body

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

    spec = OPENAI

    def __init__(
        self, name: str | None = None, *, temperature: float = OPENAI.generation["temperature"], **kwargs: Any
    ) -> None:
        super().__init__(name, **kwargs)
        self.temperature = temperature

    def _generation(self) -> dict[str, Any]:
        return {**self.spec.generation, "temperature": self.temperature}

    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict]:
        content = [
            {"type": "text", "text": s}
            if isinstance(s, str)
            else {"type": "input_audio", "input_audio": {"data": wav_base64(s.array, s.sampling_rate), "format": "wav"}}
            for s in prompt.segments
        ]
        body = {
            "model": self.model,
            **self._generation(),
            self.spec.budget_field: max_new_tokens,
            "messages": [{"role": "user", "content": content}],
        }
        return f"{self.base_url}/chat/completions", body

    def _answer(self, data: dict) -> str:
        choices = data.get("choices") or []
        message = (choices[0].get("message") or {}) if choices else {}
        text = message.get("content")
        if not text:
            reason = choices[0].get("finish_reason") if choices else "no choices"
            raise ModelError(f"OpenAI returned no text ({message.get('refusal') or reason})")
        return text
