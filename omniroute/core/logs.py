"""Logging: plain lines or one JSON object a line, each carrying the request id it belongs
to (in a request, and in the jobs a request queued), and the line that says what a request
did (route, status, latency, key id, provider, model, memories injected).

`LOG_FORMAT=json` is for log collectors; `plain` for people; `auto` (the default) is plain on
a terminal and JSON otherwise (a platform's log drain, a container). The request id comes
from the client's `X-Request-ID` when it is a sane token, else is made here; it goes back in
the response's `X-Request-ID` and rides along with the jobs (RQ job meta, or the in-process
runner), so one id finds a chat and the extraction it caused.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from flask import g, has_request_context
from rq import get_current_job

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
# What a LogRecord has of its own; any other attribute was passed as `extra`.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "omniroute_request_id",
    "omniroute_job_id",
    "color_message",  # uvicorn's message with terminal colours
}
request_log = logging.getLogger("omniroute.request")


def current_request_id() -> str | None:
    """The id of the request being answered, or of the one a running job was queued by."""
    if has_request_context():
        return g.get("request_id")
    return _request_id.get()


def request_id_from(header: str | None) -> str:
    """The client's id when it is a sane token (letters, digits, `._:-`, up to 128), else a
    new one: a hostile header never reaches a log line as it came."""
    if header and _SANE_REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


@contextmanager
def bound_request_id(request_id: str | None) -> Iterator[None]:
    """Log lines inside carry `request_id`: a job run in this process for a request."""
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)


def _with_ids(make_record):
    """A LogRecord factory that puts the request id and job id on every record, so that every
    handler sees them: the request's id (in one), the bound id (a job run here), or in an RQ
    work horse the job's own id and the request id in its meta. Their attribute names are
    our own: a library's `extra={"job_id": ...}` (RQ's) must not collide with them."""

    def make(*args, **kwargs) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        record.omniroute_request_id = current_request_id()
        record.omniroute_job_id = None
        job = get_current_job()
        if job is not None:
            record.omniroute_job_id = job.id
            record.omniroute_request_id = record.omniroute_request_id or job.meta.get("request_id")
        return record

    make.omniroute = True  # type: ignore[attr-defined]
    return make


# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: a value
# holding one must not start a line of its own (a forged log line) or move the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped(text: str) -> str:
    """`text` with every control character written out (`\\n`, `\\x1b`, `\\u2028`)."""

    def spelled(match: re.Match[str]) -> str:
        char = match.group()
        return _NAMED.get(char) or (
            f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
        )

    return _CONTROL.sub(spelled, text)


def json_line(value: object) -> str:
    """`value` as one line of JSON: json escapes C0 itself, and here the C1 characters and
    line separators it would leave as they are."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class PlainFormatter(logging.Formatter):
    """PLAIN_FORMAT with the message's control characters escaped: one record, one line
    (a traceback below it stays as Python wrote it)."""

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = escaped(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the ids, any `extra` fields,
    and the traceback of an exception."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("request_id", "job_id"):
            if value := getattr(record, f"omniroute_{name}", None):
                line[name] = value
        line.update(
            (name, value) for name, value in vars(record).items() if name not in _RECORD_FIELDS
        )
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json_line(line)


def uses_json(log_format: str) -> bool:
    return log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())


def configure(level: str, log_format: str, packages: tuple[str, ...]) -> None:
    """The root handler (stderr) in the chosen format, with the ids on every record; the
    packages' loggers at `level`."""
    if not getattr(logging.getLogRecordFactory(), "omniroute", False):
        logging.setLogRecordFactory(_with_ids(logging.getLogRecordFactory()))
    root = logging.getLogger()
    if not any(getattr(handler, "omniroute", False) for handler in root.handlers):
        handler = logging.StreamHandler()
        handler.omniroute = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    for handler in root.handlers:
        if getattr(handler, "omniroute", False):
            handler.setFormatter(JsonFormatter() if uses_json(log_format) else PlainFormatter())
    for name in packages:
        logging.getLogger(name).setLevel(level)


def log_event(
    logger: logging.Logger, event: str, level: int = logging.INFO, **fields: object
) -> None:
    """A named event (`memory.injection.injected`): in plain text the name and its fields
    as `name=value`, in JSON `event` and each field of its own."""
    known = {name: value for name, value in fields.items() if value is not None}
    text = "".join(f" {name}={value}" for name, value in known.items())
    logger.log(level, "%s%s", event, text, extra={"event": event} | known)


def log_request(method: str, route: str, status: int, started: float, **fields) -> None:
    """The one line a request leaves: in plain text for people, its fields for JSON."""
    latency_ms = round((time.perf_counter() - started) * 1000, 2)
    known = {name: value for name, value in fields.items() if value is not None}
    text = "".join(f" {name}={value}" for name, value in known.items())
    request_log.info(
        "%s %s %s %.1f ms%s",
        method,
        route,
        status,
        latency_ms,
        text,
        extra={"method": method, "route": route, "status": status, "latency_ms": latency_ms}
        | known,
    )
