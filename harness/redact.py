"""Secrets (API keys, tokens, passwords) passed as model arguments never reach a file or a log.

An argument is secret when a word of its name (split at `_`, `-`, `.` and case changes) is one of
SECRET_WORDS, e.g. `api_key`, `hf_token`, `client-secret`, `apiKey`; `max_new_tokens` or `tokenizer`
are not. Records keep the name with the value replaced by REDACTED, so a reader sees that one was given.
A URL anywhere in a record loses its credentials the same way: `http://user:PASS@host/v1?sig=X` is written
`http://***@host/v1?sig=***` (query values other than PLAIN_QUERY ones, such as api-version, are secrets).
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


# Query parameters a URL may carry without a secret (anything else, `?sig=`, `?code=`, is redacted).
PLAIN_QUERY = frozenset({"api-version", "api_version", "version", "revision", "model", "format", "lang", "language"})
MIN_URL_SECRET = 4
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


def _url_secrets(url: str) -> list[str]:
    """The secret parts of one URL: the user-info (user:password) and the query values not in PLAIN_QUERY."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.netloc.rpartition("@")[0]] if "@" in parts.netloc else []
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() not in PLAIN_QUERY]
    found += [v for k, v in parse_qsl(parts.fragment) if k.lower() not in PLAIN_QUERY]
    return [f for f in found if f]


def url_secrets(text: str) -> list[str]:
    """The credentials inside every URL of `text` (user:password@, secret query values), longest first."""
    # short values (`?n=1`) would scrub every digit of free text; the records redact them structurally
    found = {s for url in _URL.findall(str(text)) for s in _url_secrets(url) if len(s) >= MIN_URL_SECRET}
    return sorted(found, key=len, reverse=True)


def redact_urls(text: str) -> str:
    """`text` with the credentials of every URL in it (`http://user:PASS@host`, `?sig=...`) as REDACTED."""

    return _URL.sub(lambda m: _redact_url(m.group(0)), text) if "://" in text else text


def _redact_url(url: str) -> str:
    """One URL rebuilt with its user-info and non-plain query/fragment values as REDACTED."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        p = urlsplit(url)
    except ValueError:
        return REDACTED  # unparseable: nothing of it is kept
    netloc = f"{REDACTED}@{p.netloc.rpartition('@')[2]}" if "@" in p.netloc else p.netloc
    return urlunsplit((p.scheme, netloc, p.path, _redact_pairs(p.query), _redact_pairs(p.fragment)))


def _redact_pairs(query: str) -> str:
    """`a=1&sig=XYZ` -> `a=***&sig=***` except for PLAIN_QUERY names; text without pairs is kept."""
    if "=" not in query:
        return query
    out = []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        out.append(pair if not eq or not value or name.lower() in PLAIN_QUERY else f"{name}={REDACTED}")
    return "&".join(out)


def redact_value(value: Any) -> Any:
    """Any record value with URL credentials redacted in its text, at any depth (secret names: `redact`)."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, Mapping):
        return redact(value)
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def without_url_credentials(obj: Any) -> Any:
    """A whole record (results.json, a submission) with every URL's credentials redacted in its text, at any
    depth; keys are kept as they are (a label named "token" is no secret: names are judged in `redact`)."""
    if isinstance(obj, str):
        return redact_urls(obj)
    if isinstance(obj, Mapping):
        return {k: without_url_credentials(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [without_url_credentials(v) for v in obj]
    return obj


def redact(args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `args` (a record: model args, settings, results) with every value of a secret-named key
    replaced by REDACTED and every URL's credentials redacted, at any depth."""
    return {k: REDACTED if is_secret_name(k) and v is not None else redact_value(v) for k, v in args.items()}


def public(args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` without its secret entries and URL credentials (for keys that decide a resume: a rotated token
    changes no answer)."""
    return {k: public(v) if isinstance(v, Mapping) else redact_value(v) for k, v in args.items()
            if not is_secret_name(k)}


def secret_values(args: Mapping[str, Any]) -> list[str]:
    """The secret values in `args` (nested too, URL credentials too), longest first, to scrub from free text."""
    found: list[str] = []
    for k, v in args.items():
        if isinstance(v, Mapping):
            found += secret_values(v)
        elif is_secret_name(k) and v not in (None, ""):
            found.append(str(v))
        elif isinstance(v, str):
            found += url_secrets(v)
    return sorted(set(found), key=len, reverse=True)


# PWD / OLDPWD hold the shell's directories, not passwords: scrubbing them would turn every path into ***/...
NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
MIN_ENV_SECRET = 8  # shorter values of secret-named variables (flags such as HF_HUB_DISABLE_TOKEN=1) are no keys


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-named environment variables (OPENAI_API_KEY, GEMINI_API_KEY, HF_TOKEN, ...), longest
    first: a wrapper reads its key from there, and an endpoint echoing it must not put it in a file either."""
    env = os.environ if environ is None else environ
    found = {v.strip() for k, v in env.items()
             if is_secret_name(k) and k.upper() not in NOT_SECRET_ENV and len(v.strip()) >= MIN_ENV_SECRET}
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
