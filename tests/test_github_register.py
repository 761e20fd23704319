"""`steelframe github register`: the manifest flow end to end against the sandbox (page,
form post, redirect with a code, code exchange, credentials written 0600), after which
`github check` passes with what was written."""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.config import Settings
from steelframe.cli import build_parser, main, read_dotenv
from steelframe.registration import (
    Registration,
    read_manifest,
    run_registration,
    with_github_url,
)
from steelframe.secrets_in_git import committable
from tests.conftest import GitHubSandbox
from webhooks.signature import signature_for

ROOT = Path(__file__).resolve().parent.parent
CREDENTIAL_VARIABLES = ("APP_ID", "PRIVATE_KEY", "PRIVATE_KEY_PATH", "WEBHOOK_SECRET")


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's configuration folder, where keys go by default: never the real one."""
    home = tmp_path / "config-home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


async def _start(
    sandbox: GitHubSandbox, tmp_path: Path, *extra: str, environ: dict[str, str] | None = None
) -> tuple[asyncio.Task[Any], str, Registration]:
    manifest, env_file = str(ROOT / "app.yml"), str(tmp_path / ".env")
    argv = ["github", "register", "--manifest", manifest, "--env-file", env_file, "--port", "0"]
    args = build_parser(argv).parse_args([*argv, *extra])
    environ = {"GITHUB_API_URL": sandbox.url} if environ is None else environ
    settings = with_github_url(Settings.from_env(environ), args.github_url)
    registration = Registration(settings, read_manifest(Path(args.manifest)), args)
    said: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(run_registration(registration, say=said.put_nowait))
    line = await asyncio.wait_for(said.get(), 30)
    [page_url] = re.findall(r"http://\S+/", line)
    return task, page_url.rstrip("/"), registration


async def _submit_form(session: aiohttp.ClientSession, page_url: str) -> str:
    """What the browser does: load the page, post its form to GitHub; GitHub's redirect."""
    async with session.get(page_url) as response:
        assert response.status == 200
        page = await response.text()
    action = html.unescape(re.search(r'<form action="([^"]+)"', page).group(1))  # type: ignore[union-attr]
    manifest = html.unescape(re.search(r'name="manifest" value="([^"]+)"', page).group(1))  # type: ignore[union-attr]
    async with session.post(action, data={"manifest": manifest}, allow_redirects=False) as answer:
        assert answer.status == 302
        return answer.headers["Location"]


@pytest.fixture
async def hook_receiver(aiohttp_server: Any) -> tuple[str, list[tuple[dict[str, str], bytes]]]:
    """A loopback endpoint standing in for the service's webhook URL; keeps what it got."""
    received: list[tuple[dict[str, str], bytes]] = []

    async def receive(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.read()))
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/api/github/webhooks", receive)
    server = await aiohttp_server(app)
    return str(server.make_url("/api/github/webhooks")), received


async def test_register_writes_credentials_that_github_check_accepts(
    github_sandbox: GitHubSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    hook_receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    hook_url, received = hook_receiver
    task, page_url, registration = await _start(
        github_sandbox, tmp_path, "--webhook-url", hook_url, "--name", "Steelframe Test"
    )
    async with aiohttp.ClientSession() as session:
        location = await _submit_form(session, page_url)
        assert location.startswith(f"{page_url}/callback?code=")
        async with session.get(location) as response:
            assert response.status == 200
            assert "installations/new" in await response.text()
    credentials, (env_file, key_path) = await asyncio.wait_for(task, 30)

    # GitHub creates a new App: the sandbox's first App (a running dev's) is left alone.
    world = github_sandbox.sandbox.world
    app = world.other_apps[credentials.id]
    assert credentials.id != world.app.id and credentials.slug == "steelframe-test"
    assert (credentials.name, app.slug) == ("Steelframe Test", credentials.slug)
    assert app.events == (
        *("issues", "issue_comment", "pull_request"),
        *("pull_request_review", "pull_request_review_comment", "push"),
        *("check_run", "check_suite", "status", "workflow_run", "workflow_job"),
    )  # from app.yml
    written = read_dotenv(env_file)
    assert written["APP_ID"] == str(app.id)
    assert Path(written["PRIVATE_KEY_PATH"]) == key_path
    assert key_path.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    for path in (env_file, key_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The App's webhooks go to the manifest's URL, signed with the written secret.
    await github_sandbox.settle()
    [(headers, body)] = received
    assert headers["X-GitHub-Event"] == "ping"
    assert headers["X-Hub-Signature-256"] == signature_for(written["WEBHOOK_SECRET"], body)
    assert headers["X-GitHub-Hook-Installation-Target-ID"] == str(app.id)
    assert registration.state not in env_file.read_text()

    # Install the new App from the link the page printed, then `github check` with the file.
    github_sandbox.sandbox.add_repo("octo-org/widgets")
    async with aiohttp.ClientSession() as session:
        await install_from_page(
            session, f"{credentials.html_url}/installations/new", "octo-org/widgets"
        )
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_API_URL", github_sandbox.url)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["github", "check", "--repo", "octo-org/widgets"]) == 0
    out = capsys.readouterr().out
    assert f"(id {app.id})" in out and "installation token: ok" in out


async def install_from_page(session: aiohttp.ClientSession, url: str, *repos: str) -> str:
    """What a person does with the printed install link: tick the repositories, Install."""
    async with session.get(url) as response:
        assert response.status == 200
        page = await response.text()
    action = html.unescape(re.search(r'<form[^>]* action="([^"]+)"', page).group(1))  # type: ignore[union-attr]
    token = html.unescape(re.search(r'name="token" value="([^"]+)"', page).group(1))  # type: ignore[union-attr]
    base = url.split("/apps/")[0]
    form = [("token", token), *(("repos", repo) for repo in repos)]
    async with session.post(base + action, data=form) as answer:
        assert answer.status == 200, await answer.text()
        text = await answer.text()
    assert "Installed on" in text
    return text


async def test_an_existing_env_file_keeps_its_other_lines_and_loses_a_pasted_key(
    github_sandbox: GitHubSandbox,
    tmp_path: Path,
    hook_receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    (tmp_path / ".env").write_text("LOG_LEVEL=DEBUG\nPRIVATE_KEY='old'\nAPP_ID=1\n")
    task, page_url, _ = await _start(github_sandbox, tmp_path, "--webhook-url", hook_receiver[0])
    async with aiohttp.ClientSession() as session:
        location = await _submit_form(session, page_url)
        forged = location.split("state=")[0] + "state=forged"
        async with session.get(forged) as response:
            assert response.status == 400  # not a registration this page started
        async with session.get(location) as response:
            assert response.status == 200
        # The code is single-use: exchanging it again is refused.
        code = location.split("code=")[1].split("&")[0]
        async with session.post(f"{github_sandbox.url}/app-manifests/{code}/conversions") as again:
            assert again.status == 404
    _, (env_file, _) = await asyncio.wait_for(task, 30)
    written = read_dotenv(env_file)
    assert written["LOG_LEVEL"] == "DEBUG" and "PRIVATE_KEY" not in written
    assert int(written["APP_ID"]) in github_sandbox.sandbox.world.other_apps


async def test_a_bad_manifest_is_refused_by_github_with_a_reason(
    github_sandbox: GitHubSandbox,
) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{github_sandbox.url}/settings/apps/new",
            data={"manifest": '{"name": "x"}'},
            allow_redirects=False,
        ) as response:
            assert response.status == 422
            assert "url" in (await response.json())["message"]
        async with session.post(
            f"{github_sandbox.url}/app-manifests/never-issued/conversions"
        ) as response:
            assert response.status == 404


def test_the_manifest_points_webhooks_at_the_public_url_when_one_is_set() -> None:
    argv = ["github", "register", "--manifest", str(ROOT / "app.yml")]
    args = build_parser(argv).parse_args(argv)
    manifest = read_manifest(Path(args.manifest))
    public = Settings.from_env({"STEELFRAME_PUBLIC_URL": "https://bot.example.com"})
    assert Registration(public, manifest, args).webhook_url() == (
        "https://bot.example.com/api/github/webhooks"
    )
    local = Settings.from_env({"PORT": "9000"})
    assert Registration(local, manifest, args).webhook_url() == (
        "http://localhost:9000/api/github/webhooks"
    )
    # `--help` names the same order of sources the code follows.
    [option] = [
        action
        for sub in _parsers(build_parser(argv))
        for action in sub._actions
        if "--webhook-url" in action.option_strings
    ]
    said = " ".join((option.help or "").split())
    assert (
        said.index("WEBHOOK_PROXY_URL")
        < said.index("STEELFRAME_PUBLIC_URL")
        < said.index("localhost")
    ), said


def _parsers(parser: Any) -> list[Any]:
    """`parser` and every subcommand's parser under it."""
    found = [parser]
    for action in parser._actions:
        for child in (getattr(action, "choices", None) or {}).values():
            if hasattr(child, "_actions"):
                found.extend(_parsers(child))
    return found


async def test_the_key_lands_outside_the_checkout_and_git_ignores_the_env_file(
    github_sandbox: GitHubSandbox,
    tmp_path: Path,
    config_home: Path,
    hook_receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    await asyncio.to_thread(_git, checkout, "init", "-q")
    shutil.copy(ROOT / ".gitignore", checkout / ".gitignore")
    task, page_url, _ = await _start(github_sandbox, checkout, "--webhook-url", hook_receiver[0])
    async with aiohttp.ClientSession() as session:
        async with session.get(await _submit_form(session, page_url)) as response:
            assert response.status == 200
            assert "readable by you only" in await response.text()
    credentials, (env_file, key_path) = await asyncio.wait_for(task, 30)
    assert key_path == config_home / "steelframe" / f"{credentials.slug}.private-key.pem"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_path.parent.stat().st_mode) == 0o700
    assert env_file.parent == checkout and read_dotenv(env_file)["PRIVATE_KEY_PATH"] == str(
        key_path
    )
    # `git add -A` in the checkout picks up neither secret.
    await asyncio.to_thread(_git, checkout, "add", "-A")
    staged = await asyncio.to_thread(_git, checkout, "diff", "--cached", "--name-only")
    assert staged.split() == [".gitignore"]
    assert not committable(env_file) and not committable(key_path)


def test_the_repository_ignores_env_files_keys_and_the_data_folder() -> None:
    names = [".env", "x.private-key.pem", "var/", ".env.production"]
    result = subprocess.run(
        ["git", "check-ignore", *names], cwd=ROOT, capture_output=True, text=True
    )
    assert result.stdout.split() == names
    # A template without secrets stays committable.
    assert subprocess.run(["git", "check-ignore", "-q", ".env.example"], cwd=ROOT).returncode == 1


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout


async def test_github_url_points_register_at_a_sandbox_and_lands_in_the_env_file(
    github_sandbox: GitHubSandbox,
    tmp_path: Path,
    hook_receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    task, page_url, _ = await _start(
        github_sandbox,
        tmp_path,
        *("--github-url", github_sandbox.url, "--webhook-url", hook_receiver[0]),
        environ={},
    )
    async with aiohttp.ClientSession() as session:
        async with session.get(await _submit_form(session, page_url)) as response:
            assert response.status == 200
    _, (env_file, _) = await asyncio.wait_for(task, 30)
    written = read_dotenv(env_file)
    assert written["GITHUB_API_URL"] == github_sandbox.url
    assert Settings.from_env({}, dotenv=written).github_api_url == github_sandbox.url


async def test_ghe_host_at_a_server_without_api_v3_says_so(
    github_sandbox: GitHubSandbox,
    tmp_path: Path,
    hook_receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    host = github_sandbox.url.removeprefix("http://")
    task, page_url, _ = await _start(
        github_sandbox,
        tmp_path,
        "--webhook-url",
        hook_receiver[0],
        environ={"GHE_HOST": host, "GHE_PROTOCOL": "http"},
    )
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(await _submit_form(session, page_url)) as response:
                assert response.status == 502
                text = await response.text()
    finally:
        task.cancel()
    # The request to a path GitHub does not have is the point here, not a contract breach.
    github_sandbox.sandbox.traffic[:] = [
        ex for ex in github_sandbox.sandbox.traffic if not ex.path.startswith("/api/v3/")
    ]
    assert "GHE_HOST" in text and "GITHUB_API_URL (or --github-url)" in text
    assert not (tmp_path / ".env").exists()  # nothing written


async def test_ghe_host_alone_in_front_of_the_plain_http_sandbox_says_what_to_use(
    github_sandbox: GitHubSandbox, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GHE_HOST alone means https://HOST/api/v3: against the sandbox (plain http) the
    command says so before anyone opens a page, instead of failing at the code exchange."""
    host = github_sandbox.url.removeprefix("http://")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_API_URL", raising=False)
    monkeypatch.setenv("GHE_HOST", host)
    argv = ["github", "register", "--manifest", str(ROOT / "app.yml"), "--port", "0"]
    assert await asyncio.to_thread(main, argv) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the GitHub API at https://{host}/api/v3" in err
    assert "--github-url http://HOST:PORT" in err and "single-use" not in err
    assert not (tmp_path / ".env").exists()
