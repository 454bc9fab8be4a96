"""Studio login: one admin token, a signed session cookie, CSRF on every change."""

import httpx
import pytest

from omniroute.core.brake import GuessBrake
from omniroute.factory import create_app
from tests.gateway_server import RunningGateway
from tests.helpers import ADMIN_TOKEN, app_settings, csrf_of

pytestmark = pytest.mark.both_stores

PAGES = [
    "/dashboard/",
    "/dashboard/memory",
    "/dashboard/memory?tab=playground",
    "/dashboard/memory?tab=engine",
    "/dashboard/keys",
    "/dashboard/providers",
    "/dashboard/memory/some-id/history",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_a_visitor_without_a_session_to_the_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.location.startswith("/dashboard/login?next=")


def test_the_dashboard_root_redirects_to_the_memory_page_after_login(studio):
    response = studio.get("/dashboard/")
    assert response.status_code == 302
    assert response.location == "/dashboard/memory"


def test_login_with_the_admin_token_returns_to_the_page_asked_for(client):
    page = client.get("/dashboard/login?next=/dashboard/keys")
    assert page.status_code == 200
    assert 'type="password"' in page.text
    response = client.post(
        "/dashboard/login",
        data={"token": ADMIN_TOKEN, "next": "/dashboard/keys", "csrf_token": csrf_of(page.text)},
    )
    assert response.status_code == 303
    assert response.location == "/dashboard/keys"
    assert client.get("/dashboard/keys").status_code == 200


def test_the_session_cookie_is_httponly_and_samesite_lax_and_secure_only_under_https(app):
    for base_url, secure in (("http://localhost", False), ("https://localhost", True)):
        client = app.test_client()
        page = client.get("/dashboard/login", base_url=base_url)
        response = client.post(
            "/dashboard/login",
            data={"token": ADMIN_TOKEN, "csrf_token": csrf_of(page.text)},
            base_url=base_url,
        )
        cookie = response.headers["Set-Cookie"]
        assert cookie.startswith("omniroute_session=")
        assert "HttpOnly" in cookie
        assert "SameSite=Lax" in cookie
        assert ("Secure" in cookie) is secure
        assert "Expires=" in cookie  # the session lasts DASHBOARD_SESSION_HOURS, not forever


def test_a_wrong_or_empty_token_is_refused_and_starts_no_session(client):
    for token, message in (("not-it", "That is not the admin token."), ("", "Enter the admin")):
        page = client.get("/dashboard/login")
        response = client.post(
            "/dashboard/login", data={"token": token, "csrf_token": csrf_of(page.text)}
        )
        assert response.status_code == 401
        assert message in response.text
        assert 'aria-invalid="true"' in response.text
        assert client.get("/dashboard/memory").status_code == 302


def test_login_without_the_csrf_token_is_refused(client):
    client.get("/dashboard/login")
    response = client.post("/dashboard/login", data={"token": ADMIN_TOKEN})
    assert response.status_code == 403
    assert "CSRF" in response.text
    assert client.get("/dashboard/memory").status_code == 302


@pytest.mark.parametrize(
    "target", ["https://evil.example/x", "//evil.example/dashboard", "/api/keys", "/\\evil"]
)
def test_login_never_redirects_off_the_studio(client, target):
    page = client.get("/dashboard/login")
    response = client.post(
        "/dashboard/login",
        data={"token": ADMIN_TOKEN, "next": target, "csrf_token": csrf_of(page.text)},
    )
    assert response.status_code == 303
    assert response.location == "/dashboard/memory"


def test_logout_needs_the_csrf_token_and_ends_the_session(studio):
    assert studio.post("/dashboard/logout").status_code == 403
    assert studio.get("/dashboard/memory").status_code == 200
    response = studio.post("/dashboard/logout", data={"csrf_token": studio.csrf})
    assert response.status_code == 303
    assert response.location == "/dashboard/login"
    assert studio.get("/dashboard/memory").status_code == 302
    assert studio.get("/api/keys").status_code == 401


def test_logout_ends_a_copy_of_the_cookie_taken_before_it(studio, app):
    # Regression: a cookie copied before logout still read and wrote for 12 hours.
    copied = studio.get_cookie("omniroute_session").value
    studio.post("/dashboard/logout", data={"csrf_token": studio.csrf})
    thief = app.test_client()
    thief.set_cookie("omniroute_session", copied)
    assert thief.get("/dashboard/memory").status_code == 302
    assert thief.get("/api/keys").status_code == 401
    response = thief.post("/api/keys", json={"name": "x"}, headers={"X-CSRF-Token": studio.csrf})
    assert response.status_code == 401


def test_another_process_sees_the_logout(studio, app, tmp_path, database_url):
    # A second web process on the same data dir (and secret key) reads the same sessions.
    copied = studio.get_cookie("omniroute_session").value
    other = create_app(app_settings(tmp_path, database_url))
    client = other.test_client()
    client.set_cookie("omniroute_session", copied)
    assert client.get("/dashboard/memory").status_code == 200
    studio.post("/dashboard/logout", data={"csrf_token": studio.csrf})
    assert client.get("/dashboard/memory").status_code == 302
    other.extensions["omniroute"].close()


def test_a_post_to_the_studio_without_a_session_is_401(client):
    assert client.post("/dashboard/logout").status_code == 401


def test_changing_the_admin_token_ends_every_session(tmp_path):
    settings = {"DATA_DIR": str(tmp_path), "OMNIROUTE_SECRET_KEY": "shared-secret"}
    first = create_app({**settings, "OMNIROUTE_ADMIN_TOKEN": "old-token"})
    client = first.test_client()
    page = client.get("/dashboard/login")
    client.post("/dashboard/login", data={"token": "old-token", "csrf_token": csrf_of(page.text)})
    cookie = client.get_cookie("omniroute_session").value
    assert client.get("/dashboard/memory").status_code == 200

    rotated = create_app({**settings, "OMNIROUTE_ADMIN_TOKEN": "new-token"})
    other = rotated.test_client()
    other.set_cookie("omniroute_session", cookie)
    assert other.get("/dashboard/memory").status_code == 302
    assert other.get("/api/keys").status_code == 401
    for app in (first, rotated):
        app.extensions["omniroute"].close()


def test_a_forged_cookie_is_not_a_session(client):
    client.set_cookie("omniroute_session", "eyJhZG1pbiI6Inh4In0.forged.signature")
    assert client.get("/dashboard/memory").status_code == 302


def test_the_secret_key_is_generated_once_and_kept_private(tmp_path):
    first = create_app({"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": "t"})
    second = create_app({"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": "t"})
    key_file = tmp_path / "secret_key"
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"]
    assert key_file.read_text().strip() == first.config["SECRET_KEY"]
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    for app in (first, second):
        app.extensions["omniroute"].close()


def test_studio_pages_forbid_framing_caching_and_inline_script(studio):
    response = studio.get("/dashboard/memory")
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"
    assert "<script>" not in response.text and " style=" not in response.text


class TestTheApiWithTheStudioSession:
    def test_reads_need_no_csrf_token(self, studio):
        assert studio.get("/api/memory").status_code == 200

    def test_changes_without_the_csrf_token_are_refused_and_change_nothing(self, studio):
        response = studio.post("/api/keys", json={"name": "sneaky"})
        assert response.status_code == 403
        assert "CSRF" in response.json["error"]["message"]
        wrong = studio.post("/api/keys", json={"name": "sneaky"}, headers={"X-CSRF-Token": "x"})
        assert wrong.status_code == 403
        assert studio.get("/api/keys").json["data"] == []

    def test_changes_with_the_csrf_token_go_through(self, studio):
        response = studio.post(
            "/api/keys", json={"name": "ok"}, headers={"X-CSRF-Token": studio.csrf}
        )
        assert response.status_code == 201

    def test_a_bearer_token_needs_no_csrf_token(self, client, admin):
        assert client.post("/api/keys", json={"name": "cli"}, headers=admin).status_code == 201

    def test_a_wrong_bearer_token_is_not_rescued_by_the_session(self, studio):
        response = studio.get("/api/keys", headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 403


def test_a_session_ends_after_dashboard_session_hours(studio, monkeypatch):
    from itsdangerous.timed import TimestampSigner

    real = TimestampSigner.get_timestamp
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: real(self) + 11 * 3600)
    assert studio.get("/dashboard/memory").status_code == 200  # 11 h later: still in
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: real(self) + 13 * 3600)
    assert studio.get("/dashboard/memory").status_code == 302  # 13 h later: log in again
    assert studio.get("/api/keys").status_code == 401


@pytest.mark.parametrize("trusted, secure", [(None, False), ("127.0.0.1", True)])
def test_behind_a_trusted_tls_proxy_the_cookie_is_secure(tmp_path, trusted, secure):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
            "FORWARDED_ALLOW_IPS": trusted,
        }
    )
    server = RunningGateway(app).start()
    try:
        with httpx.Client(base_url=server.url, headers={"X-Forwarded-Proto": "https"}) as http:
            page = http.get("/dashboard/login")
            # Sent by hand: the client keeps a Secure cookie away from plain http, as it should.
            cookie = page.headers["set-cookie"].split(";")[0]
            response = http.post(
                "/dashboard/login",
                data={"token": ADMIN_TOKEN, "csrf_token": csrf_of(page.text)},
                headers={"Cookie": cookie},
            )
        assert response.status_code == 303
        assert ("Secure" in response.headers["set-cookie"]) is secure
    finally:
        server.stop()
        app.extensions["omniroute"].close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(svc, monkeypatch) -> Clock:
    """The guessing brake on a clock the test moves."""
    clock = Clock()
    monkeypatch.setattr(svc, "guess_brake", GuessBrake(clock=clock))
    return clock


def login(client, token: str):
    page = client.get("/dashboard/login")
    return client.post("/dashboard/login", data={"token": token, "csrf_token": csrf_of(page.text)})


def test_a_guessing_address_is_slowed_to_one_try_a_second(app, clock):
    guesser = app.test_client()
    guesser.environ_base["REMOTE_ADDR"] = "10.0.0.7"
    for attempt in range(10):
        assert login(guesser, f"guess-{attempt}").status_code == 401
    assert login(guesser, "guess-10").status_code == 401  # held: one check a second
    held = login(guesser, "guess-11")
    assert held.status_code == 429
    assert held.headers["Retry-After"] == "1"
    api = guesser.get("/api/keys", headers={"Authorization": "Bearer guess-12"})
    assert api.status_code == 429 and api.json["error"]["type"] == "rate_limit_error"
    clock.now += 1.1
    assert login(guesser, "guess-13").status_code == 401  # checked again, a second later

    admin = app.test_client()  # another address is not held at all
    admin.environ_base["REMOTE_ADDR"] = "10.0.0.8"
    assert (
        admin.get("/api/keys", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).status_code
        == 200
    )


def test_the_right_token_gets_in_from_a_held_address(app, clock):
    # Regression: 10 wrong tokens from an address locked it, and the right token got 429
    # too, so anyone behind the admin's proxy could lock the admin out.
    shared = app.test_client()
    shared.environ_base["REMOTE_ADDR"] = "10.0.0.9"
    for attempt in range(12):
        login(shared, f"guess-{attempt}")
    clock.now += 1.1
    assert login(shared, ADMIN_TOKEN).status_code == 303
    clock.now += 1.1
    api = shared.get("/api/keys", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert api.status_code == 200


def test_wrong_bearer_tokens_count_too(client, admin, clock):
    for _ in range(11):
        assert client.get("/api/keys", headers={"Authorization": "Bearer no"}).status_code == 403
    assert client.get("/api/keys", headers={"Authorization": "Bearer no"}).status_code == 429
    clock.now += 1.1
    assert client.get("/api/keys", headers=admin).status_code == 200
