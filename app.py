"""WSGI entry: `flask --app app ...` and any WSGI server find `app` here. A bad setting
stops the process with one line naming it (no traceback)."""

from omniroute.factory import app_or_exit

app = app_or_exit()
