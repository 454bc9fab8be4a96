"""Admin authentication: a bearer token for API clients, a signed session for the studio.

There is one admin token, from the environment or generated. API clients send it as
`Authorization: Bearer`; a browser gives it once at /dashboard/login and then carries a
signed session cookie. Requests that rely on the cookie and change state must also carry the
session's CSRF token (the `X-CSRF-Token` header or a `csrf_token` form field).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from datetime import timedelta
from pathlib import Path

from flask import Flask, abort, current_app, request, session
from flask.sessions import SecureCookieSessionInterface
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import TooManyRequests, Unauthorized

from omniroute.core.brake import Held
from omniroute.services import services

log = logging.getLogger(__name__)

TOKEN_FILE_NAME = "admin_token"
SECRET_KEY_FILE_NAME = "secret_key"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_SESSION_ADMIN = "admin"  # a fingerprint of the admin token the session logged in with
_SESSION_ID = "sid"  # the server-side record of the login (AdminSessionStore)
_SESSION_CSRF = "csrf"


def ensure_secret(configured: str | None, data_dir: str, file_name: str, prefix: str = "") -> str:
    """Return the configured secret, else the one kept in DATA_DIR/file_name.

    On the first start without a configured value a new one is written with mode 0600;
    the log names the file, never the secret.
    """
    if configured:
        return configured
    path = Path(data_dir) / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = prefix + secrets.token_urlsafe(32)
    try:
        # O_EXCL: when web and worker start together, exactly one of them writes the file.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        stored = path.read_text(encoding="utf-8").strip()
        if not stored:
            raise RuntimeError(f"{path} is empty: delete it to generate a new one") from None
        return stored
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    log.warning("generated a new %s in %s (mode 0600)", file_name, path.resolve())
    return secret


def ensure_admin_token(configured: str | None, data_dir: str) -> str:
    return ensure_secret(configured, data_dir, TOKEN_FILE_NAME, prefix="omr-admin-")


def check_admin_token(token: str) -> bool:
    """Whether `token` is the admin token; 429 while the address is held by the brake."""
    try:
        return services().guess_brake.attempt(
            request.remote_addr, token, lambda: is_admin_token(token)
        )
    except Held as held:
        raise TooManyRequests(
            description="Too many wrong admin tokens from this address: slow down.",
            retry_after=held.retry_after,
        ) from None


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, with the Secure flag whenever the request is https."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def init_app(app: Flask) -> None:
    """Read or generate the admin token and the session key; configure the session cookie."""
    config = app.config
    configured = {name: config[name] for name in ("OMNIROUTE_ADMIN_TOKEN", "OMNIROUTE_SECRET_KEY")}
    config["OMNIROUTE_ADMIN_TOKEN"] = ensure_admin_token(
        config["OMNIROUTE_ADMIN_TOKEN"], config["DATA_DIR"]
    )
    config["SECRET_KEY"] = ensure_secret(
        config["OMNIROUTE_SECRET_KEY"], config["DATA_DIR"], SECRET_KEY_FILE_NAME
    )
    unshared = [name for name, value in configured.items() if not value]
    if config["REDIS_URL"] and unshared:
        # With Redis there are other processes (a worker at least), perhaps on other disks.
        log.warning(
            "%s not set: this process keeps its own in %s; give every process that does not "
            "share this DATA_DIR the same values in the environment (the secret key seals "
            "provider keys and signs logins, the admin token lets the admin in)",
            " and ".join(unshared),
            Path(config["DATA_DIR"]).resolve(),
        )
    config.update(
        SESSION_COOKIE_NAME="omniroute_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        PERMANENT_SESSION_LIFETIME=timedelta(hours=config["DASHBOARD_SESSION_HOURS"]),
        # The cookie is signed once, at login, so a session lasts that long from the login
        # however busy it is, rather than sliding forward with every request.
        SESSION_REFRESH_EACH_REQUEST=False,
    )
    app.session_interface = SessionInterface()


def bearer_token() -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if there is one."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def gateway_key(token: str):
    """The active gateway key of `token`, or None; a wrong one counts on the guessing brake
    that /api, the studio and MCP share (429 with Retry-After while this address is held)."""
    svc = services()
    try:
        return svc.guess_brake.attempt(
            request.remote_addr, token, lambda: svc.keys.authenticate(token)
        )
    except Held as held:
        raise TooManyRequests(
            description="Too many wrong API keys from this address: slow down.",
            retry_after=held.retry_after,
        ) from None


def is_admin_token(token: str) -> bool:
    expected = current_app.config["OMNIROUTE_ADMIN_TOKEN"]
    return hmac.compare_digest(token.encode("utf-8"), expected.encode("utf-8"))


def _fingerprint() -> str:
    # Changing the admin token (or the secret key) ends every studio session.
    key = current_app.config["SECRET_KEY"].encode("utf-8")
    token = current_app.config["OMNIROUTE_ADMIN_TOKEN"].encode("utf-8")
    return hmac.new(key, token, hashlib.sha256).hexdigest()


def log_in() -> None:
    """Start an admin session (the caller has checked the token)."""
    session.clear()
    session.permanent = True
    session[_SESSION_ADMIN] = _fingerprint()
    session[_SESSION_ID] = services().admin_sessions.start(
        current_app.config["PERMANENT_SESSION_LIFETIME"]
    )
    session[_SESSION_CSRF] = secrets.token_urlsafe(32)


def log_out() -> None:
    """End the session for good: a copy of the cookie taken before is refused too."""
    session_id = session.get(_SESSION_ID)
    if isinstance(session_id, str):
        services().admin_sessions.revoke(session_id)
    session.clear()


def session_is_admin() -> bool:
    """A signed cookie of a login with today's admin token, whose session is still live."""
    stored = session.get(_SESSION_ADMIN)
    session_id = session.get(_SESSION_ID)
    if not (isinstance(stored, str) and hmac.compare_digest(stored, _fingerprint())):
        return False
    return isinstance(session_id, str) and services().admin_sessions.is_live(session_id)


def csrf_token() -> str:
    """The session's CSRF token, made on first use (the login form needs one too)."""
    if _SESSION_CSRF not in session:
        session[_SESSION_CSRF] = secrets.token_urlsafe(32)
    return session[_SESSION_CSRF]


def check_csrf() -> None:
    """Abort with 403 unless the request carries the session's CSRF token."""
    expected = session.get(_SESSION_CSRF)
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.mimetype == "application/x-www-form-urlencoded":
        sent = request.form.get(CSRF_FIELD)
    if not (expected and sent and hmac.compare_digest(sent.encode(), expected.encode())):
        abort(403, description="Missing or invalid CSRF token: reload the page and try again.")


def require_admin() -> None:
    """Let the admin through: by bearer token, or by studio session plus CSRF token.

    401 when no credential is given, 403 when the token is not the admin's.
    """
    token = bearer_token()
    if token is None and session_is_admin():
        if request.method not in SAFE_METHODS:
            check_csrf()
        return
    if token is None:
        raise Unauthorized(
            description="Authentication required: send 'Authorization: Bearer <admin token>'.",
            www_authenticate=WWWAuthenticate("bearer"),
        )
    if not check_admin_token(token):
        abort(403, description="Invalid admin token.")
