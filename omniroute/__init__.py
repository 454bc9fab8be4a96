"""OmniRoute Memory: an OpenAI-compatible LLM gateway with persistent conversation memory."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask

from . import api, auth, cli, errors, home, migrate, studio
from .config import database_url, load_settings
from .db import Database
from .services import Services


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: read settings, open and migrate the database, register everything.

    `test_config` overrides settings read from the environment (same names).
    """
    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_mapping(load_settings())
    if test_config:
        app.config.from_mapping(test_config)
    app.config["DATABASE_URL"] = database_url(app.config)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_BODY_BYTES"]
    _configure_logging(app.config["LOG_LEVEL"])

    auth.init_app(app)
    database = Database(app.config["DATABASE_URL"])
    migrate.upgrade(database)
    svc = Services.build(app, database)
    svc.install(app)

    errors.register_error_handlers(app)
    api.init_app(app)
    app.register_blueprint(home.bp)
    studio.init_app(app)
    cli.init_app(app)
    svc.request_backfill()  # whatever an earlier run left without a vector
    return app


def _configure_logging(level: str) -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger(__name__).setLevel(level)
