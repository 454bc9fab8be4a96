"""The Engine tab's memory backends card, as the server renders it."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.both_stores


def card(page: str) -> str:
    return page.split('id="backends-card"')[1].split("</section>")[0]


@pytest.fixture
def brain(svc, memory_service):
    svc.memory_settings.update({"backendConfigs": {"brain": {"baseUrl": memory_service.url}}})
    return memory_service


def test_the_card_lists_the_backends_and_marks_the_primary(studio, svc, brain):
    svc.memory_settings.update({"primaryBackend": "brain", "fallbackBackends": ["sqlite"]})
    html = card(studio.get("/dashboard/memory?tab=engine").text)
    primary = html.split('name="primaryBackend">')[1].split("</select>")[0]
    options = re.findall(r'<option value="(\w+)"( selected)?>[^<]*\((\w+)\)</option>', primary)
    assert [(value, bool(chosen)) for value, chosen, _ in options] == [
        ("sqlite", False),
        ("brain", True),
    ]
    assert re.search(r'value="sqlite" data-type="list" id="backend-fallback-local"\s+checked', html)
    assert brain.requests == [], "no health check unless asked"


def test_test_connection_says_whether_it_answers(studio, svc, brain):
    ok = studio.get("/dashboard/memory?tab=engine&backendTest=brain").text
    assert re.search(r"brain answers \([\d.]+ ms\)", ok)
    brain.answers[("GET", "/health")] = (503, "maintenance")
    down = studio.get("/dashboard/memory?tab=engine&backendTest=brain").text
    assert "brain does not answer: HTTP 503: maintenance" in down
    unknown = studio.get("/dashboard/memory?tab=engine&backendTest=%3Cscript%3E").text
    assert "does not answer" not in unknown and "<script>" not in unknown


def test_the_memory_list_is_the_primarys_and_says_so(studio, svc, brain):
    svc.memory_settings.update({"primaryBackend": "brain", "fallbackBackends": ["sqlite"]})
    key, _ = svc.keys.create("alice")
    svc.memories.create(api_key_id=key.id, key="local:only", content="kept in the local store")
    brain.add(apiKeyId=key.id, key="preference:editor", content="I prefer Vim")
    page = studio.get("/dashboard/memory").text
    banner = page.split('id="serving-backend">')[1].split("</p>")[0]
    assert "<code>brain</code>" in banner and "History, export, import" in banner
    assert "I prefer Vim" in page and "kept in the local store" not in page
    assert "/history" not in page.split('id="memory-list"')[1], "remote memories have no history"
    assert "download>Export all" not in page


def test_a_failing_primary_is_shown_in_place_of_the_list(studio, svc, brain):
    svc.memory_settings.update({"primaryBackend": "brain"})
    brain.answers[("GET", "/memories")] = (500, "disk full")
    answer = studio.get("/dashboard/memory")
    assert answer.status_code == 200
    alert = answer.text.split('id="backend-failure">')[1].split("</p>")[0]
    assert "did not answer the list" in alert and "disk full" in alert


def test_the_local_list_has_no_backend_banner(studio, svc):
    key, _ = svc.keys.create("alice")
    svc.memories.create(api_key_id=key.id, key="k", content="kept here")
    page = studio.get("/dashboard/memory").text
    assert 'id="serving-backend"' not in page and "kept here" in page
    assert "/history" in page and "download>Export all 1 as JSON" in page
