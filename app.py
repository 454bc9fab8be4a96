"""WSGI entry: `flask --app app ...` and any WSGI server find `app` here."""

from omniroute.factory import create_app

app = create_app()
