"""Every response carries the security headers; the API docs work under their policy."""

from __future__ import annotations

import pytest

from tests.helpers import ADMIN_TOKEN


@pytest.mark.parametrize(
    "path", ["/", "/docs", "/openapi.json", "/healthz", "/api/memory", "/dashboard/login"]
)
def test_every_page_and_answer_forbids_framing_sniffing_and_inline_script(client, path):
    response = client.get(path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    policy = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self';" in policy  # no 'unsafe-inline' script anywhere


def test_the_docs_page_has_no_inline_script(client):
    page = client.get("/docs").text
    assert "<script>" not in page
    assert 'src="/static/swagger-init.js"' in page
    assert 'data-spec-url="/openapi.json"' in page
