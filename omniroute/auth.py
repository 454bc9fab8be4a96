"""Admin authentication for /api/*: one bearer token, from the environment or generated."""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from pathlib import Path

from flask import abort, current_app, request
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import Unauthorized

log = logging.getLogger(__name__)

TOKEN_FILE_NAME = "admin_token"


def ensure_admin_token(configured: str | None, data_dir: str) -> str:
    """Return the admin token: the configured one, else the one kept in DATA_DIR.

    On the first start without a configured token a new one is written to
    DATA_DIR/admin_token with mode 0600; the log names the file, never the token.
    """
    if configured:
        return configured
    path = Path(data_dir) / TOKEN_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    token = "omr-admin-" + secrets.token_urlsafe(32)
    try:
        # O_EXCL: when web and worker start together, exactly one of them writes the file.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        stored = path.read_text(encoding="utf-8").strip()
        if not stored:
            raise RuntimeError(
                f"{path} is empty: delete it to generate a new admin token"
            ) from None
        return stored
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    log.warning("generated an admin token; read it from %s (mode 0600)", path.resolve())
    return token


def bearer_token() -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if there is one."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require_admin() -> None:
    """Abort with 401 when no bearer token is given and 403 when it is not the admin's."""
    token = bearer_token()
    if token is None:
        raise Unauthorized(
            description="Authentication required: send 'Authorization: Bearer <admin token>'.",
            www_authenticate=WWWAuthenticate("bearer"),
        )
    expected = current_app.config["OMNIROUTE_ADMIN_TOKEN"]
    if not hmac.compare_digest(token.encode("utf-8"), expected.encode("utf-8")):
        abort(403, description="Invalid admin token.")
