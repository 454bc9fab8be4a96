"""GET /: a page that says the gateway runs, its status, and where its docs are."""

from __future__ import annotations

from flask import Blueprint, render_template

from omniroute.memory.engine_status import KEYWORD_BACKENDS
from omniroute.services import services
from omniroute.web.auth import TOKEN_FILE_NAME

bp = Blueprint("home", __name__)


@bp.get("/")
def index():
    db = services().db
    checks = {
        "keyword search": KEYWORD_BACKENDS[db.dialect],
        "vector search": db.vectors.label,
        "background jobs": "RQ on Redis" if services().redis else "in-process (no REDIS_URL)",
    }
    return render_template("index.html", checks=checks, token_file=TOKEN_FILE_NAME)
