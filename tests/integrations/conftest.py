"""Fixtures of the integration tests: a fake device root (the profiler tests' fakes), a fitted workload, and
the Flower fleet example's package on the import path."""

from __future__ import annotations

import sys
import threading

import pytest
from flower_fixtures import EXAMPLE_APP, resnet_records

if str(EXAMPLE_APP) not in sys.path:
    sys.path.append(str(EXAMPLE_APP))


@pytest.fixture(scope="session")
def resnet_model():
    """A workload model fitted on :func:`flower_fixtures.resnet_records`, in process as ``jetpredict fit`` does."""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload

    return fit_workload(validate_records(resnet_records()))


@pytest.fixture(scope="session")
def lenet_models():
    """``lenet5-mnist`` models of the example's first two Jetson types, fitted on 4 twin-profiled modes each."""
    pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")
    from flower_fleet.fleet import fit_fleet_models
    from flower_fleet.task import DEVICES

    return fit_fleet_models(seed=0, devices=DEVICES[:2])


@pytest.fixture
def orin(fake_root):
    """An Orin NX in its default preset (15W, id 2) with an INA3221 reading 15 W on VDD_IN."""
    from jetpredict.models.catalogue import load_device

    fake_root.add_jetson(load_device("orin-nx"))
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 3000), ("VDD_CPU_GPU_CV", 5000, 1200),
                                              ("VDD_SOC", 5000, 600)])
    return fake_root


@pytest.fixture
def server_identity():
    """Flower's task identity as a ServerApp process has it, for strategies driven in this process."""
    task_identity = pytest.importorskip("flwr.supercore.task_identity").TaskIdentity
    before = task_identity._run_id, task_identity._node_id, task_identity._task_id
    task_identity.run_id, task_identity.node_id, task_identity.task_id = 1, 0, 0
    yield
    task_identity._run_id, task_identity._node_id, task_identity._task_id = before


@pytest.fixture
def service_url(tmp_path):
    """A running ``jetpredict serve`` app (werkzeug server in a thread) on a free port."""
    from jetpredict.api.app import create_app
    from werkzeug.serving import make_server

    app = create_app({"DATA_DIR": tmp_path, "API_KEYS": "k", "TESTING": True, "DATABASE_URL": ""})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(10)
