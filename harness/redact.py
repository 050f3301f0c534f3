"""Secrets (API keys, tokens, passwords) passed as model arguments never reach a file or a log.

An argument is secret when a word of its name (split at `_`, `-`, `.` and case changes) is one of
SECRET_WORDS, e.g. `api_key`, `hf_token`, `client-secret`, `apiKey`; `max_new_tokens` or `tokenizer`
are not. Records keep the name with the value replaced by REDACTED, so a reader sees that one was given.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

REDACTED = "***"
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential",
                          "credentials", "auth", "authorization", "bearer", "cookie"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def is_secret_name(name: str) -> bool:
    """True when an argument's name marks its value as a secret (api_key, HF_TOKEN, clientSecret, ...)."""
    return any(w.lower() in SECRET_WORDS for w in _WORD.findall(str(name)))


def redact(args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `args` with every secret value (at any depth of nested mappings) replaced by REDACTED."""
    out: dict[str, Any] = {}
    for k, v in args.items():
        if is_secret_name(k) and v is not None:
            out[k] = REDACTED
        elif isinstance(v, Mapping):
            out[k] = redact(v)
        else:
            out[k] = v
    return out


def public(args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` without its secret entries (for keys that decide a resume: a rotated token changes no answer)."""
    return {k: public(v) if isinstance(v, Mapping) else v for k, v in args.items() if not is_secret_name(k)}


def secret_values(args: Mapping[str, Any]) -> list[str]:
    """The secret values in `args` (nested too), longest first, as strings to scrub from free text."""
    found: list[str] = []
    for k, v in args.items():
        if isinstance(v, Mapping):
            found += secret_values(v)
        elif is_secret_name(k) and v not in (None, ""):
            found.append(str(v))
    return sorted(set(found), key=len, reverse=True)


MIN_ENV_SECRET = 8  # shorter values of secret-named variables (flags such as HF_HUB_DISABLE_TOKEN=1) are no keys


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-named environment variables (OPENAI_API_KEY, GEMINI_API_KEY, HF_TOKEN, ...), longest
    first: a wrapper reads its key from there, and an endpoint echoing it must not put it in a file either."""
    env = os.environ if environ is None else environ
    found = {v.strip() for k, v in env.items() if is_secret_name(k) and len(v.strip()) >= MIN_ENV_SECRET}
    return sorted(found, key=len, reverse=True)


def run_secrets(args: Mapping[str, Any]) -> list[str]:
    """Every secret a run must scrub: the secret model args and the secret environment variables."""
    return sorted(set(secret_values(args)) | set(environment_secrets()), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret replaced by REDACTED."""
    for s in secrets:
        if s:
            text = text.replace(s, REDACTED)
    return text


def scrub_row(row: Mapping[str, Any], secrets: Iterable[str]) -> dict[str, Any]:
    """A record (samples row, model_info) with secrets removed from its text, at any depth."""
    secrets = list(secrets)
    if not secrets:
        return dict(row)
    return {k: _scrub_value(v, secrets) for k, v in row.items()}


def _scrub_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, Mapping):
        return scrub_row(value, secrets)
    if isinstance(value, (list, tuple)):
        return [_scrub_value(v, secrets) for v in value]
    return value


@contextlib.contextmanager
def scrubbed_logging(secrets: Iterable[str]) -> Iterator[None]:
    """Within the block, every log record of every logger has the secrets replaced by REDACTED.

    Scrubbing at record creation covers a wrapper that logs an exception echoing its key (an HTTP error
    naming the URL it called, say), whichever logger and handler it goes through.
    """
    secrets = [s for s in secrets if s]
    if not secrets:
        yield
        return
    make = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make(*args, **kwargs)
        text = record.getMessage()
        clean = scrub(text, secrets)
        if clean != text:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None:
            # the traceback text is rendered later from exc_info: render it now, scrubbed
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info), secrets)
            record.exc_info = None
        return record

    logging.setLogRecordFactory(factory)
    try:
        yield
    finally:
        logging.setLogRecordFactory(make)
