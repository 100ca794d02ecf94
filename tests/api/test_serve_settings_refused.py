"""Settings ``serve`` refuses at start, naming the variable and exiting 2, where it had run with something
else than the operator meant (a random API key) or failed later with a traceback (a rate-limit store)."""

from __future__ import annotations

import pytest
from jetpredict.api.config import load_settings
from jetpredict.models.errors import InputError

from tools.testing import busy_port


@pytest.mark.parametrize("value", [",", " ", " , ,"])
def test_api_keys_set_to_no_key_are_refused(value):
    with pytest.raises(InputError) as err:
        load_settings(environ={"JETPREDICT_API_KEYS": value})
    assert err.value.field == "API_KEYS" and "JETPREDICT_API_KEYS is set but holds no key" in err.value.message


@pytest.mark.parametrize("value, said", [("a,,b", "entry 2 of 3 is empty and dropped; 2 key(s) kept"),
                                         ("a,b,", "entry 3 of 3 is empty and dropped; 2 key(s) kept"),
                                         (",a,", "entry 1, 3 of 3 is empty and dropped; 1 key(s) kept")])
def test_an_empty_api_key_entry_is_dropped_and_said_never_the_keys(value, said, clean_env, capsys, tmp_path):
    from jetpredict.cli import main

    keys = load_settings(environ={"JETPREDICT_API_KEYS": value}).API_KEYS
    assert keys == tuple(k for k in value.split(",") if k)
    clean_env.setenv("JETPREDICT_API_KEYS", value)
    with busy_port() as port:  # serve warns, then stops at the port
        assert main(["serve", "--server", "flask", "--port", str(port), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the port is in use" in err
    assert f"jetpredict serve: warning: JETPREDICT_API_KEYS: {said}" in err, err
    assert "'a'" not in err and value not in err


def test_an_empty_variable_is_still_no_key_and_keys_are_kept():
    assert load_settings(environ={"JETPREDICT_API_KEYS": ""}).API_KEYS == ()
    assert load_settings(environ={"JETPREDICT_API_KEYS": " a , b "}).API_KEYS == ("a", "b")


def test_serve_exits_2_naming_the_variable(clean_env, capsys):
    from jetpredict.cli import main

    clean_env.setenv("JETPREDICT_API_KEYS", ",")
    with busy_port() as port:  # were the setting taken, serve would stop at the port
        assert main(["serve", "--server", "flask", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "JETPREDICT_API_KEYS is set but holds no key" in err and "writes accept this key" not in err


@pytest.mark.parametrize("url, said", [
    ("bogus://x", "JETPREDICT_RATE_LIMIT_STORAGE_URL='bogus://x' is not a rate-limit store"),
    ("redis-host:6379", "JETPREDICT_RATE_LIMIT_STORAGE_URL='redis-host:6379' is not a rate-limit store"),
])
def test_a_rate_limit_store_of_no_known_kind_is_refused(url, said):
    with pytest.raises(InputError) as err:
        load_settings(environ={"JETPREDICT_RATE_LIMIT_STORAGE_URL": url})
    assert err.value.field == "RATE_LIMIT_STORAGE_URL" and said in err.value.message
    assert "memory://" in err.value.message and "redis://" in err.value.message


@pytest.mark.parametrize("url", ["bogus://h?password=s3cret", "bogus://:s3cret@h"])
def test_a_refused_store_url_never_shows_its_password(url):
    """A password may sit before "@" or in the query (redis://h?password=...): the message shows the scheme."""
    with pytest.raises(InputError) as err:
        load_settings(environ={"JETPREDICT_RATE_LIMIT_STORAGE_URL": url})
    assert "s3cret" not in err.value.message and "'bogus://***'" in err.value.message


def test_a_redis_store_without_the_redis_client_says_what_to_install():
    import importlib.util

    if importlib.util.find_spec("redis") is not None:
        assert load_settings(environ={"JETPREDICT_RATE_LIMIT_STORAGE_URL": "redis://h:6379"})
        pytest.skip("the redis client is installed here: the URL is taken")
    with pytest.raises(InputError) as err:
        load_settings(environ={"JETPREDICT_RATE_LIMIT_STORAGE_URL": "redis://:s3cret@h:6379"})
    message = err.value.message
    assert "needs the Python package redis" in message and "pip install 'jetpredict[redis]'" in message
    assert "s3cret" not in message


def test_serve_refuses_a_bad_rate_limit_store_in_one_line(clean_env, capsys, tmp_path):
    from jetpredict.cli import main

    clean_env.setenv("JETPREDICT_RATE_LIMIT_STORAGE_URL", "bogus://x")
    with busy_port() as port:
        assert main(["serve", "--server", "flask", "--port", str(port), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "JETPREDICT_RATE_LIMIT_STORAGE_URL" in err and "Traceback" not in err
