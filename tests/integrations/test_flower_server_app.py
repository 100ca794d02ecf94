"""The Flower fleet example's ServerApp refuses what would lose a run at its end before it starts any work:
a ``results-out`` it could not write; and a node-wait timeout names the run config keys, not the library's."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fleet import server_app
from flwr.app import Context, RecordDict
from flwr.serverapp import Grid
from jetpredict.models.errors import InputError


class UntouchedGrid(Grid):
    """A grid the ServerApp must not use: any call fails the test."""

    def __getattribute__(self, name: str):
        if name.startswith("__"):
            return object.__getattribute__(self, name)
        raise AssertionError(f"the grid was used ({name}) before the run config was checked")

    def set_run(self, run_id): ...
    def run(self): ...
    def create_message(self, *args, **kwargs): ...
    def get_node_ids(self): ...
    def push_messages(self, messages): ...
    def pull_messages(self, message_ids): ...
    def send_and_receive(self, messages, *, timeout=None): ...


def _context(run_config: dict) -> Context:
    return Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config)


@pytest.fixture
def no_fitting(monkeypatch):
    """Fitting the planner's models is the run's first work: it must not start."""
    def refuse(*args, **kwargs):
        raise AssertionError("models were fitted before the run config was checked")

    monkeypatch.setattr(server_app, "fit_fleet_models", refuse)


@pytest.mark.parametrize("where", ["missing/results.json", "a-file/results.json"])
def test_a_results_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, no_fitting, where):
    (tmp_path / "a-file").write_text("not a folder")
    path = tmp_path / where
    with pytest.raises(InputError, match=r"^run config results-out .*" + path.parent.name) as err:
        server_app.main(UntouchedGrid(), _context({"results-out": str(path)}))
    assert err.value.field == "results-out"
    assert not path.exists()


def test_a_node_wait_timeout_names_the_run_config_keys(lenet_models, server_identity):
    from flower_fleet.fleet import FleetConfig, run_arms
    from test_flower_app import app_grid, run_config

    from jetpredict.integrations.flower import DeviceQueryError

    cfg = FleetConfig(arms="plan", num_server_rounds=1, min_nodes=3, node_wait_timeout_s=0.2)
    with pytest.raises(DeviceQueryError) as err:
        run_arms(app_grid(2, run_config(cfg)), cfg, lenet_models)
    said = str(err.value)
    # The README's keys, which the user sets; not the library's names, which the user never sees.
    assert "run config min-nodes" in said and "run config node-wait-timeout-s=0.2" in said, said
    assert "node_wait_timeout_s" not in said and "min_available_nodes" not in said, said
    assert said.startswith("plan arm: ") and isinstance(err.value.__cause__, DeviceQueryError)
