"""The Activity view: per-minute totals from every process in the shared database, their
percentiles, and the page that draws them."""

import re

import pytest

from omniroute.core.activity import ActivityLog, Step, latency_series
from omniroute.core.db import Database
from omniroute.memory.search.tokens import count_tokens
from tests.helpers import ADMIN_TOKEN, REDIS_TEST_URL, csrf_of
from tests.test_jobs import run_worker

pytestmark = pytest.mark.both_stores

NOW = 1_764_601_200  # the start of a minute, and of a half hour


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_two_processes_add_up_in_the_shared_database(database):
    clock = Clock()
    web, worker = ActivityLog(database, clock), ActivityLog(database, clock)
    web.add("chats", 3)
    worker.add("facts", 2)
    clock.now += 60
    web.add("chats")
    web.flush()
    worker.flush()
    web.add("chats", 10)  # not flushed: not written yet
    steps = ActivityLog(database, clock).window("hour")
    assert len(steps) == 60 and steps[-1].start == NOW + 60
    assert steps[-2].totals == {"chats": 3.0, "facts": 2.0}
    assert steps[-1].totals == {"chats": 1.0}
    assert all(step.totals == {} for step in steps[:-2])
    web.flush()  # before the database closes: its timer would write to a closed pool


def test_a_closed_log_whose_database_is_gone_gives_up_instead_of_retrying_forever():
    gone = Database("postgresql://postgres@127.0.0.1:1/gone")  # nothing listens on port 1
    log = ActivityLog(gone, Clock(), interval=3600)
    log.add("chats")
    log.close()  # the last write fails, and gives its counts back
    assert log._batch._timer is None, "no timer retries for a closed process"
    log.add("chats")
    assert log._batch._timer is None


def test_the_day_window_sums_half_hours(database):
    clock = Clock()
    log = ActivityLog(database, clock)
    for minute in range(45):
        clock.now = NOW + minute * 60
        log.add("injected", 2)
    log.flush()
    steps = ActivityLog(database, clock).window("day")
    assert len(steps) == 48
    assert sum(step.totals.get("injected", 0) for step in steps) == 90
    assert [step.totals["injected"] for step in steps if step.totals] == [60, 30]


def test_minutes_older_than_the_kept_days_are_deleted_when_new_ones_are_written(database):
    clock = Clock()
    log = ActivityLog(database, clock)
    log.add("chats")
    log.flush()
    clock.now += 9 * 86400
    log._pruned_at = 0
    log.add("chats")
    log.flush()
    with database.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM activity").scalar() == 1


def test_latency_percentiles_interpolate_within_their_bucket():
    step = Step(0, {latency_series(5): 50, latency_series(10): 40, latency_series(25): 10})
    assert step.latency_percentile(0.5) == 5.0
    assert step.latency_percentile(0.9) == 10.0
    assert step.latency_percentile(0.95) == pytest.approx(17.5)
    assert Step(0, {}).latency_percentile(0.5) is None
    slow = Step(0, {latency_series(float("inf")): 3})
    assert slow.latency_percentile(0.5) == 2500


def test_a_retrieval_lands_in_the_bucket_of_its_latency(database):
    log = ActivityLog(database, Clock())
    for seconds in (0.001, 0.007, 0.3, 9.0):
        log.retrieval(seconds)
    log.flush()
    totals = log.window("hour")[-1].totals
    assert totals == {
        latency_series(5): 1, latency_series(10): 1, latency_series(500): 1,
        latency_series(float("inf")): 1,
    }  # fmt: skip


# -- through the gateway and the studio ----------------------------------------------------


def log_in(app):
    client = app.test_client()
    token = csrf_of(client.get("/dashboard/login").text)
    client.post("/dashboard/login", data={"token": ADMIN_TOKEN, "csrf_token": token})
    return client


def chat(app, secret: str, text: str):
    response = app.test_client().post(
        "/v1/chat/completions",
        json={"model": "fake/m", "messages": [{"role": "user", "content": text}]},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200


def stat(html: str, label: str) -> str:
    return re.search(rf"<dt>{label}</dt><dd>([^<]*)", html)[1].strip()


def test_chats_injections_and_extractions_show_on_the_activity_page(gateway_app):
    svc = gateway_app.extensions["omniroute"]
    svc.scheduler.stop()
    svc.memory_settings.update({"enabled": True})
    key, secret = svc.keys.create("alice")
    svc.memories.create(api_key_id=key.id, key="a", content="I prefer TypeScript")
    chat(gateway_app, secret, "TypeScript? I always commit before pushing.")
    chat(gateway_app, secret, "What is the weather?")
    svc.jobs.wait(10)
    svc.activity.flush()
    page = log_in(gateway_app).get("/dashboard/activity")
    assert page.status_code == 200
    html = page.text
    assert stat(html, "Chats") == "2"
    assert stat(html, "Memories injected") == "1"
    assert stat(html, "Facts extracted") == "1"
    assert stat(html, "Tokens added by memory") == str(count_tokens("I prefer TypeScript"))
    assert re.search(r"Retrieval p50 / p95</dt><dd>[\d.]+ / [\d.]+ ms", html)
    assert html.count("<polyline") >= 4 and 'role="img"' in html
    assert 'aria-current="page">Last hour' in html
    week = log_in(gateway_app).get("/dashboard/activity?window=week").text
    assert stat(week, "Chats") == "2" and 'aria-current="page">Last week' in week
    assert log_in(gateway_app).get("/dashboard/activity?window=<x>").status_code == 200


def test_the_activity_page_needs_the_studio_session(client):
    response = client.get("/dashboard/activity")
    assert response.status_code in (302, 303)
    assert "/dashboard/login" in response.headers["Location"]


def test_tokens_saved_by_a_compaction_are_counted(client, app, admin):
    svc = app.extensions["omniroute"]
    svc.scheduler.stop()
    long = "One. Two. Three. Four. " * 10
    svc.memories.create(api_key_id="alice", key="k", content=long)
    dry = client.post(
        "/api/memory/compact", json={"apiKeyId": "alice", "maxTokens": 10, "dryRun": True},
        headers=admin,
    ).json  # fmt: skip
    client.post("/api/memory/compact", json={"apiKeyId": "alice", "maxTokens": 10}, headers=admin)
    svc.activity.flush()
    totals = svc.activity.window("hour")[-1].totals
    assert totals["tokens_saved"] == dry["tokensSaved"] > 0, "the dry run counted nothing"


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_a_worker_processes_extractions_are_counted_too(make_app, tmp_path, redis_db):
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    svc = app.extensions["omniroute"]
    svc.scheduler.stop()
    _, secret = svc.keys.create("alice")
    chat(app, secret, "I prefer TypeScript.")
    svc.jobs.wait(10)
    assert run_worker(tmp_path).returncode == 0
    totals = svc.activity.window("hour")[-1].totals
    assert (totals["extractions"], totals["facts"]) == (2, 1)


def test_a_chart_breaks_its_line_at_gaps_and_marks_a_lone_point():
    from omniroute.studio.charts import chart

    steps = [Step(NOW + 60 * n, {}) for n in range(5)]
    drawn = chart("c", "C", "ms", steps, {"median": [1.0, 2.0, None, 4.0, None]})
    (line,) = drawn.series
    assert len(line.segments) == 1 and len(line.segments[0].split()) == 2
    assert len(line.dots) == 1
    assert [label for _, label in drawn.y_ticks] == ["0", "1", "2", "3", "4", "5"]
    assert not drawn.empty
    assert chart("e", "E", "ms", steps, {"median": [None] * 5}).empty


def test_refused_chats_and_open_streams_show_on_the_activity_page(app):
    from omniroute.studio.charts import activity_charts

    svc = app.extensions["omniroute"]
    svc.activity.add("rejected", 3)
    svc.activity.add("stream_seconds", 120)  # two streams open for the whole minute
    svc.activity.flush()
    html = log_in(app).get("/dashboard/activity").text
    assert stat(html, "Chats refused \\(busy\\)") == "3"
    streams = next(
        c for c in activity_charts(svc.activity.window("hour"), "hour") if c.id == "streams"
    )
    values = {series.label: series.values for series in streams.series}
    assert max(values["open streams"]) == 2.0 and max(values["refused"]) == 3.0
    assert 'id="chart-streams-title"' in html
