"""Memory Studio: the admin dashboard at /dashboard, rendered on the server with Jinja.

Pages are read-only views; every change goes through the JSON API (/api/...) with the
session cookie and the CSRF token, so the studio and API clients share one set of rules.
"""

from __future__ import annotations

from flask import Flask

from omniroute.studio import login, pages  # noqa: F401  (their routes register on the blueprint)
from omniroute.studio.blueprint import bp


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
