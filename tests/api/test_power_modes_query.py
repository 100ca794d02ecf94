"""``GET /v1/devices/{device}/power-modes`` read as the rest of the interface words it: ``modes=presets|all`` (the
CLI's ``devices --modes``, the predictions body's ``"modes"``) names the space as ``space`` does, and
``page``/``page_size`` (1-based) page it as ``limit``/``offset`` do."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from jetpredict.api.openapi_doc import EXCLUSIVE_PARAMETERS
from jetpredict.api.power_modes_schemas import MAX_PAGE
from jetpredict.api.schemas import DEFAULT_PAGE_SIZE, MAX_OFFSET, MAX_POWER_MODES_PAGE
from jetpredict.models.catalogue import POWER_MODE_SPACES, load_device

ROUTE = "/v1/devices/agx-xavier/power-modes"


def test_modes_all_is_the_full_space_as_space_all(client):
    space = load_device("agx-xavier").modes()
    by_modes = client.get(f"{ROUTE}?modes=all&limit=3&offset=100")
    assert by_modes.status_code == 200, by_modes.json
    assert by_modes.json == client.get(f"{ROUTE}?space=all&limit=3&offset=100").json
    assert by_modes.json["space"] == "all" and by_modes.json["total"] == len(space)
    assert client.get(f"{ROUTE}?modes=presets").json == client.get(ROUTE).json


def test_page_and_page_size_page_the_space_from_one(client):
    space = load_device("agx-xavier").modes()
    r = client.get(f"{ROUTE}?modes=all&page=3&page_size=5")
    assert r.status_code == 200, r.json
    assert [m["mode"] for m in r.json["modes"]] == [space[i].mode for i in range(10, 15)]
    # The answer states its window both ways.
    assert (r.json["limit"], r.json["offset"], r.json["page"], r.json["page_size"]) == (5, 10, 3, 5)
    assert r.json["total"] == len(space)
    first = client.get(f"{ROUTE}?space=all&page=1").json
    assert (first["offset"], first["limit"], first["page"], first["page_size"]) == (0, 100, 1, 100)
    assert first["modes"] == client.get(f"{ROUTE}?space=all").json["modes"]
    assert client.get(f"{ROUTE}?space=all&page_size=7").json["offset"] == 0
    # limit/offset answers carry no page fields (an offset need not fall on a page).
    assert "page" not in client.get(f"{ROUTE}?space=all&limit=3&offset=1").json


def test_a_later_page_of_presets_holds_limit_modes(client):
    every = client.get(f"{ROUTE}?space=presets").json
    assert every["total"] >= 4
    page = client.get(f"{ROUTE}?space=presets&limit=2&offset=2").json
    assert page["modes"] == every["modes"][2:4] and page["total"] == every["total"]


@pytest.mark.parametrize("query, fields", [
    ("page=2&offset=5", {"query.page", "query.offset"}),
    ("page_size=5&limit=5", {"query.page_size", "query.limit"}),
    ("page=1&page_size=2&limit=2&offset=0", {"query.page", "query.page_size", "query.limit", "query.offset"}),
    ("space=all&modes=all", {"query.space", "query.modes"}),
])
def test_both_styles_at_once_are_422_naming_them(client, query, fields):
    r = client.get(f"{ROUTE}?{query}")
    assert r.status_code == 422, r.json
    assert set(r.json["errors"]) == fields
    assert all("not both" in rules[0] for rules in r.json["errors"].values()), r.json


@pytest.mark.parametrize("query, field", [
    ("modes=some", "query.modes"), ("page=0", "query.page"), ("page_size=0", "query.page_size"),
    (f"page_size={MAX_POWER_MODES_PAGE + 1}", "query.page_size"), ("page=x", "query.page"),
    (f"page={MAX_PAGE + 1}", "query.page"),
])
def test_bad_paging_values_are_422_naming_the_field(client, query, field):
    r = client.get(f"{ROUTE}?{query}")
    assert r.status_code == 422 and field in r.json["errors"], r.json


def test_the_openapi_document_lists_every_parameter(client):
    doc = client.get("/openapi.json").json
    params = {p["name"]: p for p in doc["paths"]["/v1/devices/{device}/power-modes"]["get"]["parameters"]
              if p["in"] == "query"}
    assert set(params) == {"space", "modes", "limit", "offset", "page", "page_size"}
    assert params["modes"]["schema"]["enum"] == ["presets", "all"]
    assert params["page"]["schema"]["minimum"] == 1
    # Every page the document allows starts within MAX_OFFSET at every page size it allows: a request valid by
    # the document is never refused for the pair (the fuzz bench sent one when only page's own range held).
    assert (params["page"]["schema"]["maximum"] - 1) * params["page_size"]["schema"]["maximum"] <= MAX_OFFSET
    assert params["page_size"]["schema"]["maximum"] == MAX_POWER_MODES_PAGE
    assert all(p.get("description") for p in params.values()), params
    # Tools (the fuzz hook) read which parameters exclude each other from the document.
    assert doc["paths"]["/v1/devices/{device}/power-modes"]["get"][EXCLUSIVE_PARAMETERS] == [
        [["space"], ["modes"]], [["limit", "offset"], ["page", "page_size"]]]
    answer = doc["components"]["schemas"]["PowerModePage"]["properties"]
    assert {"page", "page_size"} <= set(answer)


def test_the_openapi_document_states_the_defaults_the_schema_applies(client):
    doc = client.get("/openapi.json").json
    params = {p["name"]: p["schema"] for p in doc["paths"]["/v1/devices/{device}/power-modes"]["get"]["parameters"]
              if p["in"] == "query"}
    assert {k: params[k].get("default") for k in params} == {
        "space": "presets", "modes": "presets", "limit": DEFAULT_PAGE_SIZE, "offset": 0, "page": 1,
        "page_size": DEFAULT_PAGE_SIZE}
    answer = client.get(f"{ROUTE}?space=all").json
    assert (answer["limit"], answer["offset"]) == (DEFAULT_PAGE_SIZE, 0)
    assert client.get(ROUTE).json["space"] == "presets"


def _tree(module: str) -> ast.Module:
    return ast.parse((Path(__file__).parents[2] / module).read_text())


def test_the_spaces_and_the_default_page_are_stated_once():
    """The one-word mode sets come from models.catalogue (the CLI's too), the default page from api.schemas:
    no message lists the words itself and no default names one."""
    for module in ("api/schemas.py", "api/query_schemas.py", "api/power_modes_schemas.py"):
        tree = _tree(module)
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and id(n) not in docstrings]
        assert not [t for t in texts if all(f'"{w}"' in t for w in POWER_MODE_SPACES)], module
        defaults = [k.value for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords
                    if k.arg in ("load_default", "default")]
        assert not [d for d in defaults if isinstance(d, ast.Constant) and d.value in POWER_MODE_SPACES], module
    page = next(n for n in ast.walk(_tree("api/schemas.py"))
                if isinstance(n, ast.ClassDef) and n.name == "PageQuerySchema")
    limit = next(n.value for n in page.body if isinstance(n, ast.Assign) and n.targets[0].id == "limit")
    default = next(k.value for k in limit.keywords if k.arg == "load_default")
    assert isinstance(default, ast.Name) and default.id == "DEFAULT_PAGE_SIZE", ast.dump(default)
