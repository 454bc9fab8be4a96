import re

import pytest

pytestmark = pytest.mark.both_stores


def test_the_home_page_shows_the_status_and_links_that_work(client, svc):
    page = client.get("/")
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert svc.db.vectors.label in html and svc.db.vectors.available
    assert "in-process (no REDIS_URL)" in html
    links = re.findall(r'href="(/[^"]*)"', html)
    assert set(links) == {
        "/dashboard/memory",
        "/docs",
        "/openapi.json",
        "/readyz",
        "/healthz",
        "/static/studio.css",
    }
    for link in links:  # the studio sends a visitor without a session to its login page
        with client.get(link, follow_redirects=True) as response:
            assert response.status_code == 200, link
