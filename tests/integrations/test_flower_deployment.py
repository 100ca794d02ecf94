"""The Flower fleet example deployed by its README's "Under a SuperLink with SuperNodes" block, run as written
through ``sh`` (its ports moved to free ones, ``FLWR_HOME`` a fresh folder, and the test's run config added):
the SuperLink, the README's SuperNodes (insecure, loopback only), each node config carrying its Jetson type,
the block's Flower config and ``flwr run`` with the README's run config."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fixtures import (
    APP_TEST_DEADLINE_S,
    EXAMPLE_APP,
    deployment_block,
    energy_to_deadline_j,
    flower_env,
    needs_flower_tools,
    run_sh,
    save_models,
)
from flower_fleet import task

from tools.testing import free_port

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

#: How long the block may run, the run's wait for nodes included (s); about a minute on 2 busy cores.
RUN_LIMIT_S = 300.0


def readme_layout(block: str) -> tuple[list[str], str]:
    """The block's deployment: each SuperNode's ``--node-config`` and the ``flwr run``'s ``--run-config``."""
    node_configs = re.findall(r"flower-supernode .*?--node-config '([^']*)'", block, re.S)
    return node_configs, re.search(r"flwr run .* --run-config '([^']*)'", block).group(1)


def on_free_ports(block: str) -> str:
    """``block`` with its SuperLink's and SuperNodes' ports (9100-9102 in the README, which may be taken
    here) moved to free ones, each wherever the block names it."""
    readme_ports = re.findall(r"flower-super(?:link|node) .*?--port (\d+)", block, re.S)
    ports: set[int] = set()
    while len(ports) < len(readme_ports):  # distinct: nothing listens on any of them yet
        ports.add(free_port())
    moved = dict(zip(readme_ports, map(str, ports), strict=True))
    return re.sub(r"\b(" + "|".join(moved) + r")\b", lambda m: moved[m.group(1)], block)


@needs_flower_tools
@pytest.mark.timeout(420)
def test_the_readmes_superlink_block_runs_the_app_with_its_supernodes(tmp_path):
    from flower_fleet.fleet import fit_fleet_models

    block = deployment_block()
    node_configs, run_config = readme_layout(block)
    devices = [re.search(r'jetpredict-device="([^"]+)"', c).group(1) for c in node_configs]
    assert len(devices) == 2 and "min-nodes=2" in run_config  # what the checks below take as given
    # A node that ignored its jetpredict-device would be the round-robin fallback's type, task.device_of(p):
    # the README's types are other ones, so each row's type says which node config its node read.
    assert all(task.device_of(p) != device for p, device in enumerate(devices))
    # Fitted here for the README's types (1.6 s) rather than by the ServerApp for all six.
    models = save_models(fit_fleet_models(seed=0, devices=devices), tmp_path / "models")
    results = tmp_path / "results.json"
    assert "'" not in str(tmp_path)  # the paths go into the block's single-quoted run config
    # Where the models are and the results go; one round of the default 3 keeps the test near a minute. At the
    # default deadline (10 s) the nano's planned time's upper end at the default confidence (0.999) misses it,
    # so the plan trains only the Orin NX: the test's 30 s lets both arms train both nodes, which the checks
    # below compare.
    script, n = re.subn(r"(flwr run .* --run-config '[^']*)'", lambda m: (
        f'{m.group(1)} num-server-rounds=1 deadline-s={APP_TEST_DEADLINE_S} models="{models}" '
        f'results-out="{results}"\''), on_free_ports(block))
    assert n == 1
    # FLWR_HOME does not exist yet, as on a fresh machine: the block makes it.
    log = tmp_path / "block.log"
    rc = run_sh(script, EXAMPLE_APP, flower_env(tmp_path / "flwr-home"), log, RUN_LIMIT_S)
    assert rc == 0 and results.exists(), f"the block ended with {rc}:\n{log.read_text(errors='replace')[-4000:]}"
    arms = {a["arm"]: a for a in json.loads(results.read_text())["arms"]}
    # A row carries no partition id, but its epoch scale is its partition's share of the data (task.py).
    scales = {device: task.epoch_scale(p, len(devices)) for p, device in enumerate(devices)}
    assert abs(scales[devices[0]] / scales[devices[1]] - 1) > 0.05  # the pairs tell partitions apart
    assert set(arms) == {"plan", "maxn-drop"}
    for arm, run in arms.items():
        assert run["empty_rounds"] == [] and run["rounds"][0]["trained"] == 2, arm
        assert run["rounds"][0]["late"] == 0, arm
        assert sorted(row["device"] for row in run["rows"]) == sorted(devices), arm
        for row in run["rows"]:  # each node's type is its own node config's, not the round-robin fallback's
            assert row["epoch_scale"] == pytest.approx(scales[row["device"]]), (arm, row["device"])
        for row in run["rows"]:
            assert row["pred_time_s_low"] <= row["pred_time_s"] <= row["pred_time_s_high"]
            assert row["time_s"] <= APP_TEST_DEADLINE_S
    plan_modes = {row["mode"] for row in arms["plan"]["rows"]}
    assert plan_modes.isdisjoint({row["mode"] for row in arms["maxn-drop"]["rows"]})  # planned, not MAXN

    assert (energy_to_deadline_j(arms["plan"]["rows"], APP_TEST_DEADLINE_S)
            < energy_to_deadline_j(arms["maxn-drop"]["rows"], APP_TEST_DEADLINE_S))
