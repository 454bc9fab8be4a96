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
