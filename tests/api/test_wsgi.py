"""``gunicorn jetpredict.api.wsgi:app``: the entry point refuses, in serve's one line, what ``serve`` refuses at
start, and exits with gunicorn's app-load status so that the master stops (the unwritable folders are in
``test_serve_data_dir_unwritable``, which needs a process that obeys file modes)."""

from __future__ import annotations

import pytest
from api_fixtures import import_wsgi
from jetpredict.api.config import SQLITE_FILE_NAME
from jetpredict.api.serve_cli import APP_LOAD_ERROR_EXIT

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)


def test_a_writable_folder_builds_the_app(tmp_path):
    done = import_wsgi(JETPREDICT_DATA_DIR=str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "data" / SQLITE_FILE_NAME).exists()


@pytest.mark.parametrize(("env", "named"), [
    ({"JETPREDICT_DATABASE_URL": "mysql://h/db"}, "JETPREDICT_DATABASE_URL"),
    ({"JETPREDICT_MAX_BODY_BYTES": "lots"}, "JETPREDICT_MAX_BODY_BYTES"),
    ({"JETPREDICT_DATA_DIR": "FILE"}, "is not a directory"),
])
def test_a_refused_setting_is_one_line_and_stops_gunicorn(tmp_path, env, named):
    (tmp_path / "FILE").write_text("")
    env = {k: str(tmp_path / v) if v == "FILE" else v for k, v in env.items()}
    done = import_wsgi(**env)
    assert done.returncode == APP_LOAD_ERROR_EXIT, done.stderr
    assert done.stderr.startswith("jetpredict.api.wsgi: error: ") and named in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
