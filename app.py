"""WSGI entry: `flask --app app ...` and any WSGI server find `app` here. A bad setting
stops the process with one line naming it (no traceback)."""

import sys

from omniroute.config import ConfigError
from omniroute.factory import create_app

try:
    app = create_app()
except ConfigError as exc:
    sys.exit(f"omniroute: configuration error: {exc}")
