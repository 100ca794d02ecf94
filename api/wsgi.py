"""WSGI entry point: ``gunicorn api.wsgi:app`` (settings from ``JETPREDICT_*``)."""

from api.app import create_app

app = create_app()
