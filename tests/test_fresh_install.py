"""A clean install without extras runs the service: what the Docker image does, minus Docker.

A fresh virtual environment (no system site-packages) gets ``pip install <copy of the repo>`` (this
interpreter's pip run against it with ``--python``, so the venv holds no pip or setuptools of its own); then
``jetpredict serve`` must come up and answer ``/healthz`` (the test waits on readiness, bounded by
:data:`READY_BOUND_S`, a limit for a hung server rather than a speed claim: a loaded 2-core machine may take
far longer than an idle one), the Dockerfile's HEALTHCHECK command must pass against it, the bundled catalogue must ship inside the package, and torch must not be importable.
The README's HTTP tour (:mod:`readme_tours`) runs on this install: the README's first command installs
exactly this.
Skipped only when pip cannot reach a package index; a broken package or service fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from readme_tours import run_http_tour

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

ROOT = Path(__file__).resolve().parents[1]
#: How long to wait for a starting server before calling it hung (s). Generous on purpose: this tests
#: that it starts and answers, not how fast; the start time is printed for the record.
READY_BOUND_S = 300.0
PIP_TIMEOUT_S = 240
#: Top-level names that are never part of the distribution (build outputs, caches, local data).
NOT_SHIPPED = {".git", "build", "dist", ".venv", "venv", ".pytest_cache", ".ruff_cache", ".mypy_cache",
               "tests", "bench", "data", "docs"}
#: pip output that means "no package index reachable", as opposed to a broken package. An index that lists
#: no version at all of a requirement ("(from versions: none)") is one that was not reached; "no matching
#: distribution" with versions listed is a requirement no release meets (a bad pin): a broken package.
INDEX_UNAVAILABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Network is unreachable|ProxyError|Max retries exceeded|ReadTimeoutError|ConnectTimeoutError|"
    r"\(from versions: none\)")


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment minus anything that could leak this interpreter's packages or config.

    PYTHONDONTWRITEBYTECODE goes too: an install as pip leaves it has its bytecode (the set-up writes that of
    the modules `serve` imports), and with the caller's setting every process here compiled pandas, scipy and
    flask from source again: 7 s an `import jetpredict.api.app` instead of 1.9 s."""
    leaky = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "PIP_USER",
             "PIP_TARGET", "PIP_PREFIX", "__PYVENV_LAUNCHER__", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in leaky and not k.startswith("JETPREDICT_")}
    # HOME stays: pip may reuse the user's wheel cache; user site-packages stay off (PYTHONNOUSERSITE).
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


@dataclass(frozen=True)
class FreshInstall:
    root: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(**extra)


@pytest.fixture(scope="session")
def fresh_install(testrun_uid: str) -> Iterator[FreshInstall]:
    """The venv, built once per test run: xdist's workers each hold a session of their own, and work stealing
    can hand this file's tests to several of them (run alone under ``-n 3`` it was built three times, 61-66 s
    each). The first worker that asks builds it under a lock; the last one done with it removes it. It lies
    in a private directory of its own (pytest's rotating basetemp can be pruned by a concurrent pytest run in
    the same checkout)."""
    root = Path(tempfile.gettempdir()) / f"jetpredict-fresh-install-{os.getuid()}-{testrun_uid}"
    with _claimed(root):
        if not (root / "built").exists():  # none yet, or one whose builder was killed: built again here
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(mode=0o700)
            try:
                _build_fresh_install(root)
            except BaseException:  # a skip (no package index) or a failure leaves nothing behind
                shutil.rmtree(root, ignore_errors=True)
                raise
            (root / "built").touch()
        (root / "users").write_text(str(_users(root) + 1))
    try:
        yield FreshInstall(root, root / "venv")
    finally:
        with _claimed(root):
            left = _users(root) - 1
            (root / "users").write_text(str(left))
            if left == 0:
                shutil.rmtree(root, ignore_errors=True)


def _users(root: Path) -> int:
    """How many workers are using the venv under ``root`` now."""
    return int((root / "users").read_text()) if (root / "users").exists() else 0


@contextmanager
def _claimed(root: Path) -> Iterator[None]:
    """Held by one process at a time (an exclusive flock on ``root``'s lock file, beside it). A lock file the
    last user removed while this process waited on it is left for the one now at that path."""
    lock_path = root.with_suffix(".lock")
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                try:
                    yield
                finally:
                    if not root.exists():
                        lock_path.unlink(missing_ok=True)
                return
        finally:
            os.close(fd)


def _build_fresh_install(root: Path) -> None:
    src = root / "src"
    shutil.copytree(ROOT, src, ignore=lambda d, names: [
        n for n in names if (Path(d) == ROOT and n in NOT_SHIPPED) or n == "__pycache__"
        or n.endswith((".egg-info", ".pyc", ".sqlite"))])
    venv = root / "venv"
    # pip comes from this interpreter (the same pip release ensurepip would unpack): unpacking pip and setuptools
    # into the venv took 8 s, and the package needs neither at run time.
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True,
                          text=True, timeout=120, env=clean_env())
    if made.returncode != 0:
        pytest.skip(f"python -m venv is unavailable here: {made.stderr.strip()[-300:]}")
    cfg = (venv / "pyvenv.cfg").read_text(encoding="utf-8")
    assert re.search(r"include-system-site-packages\s*=\s*false", cfg), cfg
    try:
        # --no-compile only skips byte-compiling scipy/pandas up front (a third of the install time)
        # pip runs under the venv's interpreter from this one's site-packages: it writes no bytecode there.
        pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                              "--quiet", "--no-compile", str(src)],
                             capture_output=True, text=True, timeout=PIP_TIMEOUT_S, cwd=root,
                             env=clean_env(PYTHONDONTWRITEBYTECODE="1"))
    except subprocess.TimeoutExpired as exc:
        # A hang guard, not a network test: the install took 21-56 s on the 2-core CI machine.
        # TimeoutExpired holds bytes whatever text=True says.
        output = b"".join(x for x in (exc.stdout, exc.stderr) if x).decode(errors="replace")
        pytest.fail(f"pip install did not finish in {PIP_TIMEOUT_S} s:\n{output[-3000:]}")
    if pip.returncode != 0:
        output = pip.stdout + pip.stderr
        evidence = [line.strip() for line in output.splitlines() if INDEX_UNAVAILABLE.search(line)]
        if evidence:
            pytest.skip(f"pip cannot reach a package index: {evidence[-1][:300]}")
        pytest.fail(f"pip install of the package failed (not a network problem):\n{output[-3000:]}")
    # What pip would have byte-compiled: the modules `serve` imports, so the start is measured on
    # an install as a default `pip install` leaves it.
    warm = subprocess.run([str(venv / "bin" / "python"), "-c", "import jetpredict.api.app"], capture_output=True,
                          text=True, timeout=120, cwd=root, env=clean_env())
    assert warm.returncode == 0, f"the installed package does not import:\n{warm.stderr[-3000:]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout_s: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@dataclass
class RunningServer:
    port: int
    process: subprocess.Popen
    log: Path
    healthy_after_s: float
    healthz_body: bytes

    def stop(self) -> None:
        if self.process.poll() is None:
            # gunicorn forks workers: signal the whole session we started, not just the master
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def server(fresh_install) -> Iterator[RunningServer]:
    port = free_port()
    workdir = fresh_install.root / "serve"
    workdir.mkdir(exist_ok=True)
    log = workdir / "serve.log"
    env = fresh_install.env(JETPREDICT_DATA_DIR=str(workdir / "data"))
    with log.open("wb") as sink:
        process = subprocess.Popen([str(fresh_install.bin / "jetpredict"), "serve", "--port", str(port)],
                                   cwd=workdir, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    started = time.monotonic()
    running = None
    try:
        while time.monotonic() - started < READY_BOUND_S:
            if process.poll() is not None:
                pytest.fail(f"`jetpredict serve` exited with {process.returncode} before answering:\n"
                            f"{log.read_text(errors='replace')[-3000:]}")
            try:
                status, body = get(f"http://127.0.0.1:{port}/healthz", timeout_s=1.0)
            except OSError:
                time.sleep(0.2)
                continue
            if status == 200:
                running = RunningServer(port, process, log, time.monotonic() - started, body)
                break
            time.sleep(0.2)
        if running is None:
            pytest.fail(f"/healthz did not answer 200 within {READY_BOUND_S:g} s of start (hung?):\n"
                        f"{log.read_text(errors='replace')[-3000:]}")
        print(f"`jetpredict serve` answered /healthz {running.healthy_after_s:.1f} s after start",
              file=sys.stderr)
        yield running
    finally:
        RunningServer(port, process, log, 0.0, b"").stop()


def dockerfile_healthcheck() -> list[str]:
    """The exec-form HEALTHCHECK CMD of the Dockerfile (continuation lines joined)."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK\b.*?\bCMD\s+(\[.*\])\s*$", text, re.MULTILINE)
    assert match, "Dockerfile has no exec-form HEALTHCHECK"
    return json.loads(match.group(1))


def test_clean_install_has_no_torch(fresh_install):
    probe = subprocess.run([str(fresh_install.bin / "python"), "-c", "import torch"], capture_output=True,
                           text=True, timeout=60, cwd=fresh_install.root, env=fresh_install.env())
    assert probe.returncode != 0
    assert "ModuleNotFoundError" in probe.stderr and "torch" in probe.stderr


@pytest.mark.parametrize("module", ["flwr", "ray"])
def test_clean_install_leaves_flower_and_ray_out(fresh_install, module):
    # Flower and its simulation engine come only with the [flower] extra; the integration then names it.
    probe = subprocess.run([str(fresh_install.bin / "python"), "-c", f"import {module}"], capture_output=True,
                           text=True, timeout=60, cwd=fresh_install.root, env=fresh_install.env())
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr
    probe = subprocess.run([str(fresh_install.bin / "python"), "-c", "import jetpredict.integrations.flower"],
                           capture_output=True, text=True, timeout=60, cwd=fresh_install.root,
                           env=fresh_install.env())
    assert probe.returncode != 0 and "pip install 'jetpredict[flower]'" in probe.stderr


def test_bundled_catalogue_ships_in_the_package(fresh_install):
    proc = subprocess.run([str(fresh_install.bin / "jetpredict"), "devices", "--format", "json"],
                          capture_output=True, text=True, timeout=60, cwd=fresh_install.root,
                          env=fresh_install.env())
    assert proc.returncode == 0, proc.stderr
    sizes = {d["device"]: d["power_modes"] for d in json.loads(proc.stdout)}
    assert sizes["agx-xavier"] == 29_232 and sizes["orin-agx"] == 18_096 and len(sizes) == 6
    where = subprocess.run([str(fresh_install.bin / "python"), "-c",
                            "import jetpredict; print(jetpredict.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=fresh_install.root,
                           env=fresh_install.env())
    assert str(fresh_install.venv) in where.stdout, "jetpredict imported from outside the fresh venv"
    # Every data file of models/ and of the twin (catalogue, reference sweeps, fitted models, twin
    # calibration, built-in workloads) must be package data: the image and `pip install` users have no
    # checkout.
    installed = Path(where.stdout.strip()).parent
    for folder in ("models", "profiler"):
        source = fresh_install.root / "src" / folder
        wanted = {p.relative_to(source) for p in source.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
        missing = sorted(str(p) for p in wanted if not (installed / folder / p).is_file())
        assert not missing, f"not installed (add to [tool.setuptools.package-data]): {missing}"


def test_only_the_jetpredict_package_lands_in_site_packages(fresh_install):
    """A user's own `models/` or `api/` package must keep working beside jetpredict."""
    code = "import jetpredict, pathlib; print(pathlib.Path(jetpredict.__file__).parent.parent)"
    site = subprocess.run([str(fresh_install.bin / "python"), "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=fresh_install.root, env=fresh_install.env())
    assert site.returncode == 0, site.stderr
    ours = {p.name for p in Path(site.stdout.strip()).iterdir()
            if p.name == "jetpredict" or p.name.startswith("jetpredict-")}
    assert ours == {"jetpredict", "jetpredict-0.1.0.dist-info"}
    for name in ("models", "api", "predictor", "profiler", "tools"):
        assert not (Path(site.stdout.strip()) / name).exists(), f"{name} installed at the top level"
    version = subprocess.run([str(fresh_install.bin / "jetpredict"), "--version"], capture_output=True,
                             text=True, timeout=60, cwd=fresh_install.root, env=fresh_install.env())
    assert version.returncode == 0 and version.stdout.strip() == "jetpredict 0.1.0"


def test_serve_answers_healthz(server):
    status, _ = get(f"http://127.0.0.1:{server.port}/healthz")
    assert status == 200
    status, _ = get(f"http://127.0.0.1:{server.port}/no-such-route")
    assert status == 404


def test_dockerfile_healthcheck_passes_only_while_a_service_answers(fresh_install, server):
    argv = dockerfile_healthcheck()
    assert argv[0] == "python"
    argv = [str(fresh_install.bin / "python"), *argv[1:]]
    env = fresh_install.env(JETPREDICT_PORT=str(server.port))
    up = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env, cwd=fresh_install.root)
    assert up.returncode == 0, up.stderr
    nobody = fresh_install.env(JETPREDICT_PORT=str(free_port()))  # a port no server listens on
    down = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=nobody, cwd=fresh_install.root)
    assert down.returncode != 0


def test_predictions_use_the_bundled_models_without_torch(server):
    # Two profiled AGX Xavier modes inline (no stored workload): the bundled reference does the rest.
    rows = [{"device": "agx-xavier", "workload": "fresh-install", "mode": mode, "cpu_cores": cores,
             "cpu_mhz": cpu, "gpu_mhz": gpu, "emc_mhz": emc, "batch_size": 16, "minibatches_per_epoch": 3125,
             "epoch_time_s": epoch_s}
            for mode, cores, cpu, gpu, emc, epoch_s in [("MAXN", 8, 2265.6, 1377, 2133, 96.5),
                                                        ("MODE_15W", 4, 1200, 670, 1331.2, 231.0)]]
    body = json.dumps({"device": "agx-xavier", "workload": {"rows": rows}, "modes": "presets"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}/v1/predictions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        answer = json.load(response)
    predictions = {p["mode"]: p for p in answer["predictions"]}
    assert len(predictions) == 8 and "MODE_30W_ALL" in predictions
    for p in predictions.values():
        assert 0 < p["epoch_time_s_low"] <= p["epoch_time_s"] <= p["epoch_time_s_high"]
        assert p["avg_power_w"] > 0 and p["epoch_energy_j"] > 0
    # MODE_10W caps every knob below MAXN, so it cannot be predicted faster
    assert predictions["MODE_10W"]["epoch_time_s"] > predictions["MAXN"]["epoch_time_s"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the tour uses curl (.ci/run installs it)")
def test_the_readme_http_tour_runs_on_the_base_install(fresh_install, tmp_path):
    run_http_tour(tmp_path, fresh_install.bin, fresh_install.env())


#: Folders whose imports the test suite needs: the tests themselves and the build-time tools they import.
IMPORTING = ("tests", "tools")


def _imported_top_names() -> set[str]:
    """Top-level module names imported anywhere under :data:`IMPORTING` (absolute imports, at any depth,
    and ``pytest.importorskip("name")``)."""
    import ast

    names: set[str] = set()
    for folder in IMPORTING:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
                elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
                      and node.args and isinstance(node.args[0], ast.Constant)):
                    names.add(str(node.args[0].value).split(".")[0])
    return names


def _local_names() -> set[str]:
    """Modules of this repository (packages, test helpers and examples that tests put on sys.path)."""
    local = {"jetpredict", *IMPORTING, "bench", "examples"}
    for folder in (*IMPORTING, "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            local.add(path.stem)
        local.update(p.name for p in (ROOT / folder).rglob("*") if p.is_dir())
    return local


def _test_command_extras() -> list[str]:
    """The extras of README's test command, ``python3 -m pip install -e ".[...]" && pytest``."""
    found = re.search(r'pip install -e "\.\[([\w,]+)\]" && pytest', (ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README.md states the test command: pip install -e \".[extras]\" && pytest"
    return found.group(1).split(",")


def _declared_closure() -> set[str]:
    """Normalised names of the distributions README's test command installs (core and the extras it names,
    :func:`_test_command_extras`) and, through their installed metadata, everything those require: what a
    fresh clone gets before its `pytest` (an extra it does not name, such as ``[arrow]``, does not count)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def wanted(req: Requirement, extras: set[str]) -> bool:
        # A requirement counts when its marker holds here for no extra or for one its parent asked for:
        # jsonschema behind some package's optional extra is not what a fresh install brings.
        return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras})

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    todo += [Requirement(r) for extra in _test_command_extras() for r in project["optional-dependencies"][extra]]
    todo = [r for r in todo if wanted(r, set())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        key = (norm(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            todo += [r for r in map(Requirement, metadata.requires(req.name) or []) if wanted(r, req.extras)]
        except metadata.PackageNotFoundError:
            continue  # not installed here: declared all the same
    return {name for name, _ in seen}


def test_every_package_the_tests_import_is_declared():
    """`pip install -e ".[profiler,dev,postgres,flower]" && pytest` must not stop at a missing module: every
    third-party module imported (or ``importorskip``-ed) under tests/ and tools/ comes from a distribution that
    command installs (core or an extra it names), directly or as one's requirement."""
    from importlib import metadata

    third_party = _imported_top_names() - set(sys.stdlib_module_names) - _local_names() - {"__future__"}
    providers = metadata.packages_distributions()
    declared = _declared_closure()
    missing = {}
    for name in sorted(third_party):
        dists = providers.get(name)
        if not dists:
            missing[name] = "not installed here: declare the distribution that provides it"
            continue
        if not any(re.sub(r"[-_.]+", "-", d).lower() in declared for d in dists):
            missing[name] = f"from {', '.join(dists)}, which README's test command does not install"
    assert not missing, missing
