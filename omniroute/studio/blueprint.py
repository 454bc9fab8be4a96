"""The studio's blueprint: every page needs an admin session; every change, a CSRF token."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, abort, make_response, redirect, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from omniroute.core.errors import keep_error_headers
from omniroute.web.auth import SAFE_METHODS, check_csrf, csrf_token, session_is_admin

bp = Blueprint("studio", __name__, url_prefix="/dashboard")

# Endpoints that answer without a session: the login form itself.
OPEN_ENDPOINTS = frozenset({"studio.login"})


@bp.before_request
def _require_session():
    if request.endpoint not in OPEN_ENDPOINTS and not session_is_admin():
        if request.method in SAFE_METHODS:
            return redirect(url_for("studio.login", next=request.full_path.rstrip("?")))
        abort(401, description="Log in at /dashboard/login first.")
    if request.method not in SAFE_METHODS:
        check_csrf()
    return None


@bp.after_request
def _no_store(response):
    # Pages hold memories and key names. (The app sets the security headers of every page.)
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.errorhandler(HTTPException)
def _error_page(error: HTTPException):
    response = make_response(render_template("studio/error.html", error=error), error.code or 500)
    keep_error_headers(error, response)
    return response


@bp.app_context_processor
def _template_helpers():
    return {"csrf_token": csrf_token}


def safe_next(target: str | None) -> str:
    """Where to go after login: a studio path on this site, never another site."""
    if target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc and parts.path.startswith("/dashboard"):
            if "\\" not in target:
                return target
    return url_for("studio.memory")
