"""Structured logs: a line per request with its id and fields, JSON for collectors, and the
request id passed on to the jobs a request queues (in-process and through RQ)."""

import io
import json
import logging
import sys

import pytest
from rq import Queue

from omniroute.core import logs
from omniroute.jobs import EXTRACTION_QUEUE
from tests.helpers import REDIS_TEST_URL
from tests.test_jobs import run_worker

TEXT = "I prefer TypeScript."


@pytest.fixture
def lines():
    """What the app's own handler writes, one parsed JSON object a line."""
    stream = io.StringIO()
    logs.configure("INFO", "json", ("omniroute",))  # the handler the apps will use
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "omniroute", False))
    old_stream, old_formatter = handler.setStream(stream), handler.formatter
    handler.setFormatter(logs.JsonFormatter())
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    handler.setStream(old_stream)
    handler.setFormatter(old_formatter)


def chat(app, secret: str, **headers):
    return app.test_client().post(
        "/v1/chat/completions",
        json={"model": "fake/m", "messages": [{"role": "user", "content": TEXT}]},
        headers={"Authorization": f"Bearer {secret}", **headers},
    )


def requests_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r["logger"] == "omniroute.request"]


def test_a_chat_leaves_one_json_line_with_its_fields_and_never_the_secret(make_app, lines):
    app = make_app(LOG_FORMAT="json")
    key, secret = app.extensions["omniroute"].keys.create("alice")
    app.extensions["omniroute"].memories.create(
        api_key_id=key.id, key="a", content="I prefer TypeScript"
    )
    response = chat(app, secret, **{"X-Request-ID": "trace-42"})
    assert response.headers["X-Request-ID"] == "trace-42"
    app.extensions["omniroute"].jobs.wait(10)
    (line,) = requests_of(lines())
    assert line["request_id"] == "trace-42"
    assert line["route"] == "/v1/chat/completions" and line["method"] == "POST"
    assert line["status"] == 200 and line["latency_ms"] >= 0
    assert line["key_id"] == key.id
    assert (line["provider"], line["model"], line["memories_injected"]) == ("fake", "m", 1)
    assert secret not in json.dumps(lines())


def test_the_request_id_is_made_when_missing_or_not_a_sane_token(make_app, lines):
    app = make_app(LOG_FORMAT="json")
    client = app.test_client()
    made = client.get("/healthz").headers["X-Request-ID"]
    assert len(made) == 32 and int(made, 16) >= 0
    hostile = client.get("/healthz", headers={"X-Request-ID": "a b\u202e" + "x" * 300})
    assert hostile.headers["X-Request-ID"] not in ("", "a b\u202e" + "x" * 300)
    assert {line["request_id"] for line in requests_of(lines())} == {
        made,
        hostile.headers["X-Request-ID"],
    }


def test_an_upstream_failure_is_logged_with_its_provider_and_status(make_app, lines):
    app = make_app(LOG_FORMAT="json")
    _, secret = app.extensions["omniroute"].keys.create("alice")
    app.test_client().post(
        "/v1/chat/completions",
        json={"model": "fake/fail-429", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {secret}", "X-Request-ID": "r-429"},
    )
    (failure,) = [line for line in lines() if line["logger"] == "omniroute.proxy.upstream"]
    assert failure["level"] == "WARNING" and failure["request_id"] == "r-429"
    assert (failure["provider"], failure["upstream_status"]) == ("fake", 429)


def test_an_in_process_job_logs_with_the_id_of_the_request_that_queued_it(make_app, lines):
    app = make_app(LOG_FORMAT="json")
    _, secret = app.extensions["omniroute"].keys.create("alice")
    chat(app, secret, **{"X-Request-ID": "chat-1"})
    app.extensions["omniroute"].jobs.wait(10)
    jobs = [line for line in lines() if line["logger"] == "omniroute.jobs.tasks"]
    assert len(jobs) == 2 and {line["request_id"] for line in jobs} == {"chat-1"}


def test_an_rq_job_carries_the_request_id_to_the_worker(make_app, redis_db, tmp_path):
    app = make_app(LOG_FORMAT="json", REDIS_URL=REDIS_TEST_URL)
    _, secret = app.extensions["omniroute"].keys.create("alice")
    chat(app, secret, **{"X-Request-ID": "chat-rq"})
    app.extensions["omniroute"].jobs.wait(10)
    queued = Queue(EXTRACTION_QUEUE, connection=redis_db).jobs
    assert [job.meta["request_id"] for job in queued] == ["chat-rq", "chat-rq"]
    result = run_worker(tmp_path, LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    worked = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    facts = [line for line in worked if line["logger"] == "omniroute.jobs.tasks"]
    assert len(facts) == 2
    assert {line["request_id"] for line in facts} == {"chat-rq"}
    assert {line["job_id"] for line in facts} == {job.id for job in queued}


def test_plain_is_the_format_on_a_terminal_and_json_elsewhere(monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert not logs.uses_json("auto") and logs.uses_json("json")
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert logs.uses_json("auto") and not logs.uses_json("plain")


def test_a_json_line_holds_the_exception_and_any_extra_field():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord(
            "x",
            logging.ERROR,
            "f",
            1,
            "failed %s",
            ("here",),
            sys.exc_info(),
            extra={"provider": "p"},
        )
    line = json.loads(logs.JsonFormatter().format(record))
    assert line["message"] == "failed here" and line["provider"] == "p"
    assert "ValueError: boom" in line["exception"]


def test_a_library_that_passes_its_own_job_id_as_extra_still_logs(lines):
    """RQ logs a failed job with extra={"job_id": ...}: no clash with the ids we add."""
    logging.getLogger("rq.worker").error("job failed", extra={"job_id": "j-1", "request_id": "r"})
    (line,) = [line for line in lines() if line["logger"] == "rq.worker"]
    assert line["job_id"] == "j-1" and line["message"] == "job failed"


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_a_value_holding_a_newline_never_forges_a_second_line(make_app, log_format):
    """A model name with a newline, an escape sequence and a line separator in a chat: the
    request's record is one line in either format, and says what was sent."""
    stream = io.StringIO()
    app = make_app(LOG_FORMAT=log_format)
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "omniroute", False))
    old_stream = handler.setStream(stream)
    try:
        _, secret = app.extensions["omniroute"].keys.create("alice")
        model = (
            "fake/m\n2026-12-02 09:00:00 INFO omniroute.request: POST /admin 200\x1b[2J\u2028\x85"
        )
        app.test_client().post(
            "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {secret}"},
        )
    finally:
        handler.setStream(old_stream)
    written = stream.getvalue()
    assert not any(char in written for char in "\x1b\u2028\x85")
    (line,) = [line for line in written.split("\n") if "/v1/chat/completions" in line]
    assert "POST /admin" in line, "the value is kept, escaped, on the request's own line"
    assert not [line for line in written.split("\n") if line.startswith("2026-12-02 09:00:00")]
    if log_format == "json":
        assert json.loads(line)["model"].startswith("m\n2026-12-02")


def test_an_injection_is_logged_as_the_specifications_event(make_app, lines):
    app = make_app(LOG_FORMAT="json")
    key, secret = app.extensions["omniroute"].keys.create("alice")
    app.extensions["omniroute"].memories.create(
        api_key_id=key.id, key="a", content="I prefer TypeScript"
    )
    chat(app, secret, **{"X-Request-ID": "inject-1"})
    (event,) = [line for line in lines() if line.get("event") == "memory.injection.injected"]
    assert (event["count"], event["model"], event["request_id"]) == (1, "m", "inject-1")
    assert (
        event["strategy"] in ("hybrid", "keyword") and event["logger"] == "omniroute.proxy.pipeline"
    )
    assert event["message"].startswith("memory.injection.injected count=1 strategy=")


def test_a_failed_extraction_is_logged_as_the_specifications_event(make_app, lines, monkeypatch):
    app = make_app(LOG_FORMAT="json")
    svc = app.extensions["omniroute"]
    _, secret = svc.keys.create("alice")

    def broken(entry_id):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(svc.outbox, "process", broken)
    chat(app, secret, **{"X-Request-ID": "extract-1"})
    svc.jobs.wait(10)
    failed = [
        line for line in lines() if line.get("event") == "memory.extraction.background.failed"
    ]
    assert failed and {line["level"] for line in failed} == {"WARNING"}
    assert "the database went away" in failed[0]["error"] and failed[0]["request_id"] == "extract-1"
    assert chat(app, secret).status_code == 200, "a failed extraction never reaches the caller"


def test_events_read_as_one_plain_line_too():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.PlainFormatter())
    logger = logging.getLogger("omniroute.test_events")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logs.log_event(logger, "memory.injection.injected", count=2, strategy="hybrid", model="m")
    finally:
        logger.removeHandler(handler)
    assert (
        stream.getvalue()
        .rstrip()
        .endswith(
            "omniroute.test_events: memory.injection.injected count=2 strategy=hybrid model=m"
        )
    )
