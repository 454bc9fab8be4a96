"""WSGI entry: `flask --app app ...` and any WSGI server find `app` here."""

from omniroute import create_app

app = create_app()
