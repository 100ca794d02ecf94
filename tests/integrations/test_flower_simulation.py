"""The Flower fleet example under Flower's simulation engine (Ray), started as Flower recommends in this
release: ``flwr run`` against a SuperLink in simulation mode (here on a free loopback port); plus the twin's
round figures the simulated clients report."""

from __future__ import annotations

import json
import re

import pytest
from readme_tours import FLOWER_README, sh_blocks

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")
pytest.importorskip("ray", reason="Flower's simulation engine needs the [flower] extra (flwr[simulation])")

from flower_fixtures import (
    APP_TEST_DEADLINE_S,
    EXAMPLE_APP,
    FlowerProcesses,
    energy_to_deadline_j,
    needs_flower_tools,
    save_models,
)
from flower_fleet import task

from jetpredict.integrations.flower import TwinWorkload, twin_round
from tools.testing import free_port

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

WORKLOAD = "resnet18-cifar10"
RUN_LIMIT_S = 240.0
#: Simulated nodes in the test's run, the one part of the README's federation config it changes: the README's
#: first run has 50, each training the CNN in every arm and round on these 2 cores; 2 are the fewest a round
#: of min-nodes=2 trains, and keep the test under half a minute (25 s).
NUM_SUPERNODES = 2


def federation_config() -> str:
    """The README's first simulation run's ``--federation-config``, its size set to :data:`NUM_SUPERNODES`."""
    first = sh_blocks("Under the simulation engine", FLOWER_README)[0].splitlines()[0]
    readme = re.search(r'flwr run \. .*--federation-config "([^"]*)"', first).group(1)
    config, n = re.subn(r"num-supernodes=\d+", f"num-supernodes={NUM_SUPERNODES}", readme)
    assert n == 1, f"the README's --federation-config {readme!r} names no num-supernodes"
    return config


@needs_flower_tools
@pytest.mark.timeout(420)
def test_the_app_runs_under_the_simulation_engine(tmp_path, lenet_models):
    link_port = free_port()
    flower = FlowerProcesses(tmp_path, link_port)
    models = save_models(lenet_models, tmp_path / "models")
    results = tmp_path / "results.json"
    try:
        flower.start_superlink()
        # The README's first run takes the default run config (4 arms, 3 rounds, 10 s); for time this one runs
        # the two arms it compares for one round, at a deadline both nodes' plans meet (as the deployment test).
        flower.run_app(EXAMPLE_APP, f'arms="plan,maxn" num-server-rounds=1 min-nodes=2 '
                                    f'deadline-s={APP_TEST_DEADLINE_S} models="{models}" results-out="{results}"',
                       results, RUN_LIMIT_S,
                       "--federation-config", federation_config())
    finally:
        flower.stop()
    arms = {a["arm"]: a for a in json.loads(results.read_text())["arms"]}
    assert set(arms) == {"plan", "maxn"}
    for arm, run in arms.items():
        assert run["empty_rounds"] == [] and run["rounds"][0]["trained"] == 2, arm
        # Simulated node p is a DEVICES[p % 6] (the engine's partition ids; no node config of its own).
        assert {row["device"] for row in run["rows"]} == set(task.DEVICES[:2]), arm
        assert 0 <= run["accuracy"]["1"] <= 1

    assert energy_to_deadline_j(arms["plan"]["rows"], 30.0) < energy_to_deadline_j(arms["maxn"]["rows"], 30.0)


def test_twin_round_scales_with_the_work():
    from jetpredict.models.catalogue import load_device

    mode = load_device("nano").maxn
    one = twin_round("nano", mode, TwinWorkload(WORKLOAD, 0.01), epochs=1)
    four = twin_round("nano", mode, TwinWorkload(WORKLOAD, 0.02), epochs=2)
    assert four["time_s"] == pytest.approx(4 * one["time_s"]) and four["energy_j"] == pytest.approx(4 * one["energy_j"])
