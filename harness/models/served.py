"""A model served behind an OpenAI-compatible chat-completions endpoint (vLLM's `vllm serve`), as an API model.

The request follows vLLM's documented chat-completions schema for audio (docs.vllm.ai, features/multimodal_inputs,
"Online Serving"; vllm/entrypoints/chat_utils.py): `messages[].content` parts `{"type": "text", "text": ...}` and
`{"type": "input_audio", "input_audio": {"data": <base64>, "format": "wav"}}`, which the server turns into a
`data:audio/wav;base64,...` URL and decodes itself; `max_tokens` and `temperature` 0 (greedy, as our transformers
runs decode). No OpenAI-only field (`modalities`) is sent. The server's `GET /version` answers
`{"version": VLLM_VERSION}` (vllm/entrypoints/openai/api_server.py); it is read once at start and recorded with
the served model id in results.json model_info.

The clips are resampled here to the rate the served family's front end expects: known when the served model id
names one of harness.models.families (its checkpoint, a local copy of it, or a name that starts with the
family's), else `--model-arg sampling_rate=`. Several servers of the same model share a run when `base_url`
lists them comma-separated: requests go round-robin, at most `concurrency` in flight in all.

A key is optional (a local vLLM runs without one): `api_key=`, `api_key_file=PATH` (the key is read from the
file) or the VLLM_API_KEY environment variable (the one `vllm serve` itself reads for --api-key). It is sent only
in the Authorization header and never written: records hold neither it nor the file's content.

Such a run is not the paper's protocol (other kernels, batching and chat-template handling than the transformers
runs): model_info["not_paper_protocol"] says so, and the report and the leaderboard flag it.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from .api import IDENTIFIER, APIAudioLM, APISpec, without_credentials
from .base import ModelError, wav_base64
from .families import FAMILIES, FamilySpec
from .protocol import AudioClip, Prompt

log = logging.getLogger(__name__)

SERVED = APISpec(
    name="openai-compatible",
    registry_name="openai-compatible",
    description=("an audio LM behind an OpenAI-compatible chat-completions server (vLLM): --model-arg "
                 "base_url=http://HOST:8000/v1[,model=SERVED_ID]; key optional (VLLM_API_KEY or api_key_file=); "
                 "input_audio WAV at the family's rate, T 0, max_tokens; not the paper's protocol"),
    model="",  # the served model id: --model-arg model=, else the one model the server lists
    default_base_url="",  # no default: the server must be named
    base_url_env="",
    key_env="VLLM_API_KEY",  # what `vllm serve` reads for --api-key; never OPENAI_API_KEY (an OpenAI key stays home)
    auth_header="Authorization",
    auth_scheme="Bearer ",
    generation={"temperature": 0.0},  # greedy, as the transformers wrappers decode
    budget_field="max_tokens",  # accepted by every vLLM release (max_completion_tokens only by newer ones)
    samples=False,
    version_fields=("model",),
    key_required=False,
    source="docs.vllm.ai features/multimodal_inputs (chat completions, input_audio {data: base64, format: wav}); "
    "vllm/entrypoints/chat_utils.py parse_input_audio; vllm/entrypoints/openai/api_server.py GET /version",
)

NOT_PAPER_PROTOCOL = ("served over an OpenAI-compatible endpoint ({server}): other kernels, batching and chat-template "
                      "handling than the paper's transformers runs")


def served_family(model_id: str) -> FamilySpec | None:
    """The family a served model id names: its checkpoint id, or a last path part (a local copy, a
    --served-model-name) that starts with the family's name; None when it names none of ours."""
    last = model_id.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    for spec in sorted(FAMILIES.values(), key=lambda f: len(f.name), reverse=True):
        checkpoint = spec.checkpoint.rsplit("/", 1)[-1].lower()
        if last in (checkpoint, spec.registry_name.lower()) or last.startswith(spec.name.lower()):
            return spec
    return None


def read_key_file(path: str) -> str:
    """The key stored in `path` (stripped); a one-line error naming the file, never its content."""
    file = Path(path).expanduser()
    try:
        return file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ModelError(f"api_key_file {file}: cannot be read ({type(err).__name__})") from None


def version_url(base_url: str) -> str:
    """Where a vLLM server answers GET /version: its root, i.e. `base_url` without the /v1 suffix."""
    parts = urllib.parse.urlsplit(base_url)
    root = parts.path.rstrip("/").removesuffix("/v1")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, f"{root}/version", "", ""))


class ServedAudioLM(APIAudioLM):
    """An OpenAI-compatible server (vLLM) answering with any audio LM it serves; see the module docstring."""

    spec = SERVED

    def __init__(
        self,
        name: str | None = None,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        api_key_file: str | None = None,
        sampling_rate: int | None = None,
        **kwargs: Any,
    ) -> None:
        urls = [u.strip().rstrip("/") for u in (base_url or "").split(",") if u.strip()]
        if not urls:
            raise ModelError(f"{name or SERVED.registry_name}: give the server, e.g. --model-arg "
                             "base_url=http://localhost:8000/v1 (several, comma-separated, share the run)")
        if api_key is not None and api_key_file is not None:
            raise ModelError(f"{name or SERVED.registry_name}: give api_key or api_key_file, not both")
        key = read_key_file(api_key_file) if api_key_file is not None else api_key
        super().__init__(name, model=model, base_url=urls[0], api_key=key, **kwargs)
        self.base_urls = urls
        self._next_url = itertools.count()
        self._url_lock = threading.Lock()
        self.model = self.model or self._listed_model()
        self.family = served_family(self.model)
        self.sampling_rate = self._rate(sampling_rate)
        self.server_versions = {without_credentials(u): self._server_version(u) for u in urls}

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={[without_credentials(u) for u in self.base_urls]!r})"

    def _rate(self, sampling_rate: int | None) -> int:
        """The rate clips are sent at: the one asked for, else the served family's."""
        if sampling_rate is not None:
            if int(sampling_rate) < 1:
                raise ModelError(f"{self.name}: sampling_rate must be a positive number of Hz, got {sampling_rate}")
            return int(sampling_rate)
        if self.family is None:
            raise ModelError(f"{self.name}: the served model {self.model!r} names none of the families "
                             f"({', '.join(FAMILIES)}); give the rate its front end expects: "
                             "--model-arg sampling_rate=16000")
        return self.family.sampling_rate

    def _get(self, url: str) -> Any:
        """JSON of one GET (the key in its header); errors propagate to the caller."""
        request = urllib.request.Request(url, headers=self._headers())
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return json.loads(response.read())

    def _listed_model(self) -> str:
        """The one model the server lists (GET /v1/models) when --model-arg model= was not given."""
        try:
            data = self._get(f"{self.base_url}/models")
            ids = [m["id"] for m in data["data"]]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ModelError(self._scrub(f"{self.name}: cannot list the served models at {without_credentials(self.base_url)} "
                                         f"({type(err).__name__}: {err}); give --model-arg model=SERVED_ID")) from None
        if len(ids) != 1 or not isinstance(ids[0], str) or not IDENTIFIER.fullmatch(ids[0]):
            raise ModelError(f"{self.name}: the server lists {len(ids)} models; pick one with --model-arg model=")
        return ids[0]

    def _server_version(self, base_url: str) -> str | None:
        """The server's vLLM version (GET /version), None where it does not say (another server, an old one)."""
        try:
            version = self._get(version_url(base_url)).get("version")
        except (OSError, ValueError, AttributeError) as err:
            log.warning("%s: %s gives no version (%s)", self.name, without_credentials(base_url), type(err).__name__)
            return None
        if not isinstance(version, str) or not IDENTIFIER.fullmatch(self._scrub(version)):
            log.warning("%s: %s: its version is not an identifier; not recorded", self.name, without_credentials(base_url))
            return None
        return version

    def _url(self) -> str:
        """The next server's base URL (round-robin)."""
        with self._url_lock:
            return self.base_urls[next(self._next_url) % len(self.base_urls)]

    def _part(self, segment: str | AudioClip) -> dict[str, Any]:
        """One content part: text, or the clip as 16-bit WAV at the served family's rate."""
        if isinstance(segment, str):
            return {"type": "text", "text": segment}
        from harness.audio import mono_at

        wav = wav_base64(mono_at(segment, self.sampling_rate), self.sampling_rate)
        return {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}

    def _request(self, prompt: Prompt, max_new_tokens: int) -> tuple[str, dict]:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": [self._part(s) for s in prompt.segments]}],
            **self._generation(),
            self.spec.budget_field: max_new_tokens,
        }
        return f"{self._url()}/chat/completions", body

    def _answer(self, data: dict) -> str:
        choices = data.get("choices") or []
        message = (choices[0].get("message") or {}) if choices else {}
        text = message.get("content")
        if not isinstance(text, str) or not text:
            reason = choices[0].get("finish_reason") if choices else "no choices"
            raise ModelError(f"the server returned no text (finish_reason={reason})")
        return text

    def _server(self) -> str:
        """'vLLM 0.11.0' (each version once), or 'version unknown' where no server said."""
        versions = sorted({v for v in self.server_versions.values() if v})
        return f"vLLM {', '.join(versions)}" if versions else "server version unknown"

    def provenance(self) -> dict[str, Any]:
        """The API record plus the served model, the server versions, the family and rate, and the
        not-the-paper's-protocol flag. Never the key."""
        return {
            **super().provenance(),
            "endpoint": [without_credentials(u) for u in self.base_urls],
            "served_model": self.model,
            "server_versions": dict(self.server_versions),
            "vllm_version": next(iter(sorted(v for v in self.server_versions.values() if v)), None),
            "family": self.family.name if self.family is not None else None,
            "sampling_rate": self.sampling_rate,
            "not_paper_protocol": [NOT_PAPER_PROTOCOL.format(server=self._server())],
        }
