"""GET /: a page that says the gateway runs, its status, and where its docs are."""

from __future__ import annotations

from flask import Blueprint, render_template

from .auth import TOKEN_FILE_NAME
from .services import services

bp = Blueprint("home", __name__)


@bp.get("/")
def index():
    vectors = services().db.vectors
    checks = {
        "keyword search": "SQLite FTS5",
        "vector search": f"sqlite-vec {vectors.version}"
        if vectors.available
        else f"unavailable: {vectors.error}",
        "background jobs": "RQ on Redis" if services().redis else "in-process (no REDIS_URL)",
    }
    return render_template("index.html", checks=checks, token_file=TOKEN_FILE_NAME)
