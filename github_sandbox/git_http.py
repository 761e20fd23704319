"""Git over smart HTTP, as github.com serves it: clone, fetch and push at a repository's
`clone_url` (`{base}/{owner}/{repo}.git`), with the credentials GitHub takes.

The protocol is real git's: `git http-backend` (CGI) answers every request, so a client
speaks to the sandbox exactly as to github.com. In front of it, GitHub's access rules:

- an installation token (or a user's) as HTTP Basic password, any user name (GitHub's own
  advice is `x-access-token`); a public repository can be cloned without one;
- no credentials, or a bad or expired token: 401 with `WWW-Authenticate: Basic`;
- a repository the token cannot reach (not in its installation, not in a token narrowed to
  other repositories, private to a user without access): 404 "Repository not found.";
- a push without `contents: write` (a token narrowed to read, a user without write): 403.

Git's answers are plain text, not the REST API's JSON; these routes are not the REST API
(no rate-limit headers, not recorded for the contract check: `is_git`), but injected
faults reach them (`app.faults`), as an outage of GitHub's reaches git.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import tempfile
from pathlib import Path
from typing import BinaryIO

from aiohttp import web

from github_sandbox import git
from github_sandbox.appkeys import SANDBOX
from github_sandbox.auth import Caller, check_scope, resolve_token
from github_sandbox.ci_ops import Checks
from github_sandbox.operations import SandboxError
from github_sandbox.review_ops import Reviews
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Repo, User

routes = web.RouteTableDef()
GIT = "git"
SERVICES = frozenset({"git-upload-pack", "git-receive-pack"})
MAX_PUSH_BYTES = 100 * 1024 * 1024  # far beyond any test's push; GitHub's limit is 2 GB
REPO = "/{owner}/{repo:[^/]+}.git"


def is_git(request: web.Request) -> bool:
    route = request.match_info.route
    return bool(route.name and route.name.startswith(f"{GIT}:"))


def plain(status: int, text: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", headers=headers)


def _unauthorized() -> web.Response:
    return plain(
        401,
        "Invalid username or token. Password authentication is not supported for Git operations.",
        **{"WWW-Authenticate": 'Basic realm="GitHub"'},
    )


def _not_found() -> web.Response:
    return plain(404, "Repository not found.")


def _password(header: str) -> str | None:
    """The password of `Basic base64(user:password)` (the token), None if absent or not
    Basic."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded.strip():
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, password = decoded.partition(":")
    return password if colon and password else None


class _Refused(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def _authorize(request: web.Request, service: str) -> tuple[Repo, User | None]:
    """The repository and who asks (None: anyone, for a public clone), if this request's
    credentials may run `service` on it."""
    sandbox = request.app[SANDBOX]
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    token = _password(request.headers.get("Authorization", ""))
    push = service == "git-receive-pack"
    if token is None:
        if repo is not None and not repo.private and not push and repo.git_path is not None:
            return repo, None  # anyone may clone a public repository
        raise _Refused(_unauthorized())
    try:
        caller = resolve_token(sandbox.world, f"token {token}")
    except SandboxError as exc:
        raise _Refused(_unauthorized() if exc.status == 401 else plain(403, exc.message)) from None
    if repo is None or repo.git_path is None or not _visible(sandbox, caller, repo):
        raise _Refused(_not_found())
    if not _permitted(sandbox, caller, repo, push=push):
        denied = f"Permission to {repo.full_name}.git denied to {caller.user.login}."
        raise _Refused(plain(403, denied))
    return repo, caller.user


def _visible(sandbox: Sandbox, caller: Caller, repo: Repo) -> bool:
    """GitHub hides (404) what a credential cannot see at all."""
    if caller.kind == "installation":
        assert caller.installation is not None and caller.token is not None
        name = repo.full_name.lower()
        narrowed = caller.token.repos
        return name in caller.installation.repos and (narrowed is None or name in narrowed)
    return not repo.private or sandbox.ops.permission(repo, caller.user) != "none"


def _permitted(sandbox: Sandbox, caller: Caller, repo: Repo, *, push: bool) -> bool:
    """`contents: read` to fetch, `write` to push (a user: read or write access)."""
    if caller.kind == "installation":
        try:
            check_scope(
                caller, repo.full_name, "POST" if push else "GET", f"/repos/{repo.full_name}/git"
            )
        except SandboxError:
            return False
        return True
    return not push or sandbox.ops.can_push(repo, caller.user)


async def _backend(
    request: web.Request, repo: Repo, path_info: str, body: BinaryIO, size: int
) -> web.Response:
    """Run `git http-backend` on this request's body (spooled to `body`, `size` bytes) and
    answer what it printed."""
    assert repo.git_path is not None
    git_path: Path = repo.git_path
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_PROJECT_ROOT": str(git_path.parent),
        "GIT_HTTP_EXPORT_ALL": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH_INFO": f"/{git_path.name}{path_info}",
        "REQUEST_METHOD": request.method,
        "QUERY_STRING": request.query_string,
        "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(size),
        "REMOTE_USER": "steelframe-sandbox",  # authorised above; enables receive-pack
        "REMOTE_ADDR": request.remote or "127.0.0.1",
        "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
    }
    process = await asyncio.create_subprocess_exec(
        "git",
        "http-backend",
        env=env,
        stdin=body,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    # CGI: header lines, a blank line, the body (git ends its header lines with CRLF).
    separator = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
    head, _, payload = out.partition(separator)
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    if process.returncode != 0 and status == 200:
        return plain(500, f"git http-backend failed: {err.decode(errors='replace').strip()}")
    return web.Response(status=status, body=payload, headers=headers)


async def _serve(request: web.Request, service: str, path_info: str) -> web.Response:
    if service not in SERVICES:
        return plain(403, "Unsupported service: only git-upload-pack and git-receive-pack.")
    try:
        repo, pusher = _authorize(request, service)
    except _Refused as refused:
        return refused.response
    # Spooled to disk, not held: `steelframe dev` serves the sandbox in its own process, so a
    # large push would otherwise grow it by the pack's size, twice.
    with tempfile.TemporaryFile() as body:
        size = 0
        async for chunk in request.content.iter_any():  # to the end: git sends large packs chunked
            size += len(chunk)
            if size > MAX_PUSH_BYTES:
                return plain(413, "The request is too large.")
            body.write(chunk)
        body.seek(0)
        pushing = service == "git-receive-pack" and repo.git_path is not None
        before = git.branch_heads(repo.git_path) if pushing and repo.git_path else {}
        response = await _backend(request, repo, path_info, body, size)
    if pushing and response.status == 200 and pusher is not None and repo.git_path:
        # A push that moves an open pull request's head: GitHub's `synchronize`; and the
        # App's check suite for each pushed head (`check_suite.requested`).
        sandbox: Sandbox = request.app[SANDBOX]
        pushed = git.branch_heads(repo.git_path)
        heads = [sha for name, sha in pushed.items() if before.get(name) != sha]
        hooks = Reviews(sandbox.ops).synchronize(repo, pusher)
        sandbox.emit(hooks + Checks(sandbox.ops).request_suites(repo, heads))
    return response


@routes.get(f"{REPO}/info/refs", name=f"{GIT}:refs")
async def info_refs(request: web.Request) -> web.Response:
    service = request.query.get("service", "")
    if not service:  # the "dumb" protocol: GitHub serves smart HTTP only
        return plain(403, "Please upgrade your git client: only smart HTTP is served.")
    return await _serve(request, service, "/info/refs")


@routes.post(REPO + "/{service:git-(?:upload|receive)-pack}", name=f"{GIT}:rpc")
async def rpc(request: web.Request) -> web.Response:
    service = request.match_info["service"]
    return await _serve(request, service, f"/{service}")
