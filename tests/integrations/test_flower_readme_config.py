"""The Flower fleet README's SuperLink block names its SuperLink in Flower's config so that pasting the block
again (or on a machine whose Flower config already has it) leaves a config Flower still reads: run here twice
through ``sh`` into a fresh ``FLWR_HOME``, no Flower process needed; and its wait for the SuperLink ends
when none comes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from flower_fixtures import config_lines, deployment_block

from tools.testing import free_port


def test_the_readmes_config_lines_twice_leave_one_valid_superlink_table(tmp_path):
    home = tmp_path / "flwr-home"  # missing, as on a machine where Flower never ran
    block = deployment_block()
    host, port = re.search(r"flower-superlink .*--host (\S+) --port (\d+)", block).groups()
    lines = config_lines(block)
    texts = []
    for _ in range(2):
        done = subprocess.run(["sh", "-e", "-c", lines], env={**os.environ, "FLWR_HOME": str(home)},
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        texts.append((home / "config.toml").read_text())
    config = tomllib.loads(texts[1])  # what Flower reads: a table declared twice is an error here too
    assert config == {"superlink": {"loopback": {"address": f"{host}:{port}", "insecure": True}}}
    assert texts[0] == texts[1]


def test_the_readmes_wait_for_the_superlink_ends_when_none_listens():
    """The wait looped until Ctrl-C when the SuperLink had died. Run here on a port nobody listens on, with
    its limit of 60 tries lowered to 2."""
    block = deployment_block()
    wait = re.search(r"^i=0; until .*?; done$", block, re.M | re.S).group(0)
    port = re.search(r"flower-superlink .*--port (\d+)", block).group(1)
    limit = re.search(r"-gt (\d+)", wait)
    assert limit and int(limit.group(1)) == 60  # the minute the README states
    lowered = wait.replace(port, str(free_port())).replace(limit.group(0), "-gt 2")
    start = time.monotonic()
    done = subprocess.run(["sh", "-e", "-c", lowered], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == ""
    assert 2 <= time.monotonic() - start < 30  # it waited (2 tries of 1 s), then let the block go on
