"""The Docker image, without a Docker engine: the wheel is built from exactly the files the
Dockerfile's COPY lines name, installed into a fresh virtual environment, and every console
script, every package and `steelframe serve` itself are started from that install. A file
the Dockerfile forgets (web_gui/ once) fails here, not in production."""

from __future__ import annotations

import glob
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from steelframe.cli import COMMANDS
from steelframe.listening import announced_url
from tests.fakes.serve_process import child_env

pytestmark = pytest.mark.slow  # installs and starts the package as the image does

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str
    stage: int


def instructions() -> list[Instruction]:
    """The Dockerfile's instructions with continuation lines joined, each with its stage."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found: list[Instruction] = []
    stage = -1
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        found.append(Instruction(keyword.upper(), arguments.strip(), stage))
    return found


def copied_sources() -> list[str]:
    """What the COPY lines take from the build context (not from another stage)."""
    sources: list[str] = []
    for item in instructions():
        if item.keyword != "COPY":
            continue
        words = shlex.split(item.arguments)
        if any(word.startswith("--from") for word in words):
            continue
        sources += [word for word in words[:-1] if not word.startswith("--")]
    return sources


@dataclass(frozen=True)
class Installed:
    bin: Path
    venv: Path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel of the Dockerfile's files, installed with no network into a new venv whose
    dependencies come from this environment (a .pth line; never its editable steelframe)."""
    base = tmp_path_factory.mktemp("image")
    context = base / "context"
    context.mkdir()
    for source in copied_sources():
        matches = glob.glob(str(ROOT / source))
        assert matches, f"the Dockerfile copies {source}, which does not exist"
        for match in map(Path, matches):
            target = context / match.relative_to(ROOT)
            if match.is_dir():
                shutil.copytree(match, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(match, target)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    wheels = base / "wheels"
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
         "-w", str(wheels), str(context)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    venv = base / "venv"
    subprocess.run(
        [sys._base_executable, "-m", "venv", "--without-pip", str(venv)],  # type: ignore[attr-defined]
        check=True, timeout=60,
    )  # fmt: skip
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.check_output([str(venv / "bin/python"), "-c", where], text=True).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [*pip, "--python", str(venv / "bin/python"), "install", "-q", "--no-deps", "--no-index",
         *map(str, wheels.glob("*.whl"))],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    yield Installed(venv / "bin", venv)


def _run(installed: Installed, *command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.bin / command[0]), *command[1:]],
        cwd=cwd,
        env=child_env({"STEELFRAME_DATA_DIR": str(cwd / "data")}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_console_script_and_command_starts_from_the_image_install(
    installed: Installed, tmp_path: Path
) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for script in scripts:
        result = _run(installed, script, "--help", cwd=tmp_path)
        assert result.returncode == 0, f"{script} --help: {result.stderr}"
    # Every command `steelframe --help` lists: each imports its own module only when chosen.
    for command in COMMANDS:
        result = _run(installed, "steelframe", command, "--help", cwd=tmp_path)
        assert result.returncode == 0, f"steelframe {command} --help: {result.stderr}"
        assert "usage: steelframe" in result.stdout


def test_every_package_imports_from_the_install_not_the_checkout(
    installed: Installed, tmp_path: Path
) -> None:
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    names = [pattern.rstrip("*") for pattern in packages]
    code = (
        "import importlib, pkgutil, sys\n"
        f"for name in {names!r}:\n"
        "    package = importlib.import_module(name)\n"
        "    print(name, package.__file__)\n"
        "    for module in pkgutil.walk_packages(package.__path__, name + '.'):\n"
        # the migrations run under Alembic only (serve runs them in the test below)
        "        if '.migrations.' not in module.name:\n"
        "            importlib.import_module(module.name)\n"
    )
    result = _run(installed, "python", "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        assert line.split()[1].startswith(str(installed.venv)), line


def test_serve_from_the_image_install_answers_with_the_web_gui(
    installed: Installed, tmp_path: Path
) -> None:
    env = child_env({"STEELFRAME_DATA_DIR": str(tmp_path / "data")})
    log = tmp_path / "serve.log"
    with log.open("ab") as sink:  # port 0: serve binds a free one and prints its `url:` line
        process = subprocess.Popen(
            [str(installed.bin / "steelframe"), "serve", "--port", "0"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=sink,
        )  # fmt: skip
    try:
        url = _announced_url(process, log)
        page = _get_when_up(f"{url}/", process, log)
        assert "<html" in page.lower()
        asset = re.search(r'src="(/gui/static/[^"]+\.js)"', page)
        assert asset, "the page names its script"
        assert "import" in _get_when_up(f"{url}{asset[1]}", process, None)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _announced_url(process: subprocess.Popen[bytes], log: Path) -> str:
    """Where serve listens, from its `url: http://host:port` line or JSON record (printed
    once it does); what it prints, that line included, goes on into `log`."""
    assert process.stdout is not None
    stdout, found, said = process.stdout, threading.Event(), []

    def read() -> None:
        with log.open("ab") as sink:
            for line in stdout:
                sink.write(line)
                sink.flush()
                url = announced_url(line)  # a `url:` line, or a JSON record's `url`
                if url is not None and not found.is_set():
                    said.append(url)
                    found.set()
        found.set()  # serve exited without saying where

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(90) or not said:
        raise AssertionError(
            f"serve never said where it listens:\n{log.read_text(errors='replace')}"
        )
    return said[0]


def _get_when_up(url: str, process: subprocess.Popen[bytes], log: Path | None) -> str:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            text = log.read_text(errors="replace") if log else ""
            raise AssertionError(f"serve exited with {process.returncode}:\n{text}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_the_image_is_small_unprivileged_and_checks_readiness() -> None:
    found = instructions()
    final = max(item.stage for item in found)
    runtime = [item for item in found if item.stage == final]
    users = [item.arguments for item in runtime if item.keyword == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image runs as a user of its own"
    env = dict(
        word.split("=", 1)
        for item in runtime
        if item.keyword == "ENV"
        for word in shlex.split(item.arguments)
    )
    # The dense round's BLAS product on cores shared with other work (docs/memory.md).
    assert env.get("OPENBLAS_NUM_THREADS") == "1"
    health = [item.arguments for item in runtime if item.keyword == "HEALTHCHECK"]
    assert health and "/readyz" in health[0]
    installs = " ".join(item.arguments for item in found if item.keyword == "RUN")
    # Runtime dependencies only: no extras, no editable install, no pip cache.
    assert "[dev]" not in installs and " -e " not in installs
    assert all("--no-cache-dir" in part for part in installs.split("pip ")[1:])
    # Every package the wheel ships is copied into the build context.
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    sources = {source.strip("./").split("/")[0] for source in copied_sources()}
    assert {pattern.rstrip("*") for pattern in packages} <= sources
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "var", ".env", "*.pem"} <= {line.strip("/") for line in ignored}


def _healthcheck_command(url: str) -> list[str]:
    """The Dockerfile's HEALTHCHECK CMD, asking `url` where it asks the image's port."""
    [health] = [item.arguments for item in instructions() if item.keyword == "HEALTHCHECK"]
    words = shlex.split(health[health.index(" CMD ") + len(" CMD ") :])
    assert any("http://127.0.0.1:8080/readyz" in word for word in words), words
    return [word.replace("http://127.0.0.1:8080", url) for word in words]


@contextmanager
def _serve(installed: Installed, tmp_path: Path, settings: dict[str, str]) -> Iterator[str]:
    tmp_path.mkdir()
    env = child_env({"STEELFRAME_DATA_DIR": str(tmp_path / "data"), **settings})
    log = tmp_path / "serve.log"
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [str(installed.bin / "steelframe"), "serve", "--port", "0"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=sink,
        )  # fmt: skip
    try:
        url = _announced_url(process, log)
        _get_when_up(f"{url}/healthz", process, log)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_image_healthcheck_fails_while_serve_is_not_ready(
    installed: Installed, tmp_path: Path
) -> None:
    """The HEALTHCHECK as Docker runs it, with the image's python: healthy when /readyz is
    200, unhealthy while it is 503 (an App id with no key: docs/operations.md) and once
    nothing listens. A probe that only reached the port would pass all three."""
    python = str(installed.bin / "python")

    def probe(url: str) -> int:
        words = _healthcheck_command(url)
        command = [python, *words[1:]] if words[0] == "python" else words
        return subprocess.run(command, capture_output=True, timeout=30, check=False).returncode

    with _serve(installed, tmp_path / "ready", {}) as url:
        assert probe(url) == 0
    assert probe(url) != 0  # stopped: nothing listens
    with _serve(installed, tmp_path / "not-ready", {"APP_ID": "12345"}) as url:
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"{url}/readyz", timeout=5)
        assert answer.value.code == 503
        assert probe(url) != 0
