import re


def test_the_home_page_shows_the_status_and_links_that_work(client):
    page = client.get("/")
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert "sqlite-vec v" in html
    assert "in-process (no REDIS_URL)" in html
    links = re.findall(r'href="(/[^"]*)"', html)
    assert set(links) == {"/docs", "/openapi.json", "/readyz", "/healthz"}
    for link in links:
        assert client.get(link).status_code == 200, link
