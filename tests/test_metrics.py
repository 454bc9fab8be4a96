"""GET /metrics: Prometheus text, parsed by prometheus_client's own parser; never public."""

from __future__ import annotations

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ADMIN_TOKEN, app_settings

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
USER = [{"role": "user", "content": "What do I prefer?"}]


def samples(client, headers=ADMIN) -> dict[tuple, float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.content_type.startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found, name, **labels) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_need_the_admin_token_or_the_metrics_token(tmp_path):
    from omniroute.factory import create_app

    app = create_app(app_settings(tmp_path, None, METRICS_TOKEN="scrape-me"))
    client = app.test_client()
    try:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 403
        samples(client, {"Authorization": "Bearer scrape-me"})
        samples(client)
    finally:
        app.extensions["omniroute"].close()


def test_requests_are_counted_by_route_not_by_path(client, admin, svc):
    before = samples(client)
    client.get("/api/memory/abc", headers=admin)
    client.get("/api/memory/def", headers=admin)
    client.get("/no/such/page")
    after = samples(client)
    route = "/api/memory/<memory_id>"
    name = "omniroute_http_requests_total"
    labels = {"route": route, "method": "GET", "status": "404"}
    assert value(after, name, **labels) - value(before, name, **labels) == 2
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    assert value(after, name, **unmatched) - value(before, name, **unmatched) >= 1
    assert not any("abc" in str(key) for key in after)
    count = "omniroute_http_request_duration_seconds_count"
    assert value(after, count, route=route, method="GET") >= 2


@pytest.mark.both_stores
def test_retrieval_injection_upstream_errors_and_jobs_are_counted(sdk, gateway_app, upstream):
    svc = gateway_app.extensions["omniroute"]
    client = gateway_app.test_client()
    key, secret = svc.keys.create("alice")
    svc.memory_settings.update({"enabled": True, "strategy": "hybrid"})
    svc.memories.create(api_key_id=key.id, key="preference:tea", content="I prefer green tea")
    before = samples(client)
    chat = sdk(secret)
    chat.chat.completions.create(model="fake/m", messages=USER)
    with pytest.raises(openai.InternalServerError):
        chat.chat.completions.create(model="fake/fail-500", messages=USER)
    svc.jobs.wait(10)
    after = samples(client)

    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("omniroute_memories_injected_total") >= 1
    retrieved = [k for k in after if k[0] == "omniroute_memory_retrieval_duration_seconds_count"]
    assert sum(after[k] - before.get(k, 0) for k in retrieved) >= 2
    assert grew("omniroute_upstream_errors_total", provider="fake", status="500") == 1
    assert value(after, "omniroute_queue_depth", queue="extraction-outbox") >= 0
    jobs = [k for k in after if k[0] == "omniroute_jobs_total"]
    assert any(dict(k[1]).get("job") == "extract-facts" for k in jobs)
