"""Static checks of the service image (no Docker daemon runs here).

The Dockerfile is parsed into instructions per stage; the runtime stage must be slim, torch-free,
non-root, exposed on 8080 and health-checked on ``/healthz`` with the interpreter (slim has no curl).
``tests/test_fresh_install.py`` runs the same HEALTHCHECK command against a real server.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
TORCH_PACKAGES = ("torch", "torchvision", "torchaudio", "ptflops", "nvidia-")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[list[Instruction]]:
    """Instructions grouped by build stage (a stage starts at each FROM); continuations joined."""
    stages: list[list[Instruction]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by Docker
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        buffer += stripped
        keyword, _, args = buffer.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip(), start)
        buffer = ""
        if instruction.keyword == "FROM":
            stages.append([instruction])  # stage[0] is its FROM
        elif stages:
            stages[-1].append(instruction)
        elif instruction.keyword != "ARG":
            raise AssertionError(f"line {start}: {keyword} before the first FROM")
    assert not buffer, "Dockerfile ends inside a continued line"
    return stages


def exec_form(args: str) -> list[str]:
    """The JSON array of an exec-form CMD/ENTRYPOINT/HEALTHCHECK CMD."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def healthcheck_command(stage: list[Instruction]) -> tuple[dict[str, str], list[str]]:
    (check,) = [i for i in stage if i.keyword == "HEALTHCHECK"]
    options = dict(re.findall(r"--([a-z-]+)=(\S+)", check.args))
    _, _, command = check.args.partition("CMD ")
    return options, exec_form(command.strip())


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for i in stage:
        if i.keyword == "ENV":
            env.update(dict(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)", i.args)))
    return env


@pytest.fixture(scope="module")
def stages() -> list[list[Instruction]]:
    assert DOCKERFILE.is_file(), "Dockerfile missing at the repository root"
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runtime(stages) -> list[Instruction]:
    return stages[-1]


def test_every_stage_builds_on_python_311_slim(stages):
    assert stages
    for stage in stages:
        base = stage[0].args.split()[0]
        assert base in ("python:3.11-slim", "docker.io/library/python:3.11-slim"), base


def test_runtime_runs_as_a_non_root_user(runtime):
    users = [i for i in runtime if i.keyword == "USER"]
    assert users, "the runtime stage never leaves root"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0", "")
    cmd_line = max(i.line for i in runtime if i.keyword in ("CMD", "ENTRYPOINT"))
    assert users[-1].line < cmd_line
    # the user must exist: created in this stage before it is switched to
    created = [i for i in runtime if i.keyword == "RUN" and re.search(rf"useradd\b.*\b{re.escape(user)}\b", i.args)]
    assert created and created[0].line < users[-1].line


def test_healthcheck_probes_healthz_with_python(runtime):
    options, command = healthcheck_command(runtime)
    assert command[:2] == ["python", "-c"], "slim images have no curl/wget: use the interpreter"
    code = command[2]
    compile(code, "<HEALTHCHECK>", "exec")
    assert "urllib.request" in code and "/healthz" in code
    assert "curl" not in " ".join(command) and "wget" not in " ".join(command)
    assert {"interval", "timeout", "retries"} <= set(options)


def test_no_torch_in_the_image(stages):
    for stage in stages:
        for i in stage:
            # a check that torch is absent (`! python -c "import torch"`) is the one allowed mention
            args = re.sub(r"!\s*python\S*\s+-c\s+[\"']import torch[\"']", "", i.args)
            for word in re.split(r"[\s\"'\[\],=;]+", args.lower()):
                assert not word.startswith(TORCH_PACKAGES), f"line {i.line}: {i.keyword} {i.args}"
            assert "[profiler" not in i.args and "[dev" not in i.args, f"line {i.line}: extras"


def test_installed_extras_exist_and_pull_no_torch(stages):
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = pyproject.get("optional-dependencies", {})
    used = set()
    for stage in stages:
        for i in stage:
            if i.keyword == "RUN" and "pip install" in i.args:
                assert "--no-cache-dir" in i.args, f"line {i.line}: pip install without --no-cache-dir"
                used.update(re.findall(r"\[([a-z,\-]+)\]", i.args))
    used = {e for group in used for e in group.split(",")}
    assert "server" in used, "gunicorn comes with the [server] extra"
    for extra in used:
        assert extra in extras, f"extra [{extra}] is not defined in pyproject.toml"
        deps = " ".join(extras[extra]).lower()
        assert not any(p in deps for p in TORCH_PACKAGES[:4]), extra
    assert any(d.lower().startswith("gunicorn") for d in extras["server"])
    # The image serves PostgreSQL URLs: the [postgres] extra with a driver is installed too.
    assert "postgres" in used, "the image needs the [postgres] extra (PostgreSQL driver)"
    assert any(d.lower().startswith(("psycopg", "psycopg2")) for d in extras["postgres"])
    # gunicorn >= 22: the image binds 0.0.0.0, so releases without the slow-client fixes are excluded.
    pins = [re.fullmatch(r"gunicorn>=(\d+)(?:\.\d+)*", d.replace(" ", "")) for d in extras["server"]]
    assert any(m and int(m.group(1)) >= 22 for m in pins), extras["server"]
    base = " ".join(pyproject["dependencies"]).lower()
    assert not any(p in base for p in TORCH_PACKAGES[:4])


def test_port_environment_and_command(runtime):
    exposed = [p for i in runtime if i.keyword == "EXPOSE" for p in i.args.split()]
    assert "8080" in exposed or "8080/tcp" in exposed
    env = env_of(runtime)
    assert env.get("JETPREDICT_HOST") == "0.0.0.0"
    (cmd,) = [i for i in runtime if i.keyword == "CMD"]
    argv = exec_form(cmd.args)
    assert argv[:2] == ["jetpredict", "serve"]
    # Flags override variables: a --port here would pin 8080 against `docker run -e JETPREDICT_PORT=9000`,
    # while the health check probes the variable's port.
    assert "--port" not in argv and "--host" not in argv and env.get("JETPREDICT_PORT") == "8080"
    assert not [i for i in runtime if i.keyword == "ENTRYPOINT"], "CMD alone keeps `docker run img sh` easy"


def test_build_context_keeps_what_the_wheel_needs():
    patterns = [p.strip() for p in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
                if p.strip() and not p.startswith("#")]

    def ignored(path: str) -> bool:
        return any(fnmatch.fnmatch(path, p.rstrip("/")) or fnmatch.fnmatch(path, p.rstrip("/") + "/*")
                   for p in patterns)

    for needed in ("pyproject.toml", "models", "models/devices/agx-xavier.toml", "api", "predictor",
                   "profiler", "jetpredict", "profiler/sim/data/twin_calibration.toml"):
        assert not ignored(needed), needed
    readme = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"].get("readme")
    if isinstance(readme, str):
        assert not ignored(readme)
    for junk in (".git", "tests", "tools", "build", ".venv", "jetpredict.egg-info"):
        assert ignored(junk), f"{junk} would be sent to the Docker daemon"


def test_copy_sources_exist(stages):
    for stage in stages:
        for i in stage:
            if i.keyword in ("COPY", "ADD") and "--from=" not in i.args:
                sources = [a for a in i.args.split()[:-1] if not a.startswith("--")]
                for source in sources:
                    assert (ROOT / source).exists(), f"line {i.line}: {source} is not in the repository"
