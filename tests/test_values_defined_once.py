"""Values the package defines once: each use imports the one definition rather than restating its number
(read from the source with :mod:`ast`, as tests/test_architecture.py reads imports), and the one restatement a
layer forces (the standard-library client cannot import the service's schemas) is held equal here."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tree(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)


def _assigned(path: str, name: str) -> ast.expr:
    """The value node of the module-level assignment ``name = ...`` in ``path``."""
    for node in _tree(path).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return node.value
    raise AssertionError(f"{path} assigns no {name}")


def _default(path: str, function: str, parameter: str) -> ast.expr:
    """The default value node of ``parameter`` of the function (or method) ``function`` in ``path``."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults,
                                strict=True))
            defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d})
            if parameter in defaults:
                return defaults[parameter]
    raise AssertionError(f"{path} defines no {function} with a default for {parameter}")


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def test_a_recommendation_names_its_objective():
    """The service requires ``objective``; the client states none of its own (the project's one default is
    predictor.limits.DEFAULT_OBJECTIVE, which the client cannot import)."""
    from jetpredict.client import Client

    assert inspect.signature(Client.recommendations).parameters["objective"].default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="objective"):
        Client("http://127.0.0.1:9").recommendations("w")  # refused before any request is made


def test_the_epoch_time_cap_is_the_row_limit():
    from jetpredict.api import schemas
    from jetpredict.models.profile_rows import MAX_TIME_S

    assert _name(_assigned("api/schemas.py", "MAX_TIME_CAP_S")) == "MAX_TIME_S"
    assert schemas.MAX_TIME_CAP_S == MAX_TIME_S


def test_the_clients_page_of_power_modes_is_the_services_largest():
    """``iter_power_modes`` asks for the largest page the service serves: the client (standard library
    only) restates the schema's limit, so the two are held equal here."""
    from jetpredict.api import schemas

    from jetpredict.client import Client

    page = inspect.signature(Client.iter_power_modes).parameters["page_size"].default
    assert page == schemas.MAX_POWER_MODES_PAGE
    from jetpredict.api.power_modes_schemas import PowerModesQuerySchema

    limit = PowerModesQuerySchema().fields["limit"].validators
    assert [(v.min, v.max) for v in limit] == [(1, schemas.MAX_POWER_MODES_PAGE)]


def test_the_clients_default_url_is_where_serve_listens():
    """``jetpredict serve`` listens on api.config's DEFAULT_HOST:DEFAULT_PORT; the client (standard library
    only) cannot import them, so its DEFAULT_URL restates them and is held equal here."""
    from urllib.parse import urlsplit

    from jetpredict.api.config import DEFAULT_HOST, DEFAULT_PORT, Settings

    from jetpredict.client import DEFAULT_URL

    url = urlsplit(DEFAULT_URL)
    assert (url.scheme, url.hostname, url.port, url.path) == ("http", DEFAULT_HOST, DEFAULT_PORT, "")
    assert (Settings().HOST, Settings().PORT) == (DEFAULT_HOST, DEFAULT_PORT)


def test_the_clients_header_names_are_the_services():
    """The client restates the names of the headers the service reads (it cannot import the service)."""
    from jetpredict.api.routes.common import API_KEY_HEADER
    from jetpredict.api.schemas import IDEMPOTENCY_HEADER

    from jetpredict import client

    assert (client.API_KEY_HEADER, client.IDEMPOTENCY_HEADER) == (API_KEY_HEADER, IDEMPOTENCY_HEADER)


def test_the_http_planners_timeout_is_the_clients():
    from jetpredict.client import DEFAULT_TIMEOUT_S
    from jetpredict.integrations.flower.planners import HttpPlanner

    assert _name(_default("jetpredict/integrations/flower/planners.py", "__init__", "timeout_s")) \
        == "DEFAULT_TIMEOUT_S"
    assert HttpPlanner("http://127.0.0.1:9", "w").client.timeout_s == DEFAULT_TIMEOUT_S


def test_one_tegrastats_interval():
    from jetpredict.profiler.power import tegrastats

    assert _name(_default("profiler/power/detect.py", "detect_power_meter", "tegrastats_interval_ms")) \
        == "DEFAULT_INTERVAL_MS"
    assert _name(_default("profiler/power/tegrastats.py", "__init__", "interval_ms")) == "DEFAULT_INTERVAL_MS"
    assert isinstance(tegrastats.DEFAULT_INTERVAL_MS, int) and tegrastats.DEFAULT_INTERVAL_MS > 0


def test_the_readme_states_the_adaptive_stop_as_the_chooser_has_it():
    """The tour's comment on ``profile --adaptive`` names the stop's figures: they are the chooser's."""

    from jetpredict.predictor.adaptive import DEFAULT_TARGET_WIDTH_REL, MAX_RIVAL_GAIN

    text = " ".join(re.sub(r"\n#", " ", (ROOT / "README.md").read_text(encoding="utf-8")).split())
    assert (f"narrower than --target-width (default {DEFAULT_TARGET_WIDTH_REL:.0%} of its point), no unprofiled mode "
            f"is expected to beat it by more than {MAX_RIVAL_GAIN:.0%} of the objective, and the recommended mode "
            "itself is profiled") in text


def test_every_field_of_a_fit_summary_is_stored():
    """What the API answers of a fit is what it stores: every provenance field a prediction states (one added
    to ``predictor.limits.PROVENANCE_FIELDS`` included) and the fit's figures, documented in that order."""
    from jetpredict.api.schemas import StoredFitSchema
    from jetpredict.api.storage import FIT_FIELDS, WorkloadRecord, device_fits, fit_column
    from jetpredict.api.workloads import fit_summary
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload
    from jetpredict.predictor.limits import PROVENANCE_FIELDS

    from tools.testing import published_rows

    assert set(PROVENANCE_FIELDS) <= set(FIT_FIELDS)
    rows = validate_records(published_rows())
    summary = fit_summary(fit_workload(rows), rows)
    assert set(summary) - {"device"} == set(FIT_FIELDS)
    stored = device_fits(WorkloadRecord("w", "agx-xavier", 1, len(rows), fit_column(summary, {
        "agx-xavier": (len(rows), summary)}), "", ""))
    assert stored == {"agx-xavier": {"rows": len(rows), **{k: summary[k] for k in FIT_FIELDS}}}
    assert tuple(StoredFitSchema().fields) == FIT_FIELDS


def test_serve_states_the_defaults_it_runs_with(monkeypatch):
    """``serve --help`` states api.config's defaults (the ones Settings takes), not figures of its own."""
    import argparse

    from jetpredict.api import config, serve_cli

    settings = config.Settings()
    assert (settings.HOST, settings.PORT, settings.WORKERS, settings.THREADS, settings.DATA_DIR.name) == (
        config.DEFAULT_HOST, config.DEFAULT_PORT, config.DEFAULT_WORKERS, config.DEFAULT_THREADS,
        config.DEFAULT_DATA_DIR)
    other = {"DEFAULT_HOST": "10.9.8.7", "DEFAULT_PORT": 9123, "DEFAULT_WORKERS": 7, "DEFAULT_THREADS": 13,
             "DEFAULT_DATA_DIR": "store"}
    for name, value in other.items():
        monkeypatch.setattr(serve_cli, name, value)
    verbs = argparse.ArgumentParser().add_subparsers()
    serve_cli.register(verbs)
    helps = {action.dest: action.help for action in verbs.choices["serve"]._actions}
    assert "default 10.9.8.7 " in helps["host"] and "default 9123 " in helps["port"]
    assert "default 7 " in helps["workers"] and "default 13 " in helps["threads"]
    assert "default ./store " in helps["data_dir"]


def test_the_api_readme_states_the_settings_defaults():
    """api/README.md's settings table restates serve's defaults and the inline-row limits (prose cannot import
    them): held equal to api.config and api.schemas here."""
    from jetpredict.api import config
    from jetpredict.api.schemas import MAX_REQUEST_ROWS

    rows = {line.split("|")[1].strip(): line for line in (ROOT / "api" / "README.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("| `JETPREDICT_")}
    assert f"| `{config.DEFAULT_HOST}` / `{config.DEFAULT_PORT}` |" in rows["`JETPREDICT_HOST` / `_PORT`"]
    assert f"| {config.DEFAULT_WORKERS} / {config.DEFAULT_THREADS} |" in rows["`JETPREDICT_WORKERS` / `_THREADS`"]
    assert f"| `./{config.DEFAULT_DATA_DIR}` |" in rows["`JETPREDICT_DATA_DIR`"]
    inline = rows["`JETPREDICT_INLINE_ROWS_WITHOUT_KEY`"]
    assert f"| {config.DEFAULT_INLINE_ROWS_WITHOUT_KEY} |" in inline and f"up to {MAX_REQUEST_ROWS:,})" in inline


def test_the_clients_api_key_rule_is_the_services():
    """The client refuses the keys the service refuses, in the same words (it cannot import api.config)."""
    from jetpredict.api import config

    from jetpredict import client

    assert client.API_KEY_RULE == config.API_KEY_RULE
    assert client._API_KEY_BREAK.pattern == config.API_KEY_BREAK.pattern
