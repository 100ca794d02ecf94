"""Helpers shared by the integration tests: published profile rows of a new workload."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from jetpredict.models.profile_files import read_profile_csv, rows_to_records
from readme_tours import FLOWER_README, sh_blocks

from jetpredict import models

PUBLISHED_CSV = Path(models.__file__).parent / "reference" / "agx-xavier-published.csv"
#: The Flower fleet example app (examples/flower_fleet/flower_fleet), imported by the app's tests.
EXAMPLE_APP = Path(__file__).resolve().parents[2] / "examples" / "flower_fleet"


def resnet_records() -> list[dict]:
    """4 published AGX Xavier ResNet-18 rows (modes a-d) as the new workload ``my-resnet``."""
    rows = read_profile_csv(PUBLISHED_CSV)
    rows = rows[rows["workload"] == "resnet18-cifar10"].head(4).copy()
    rows["workload"] = "my-resnet"
    return rows_to_records(rows)


# --- Flower's own processes (SuperLink, SuperNodes), started on loopback by the app tests ----------------

FLOWER_TOOLS = ("flower-superlink", "flower-supernode", "flwr")
#: The round deadline the app tests set (simulated s): both README nodes' plans meet it, where at the README's
#: default 10 s the Nano's upper time bound misses and the plan arm trains the Orin NX alone.
APP_TEST_DEADLINE_S = 30.0
#: Marks a test that runs Flower's command line tools (skipped where they are not installed).
needs_flower_tools = pytest.mark.skipif(any(shutil.which(t) is None for t in FLOWER_TOOLS),
                                        reason="Flower's command line tools are missing")


#: The README section whose shell block the deployment tests run as written.
DEPLOYMENT_SECTION = "Under a SuperLink with SuperNodes (insecure, loopback only)"


def deployment_block() -> str:
    """The shell block of the README's :data:`DEPLOYMENT_SECTION` (there is one)."""
    (block,) = sh_blocks(DEPLOYMENT_SECTION, FLOWER_README)
    return block


def config_lines(block: str) -> str:
    """The lines of ``block`` that name its SuperLink in Flower's config: from the first that mentions
    ``FLWR_HOME`` to the end of the first here-document after it."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if "FLWR_HOME" in line)
    end = lines.index("EOF", start)
    return "\n".join(lines[start:end + 1]) + "\n"


def flower_env(home: Path) -> dict[str, str]:
    """This environment for Flower's tools, with ``home`` as ``FLWR_HOME`` (never the user's ~/.flwr)."""
    import os

    # The app runs in this environment (jetpredict installed), as the README's export says; no network for
    # per-run installs.
    return {**os.environ, "FLWR_HOME": str(home), "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}


def run_sh(script: str, cwd: Path, env: dict[str, str], log: Path, limit_s: float) -> int:
    """Run ``script`` with ``sh -e`` in ``cwd`` as the leader of a new process group (output in ``log``) and
    return its exit status; what it left running (its ``&`` jobs and what they started) ends with the group.
    A script still running after ``limit_s`` fails the test with the end of its output."""
    import subprocess

    with log.open("w") as out:
        proc = subprocess.Popen(["sh", "-e", "-c", script], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the script ran past {limit_s:g} s:\n{log.read_text(errors='replace')[-4000:]}"
                             ) from None
    finally:
        _end_groups([proc])


def _end_groups(leaders) -> None:
    """SIGTERM the process groups that ``leaders`` lead (all at once), then SIGKILL what is left of them after
    :data:`GROUP_GRACE_S`; a group whose leader has exited is signalled too (what it spawned may live on)."""
    import contextlib
    import os
    import signal
    import time

    def alive(leader) -> bool:
        leader.poll()  # reaps the leader, which would otherwise keep the group answering
        try:
            os.killpg(leader.pid, 0)
        except ProcessLookupError:
            return False
        return True

    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [leader for leader in leaders if alive(leader)]
        for leader in left:
            with contextlib.suppress(ProcessLookupError):  # ended since it was looked at
                os.killpg(leader.pid, sig)
        end = time.monotonic() + GROUP_GRACE_S
        while left and time.monotonic() < end:
            time.sleep(0.1)
            left = [leader for leader in left if alive(leader)]
        if not left:
            return


#: How long (s) a process group gets to end after SIGTERM before SIGKILL.
GROUP_GRACE_S = 15.0


class FlowerProcesses:
    """Flower processes started for one test on 127.0.0.1, each leading its own process group (so what it
    spawns ends with it), with a private ``FLWR_HOME`` whose ``config.toml`` names the SuperLink ``test``."""

    def __init__(self, tmp_path: Path, link_port: int) -> None:
        self.tmp_path = tmp_path
        self.link_port = link_port
        home = tmp_path / "flwr-home"
        home.mkdir()
        (home / "config.toml").write_text(f'[superlink]\ndefault = "test"\n\n[superlink.test]\n'
                                          f'address = "127.0.0.1:{link_port}"\ninsecure = true\n')
        self.env = flower_env(home)
        self.procs: list = []
        self._logs: list = []

    def start_superlink(self) -> None:
        """The SuperLink on ``link_port`` with the simulation engine, its state in a file of its own."""
        self.start("superlink", ["flower-superlink", "--insecure", "--simulation",
                                 "--host", "127.0.0.1", "--port", str(self.link_port),
                                 "--database", str(self.tmp_path / "state.db")], self.link_port)

    def start(self, name: str, args: list[str], port: int, limit_s: float = 60.0):
        """Start ``args`` (output in ``NAME.log``) and wait until it listens on ``port``."""
        import subprocess
        import time

        log = (self.tmp_path / f"{name}.log").open("w")
        self._logs.append(log)
        proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise AssertionError(f"{args[0]} exited with {proc.returncode}:\n{self.log(name)}")
            if _listening(port):
                return proc
            time.sleep(0.2)
        raise AssertionError(f"{args[0]} did not listen on 127.0.0.1:{port} within {limit_s:g} s")

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")[-4000:]

    def run_app(self, app: Path, run_config: str, results: Path, limit_s: float, *extra: str) -> None:
        """``flwr run APP test --run-config ...``, then wait up to ``limit_s`` for the ServerApp's results file;
        a ServerApp that ends without one fails the test at once, with the run's own log."""
        import re
        import subprocess
        import time

        submitted = subprocess.run(["flwr", "run", str(app), "test", "--run-config", run_config, *extra],
                                   env=self.env, capture_output=True, text=True, timeout=120)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        end = time.monotonic() + limit_s
        while (not _complete_json(results) and time.monotonic() < end and all(p.poll() is None for p in self.procs)
               and "Finished task" not in (self.tmp_path / "superlink.log").read_text(errors="replace")):
            time.sleep(RESULTS_POLL_S)
        # Stopped by the run's end or a process's exit: a file still being written gets the time to close.
        grace = time.monotonic() + RESULTS_GRACE_S
        while not _complete_json(results) and time.monotonic() < grace:
            time.sleep(RESULTS_POLL_S)
        if not results.exists():
            run_id = re.search(r"started run (\d+)", submitted.stdout)
            raise AssertionError(f"the ServerApp wrote no results (limit {limit_s:g} s); the run's log:\n"
                                 + (self.run_log(run_id.group(1)) if run_id else self.log("superlink")))

    def run_log(self, run_id: str) -> str:
        """What ``flwr log RUN_ID test --show`` prints: the ServerApp's own output, its traceback included."""
        import subprocess

        shown = subprocess.run(["flwr", "log", run_id, "test", "--show"], env=self.env, capture_output=True,
                               text=True, timeout=60)
        return (shown.stdout + shown.stderr)[-4000:]

    def stop(self) -> None:
        _end_groups(self.procs)
        for log in self._logs:
            log.close()


#: How often (s) run_app looks for the results file, and how long (s) it still waits for one being written.
RESULTS_POLL_S, RESULTS_GRACE_S = 0.1, 0.5


def _complete_json(path: Path) -> bool:
    """Whether ``path`` holds a whole JSON document: the ServerApp writes its results in one call, and a
    part-written object lacks its closing brace, so it does not parse."""
    import json

    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):  # not there yet, or cut mid-write (UnicodeDecodeError is one too)
        return False
    return True


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def save_models(models: dict, folder: Path) -> Path:
    """Write ``{device: model}`` as ``folder/DEVICE.json`` model files (what ``jetpredict fit --out`` writes)."""
    from jetpredict.predictor.bundled import save_model

    folder.mkdir()
    for device, model in models.items():
        save_model(model, folder / f"{device}.json")
    return folder


def energy_to_deadline_j(rows: list[dict], deadline_s: float) -> float:
    """What the plan minimises, from an arm's result rows: each client's training energy plus idle at its
    mode's base power until the deadline (J). For LeNet-5 MAXN is near the least training energy, as in the
    real sweep, so a plan's saving is in the idle."""
    return sum(r["energy_j"] + r["base_power_w"] * max(0.0, deadline_s - r["time_s"]) for r in rows)
