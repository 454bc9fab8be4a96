"""The app factory: read settings, open and migrate the database, wire and register everything."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from flask import Flask

from omniroute import api, cli, studio
from omniroute.core import errors, logs
from omniroute.core.config import ConfigError, database_url, load_settings
from omniroute.core.db import Database, migrate
from omniroute.core.providers.schemas import seed_providers
from omniroute.jobs import request_backfill
from omniroute.memory.search import tokens
from omniroute.proxy import blueprint, passthrough, responses, routes  # noqa: F401 (they fill blueprint.blp)
from omniroute.services import Services
from omniroute.web import auth, headers, home, json_edge, observe

PACKAGE = "omniroute"


def app_or_exit() -> Flask:
    """The app of a process (web, worker, release); a bad setting stops it with one line
    naming the setting, not a traceback."""
    try:
        return create_app()
    except ConfigError as exc:
        sys.exit(f"omniroute: configuration error: {exc}")


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: read settings, open and migrate the database, register everything.

    `test_config` overrides settings read from the environment (same names).
    """
    app = Flask(PACKAGE, template_folder="../templates", static_folder="../static")
    app.config.from_mapping(load_settings())
    if test_config:
        app.config.from_mapping(test_config)
    app.config["DATABASE_URL"] = database_url(app.config)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_BODY_BYTES"]
    # The package logs at LOG_LEVEL: its job functions (omniroute/jobs) too.
    logs.configure(app.config["LOG_LEVEL"], app.config["LOG_FORMAT"], (PACKAGE,))
    tokens.use_counter(app.config["TOKEN_COUNTER"])

    auth.init_app(app)
    database = Database(
        app.config["DATABASE_URL"],
        write_wait_seconds=app.config["DB_WRITE_WAIT_SECONDS"],
        pool_size=app.config["DB_POOL_SIZE"],
        vectors_disabled=app.config["VECTOR_STORE_DISABLE_VEC"],
    )
    migrate.upgrade(database)
    svc = Services.build(app, database)
    svc.install(app)
    if sealed := svc.providers.seal_plain_keys():
        logging.getLogger(__name__).info("sealed %d provider API keys stored in plain text", sealed)

    errors.register_error_handlers(app)
    headers.init_app(app)
    rest = api.init_app(app)  # its admin guard runs first: strangers learn nothing of bodies
    json_edge.init_app(app)
    rest.register_blueprint(blueprint.blp)  # /v1 (routes, passthrough), in the same spec
    if app.config["OMNIROUTE_PROVIDERS"]:
        with app.app_context():  # the URL guard reads the app's settings
            seed_providers(svc.providers, app.config["OMNIROUTE_PROVIDERS"])
    app.register_blueprint(home.bp)
    observe.init_app(app, rest)
    studio.init_app(app)
    cli.init_app(app)
    request_backfill(svc.jobs)  # whatever an earlier run left without a vector
    svc.backends.start()  # the configured memory backends, initialised in the background
    if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
        # The periodic jobs (lost extractions, sweeps, summaries) in a serving process, not
        # in a `flask ...` command, which would take them and stop half-way when it exits.
        svc.scheduler.start()
    return app
