"""WSGI entry point: ``gunicorn jetpredict.api.wsgi:app`` (settings from ``JETPREDICT_*``)."""

from jetpredict.api.app import create_app

app = create_app()
