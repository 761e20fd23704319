"""The pull request page's forms, so the after-PR loop can be walked from a browser in
`steelframe dev`: leave a review (a comment on a file line, with or without requesting
changes), mark a check failed (a failed Actions run with an annotation and a log), merge.

These are web pages, not the REST API (the recorder and contract leave them out). Pages carry
no credentials, so a form acts as the login typed into it (the repository owner by default),
and every post must prove it came from the page: a form token (an HMAC of the sandbox's
secret, the pull request and the action) and, when the browser says where it came from,
the same origin. A refused post changes nothing.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.ci_control_routes import fail_checks
from github_sandbox.operations import SandboxError, not_found
from github_sandbox.pages import PAGE
from github_sandbox.pull_view import form_token
from github_sandbox.review_ops import Reviews
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Repo, User

routes = web.RouteTableDef()
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
MAX_FIELD_CHARS = 65536
PULL_PAGE = "/{owner}/{repo}/pull/{number:\\d+}"


@dataclass(frozen=True)
class FormPost:
    sandbox: Sandbox
    repo: Repo
    number: int
    actor: User
    fields: dict[str, str]


def refuse(message: str) -> web.Response:
    return web.Response(status=403, text=message + "\n", content_type="text/plain")


def same_origin(request: web.Request) -> bool:
    """What the browser says about where the post came from must be this host (a missing
    header is allowed: the form token is the proof)."""
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


async def _post(request: web.Request, action: str) -> FormPost | web.Response:
    sandbox: Sandbox = request.app[SANDBOX]
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    number = int(request.match_info["number"])
    if repo is None or repo.private or number not in repo.pulls:
        raise not_found()
    form = await request.post()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    good = form_token(sandbox, repo.full_name, number, action)
    if not same_origin(request) or not hmac.compare_digest(good, fields.get("token", "")):
        return refuse("This form did not come from the sandbox's page; nothing was done.")
    if any(len(v) > MAX_FIELD_CHARS for v in fields.values()):
        raise SandboxError(400, f"a field is over {MAX_FIELD_CHARS} characters")
    login = fields.get("login", "").strip() or repo.owner.login
    if not _LOGIN.fullmatch(login):
        raise SandboxError(400, "login must be a GitHub user name (letters, digits, '-')")
    actor = sandbox.world.user(login)
    if actor.type == "Bot":
        raise SandboxError(400, "the page acts as a person, not a bot")
    return FormPost(sandbox, repo, number, actor, fields)


def _back(post: FormPost, anchor: str = "") -> web.Response:
    # Answered, not raised: the persisting middleware saves the world after an answer.
    location = f"/{post.repo.full_name}/pull/{post.number}{anchor}"
    return web.Response(status=303, headers={"Location": location})


def _line(raw: str, name: str) -> int:
    try:
        value = int(raw)
    except ValueError as exc:
        raise SandboxError(400, f"{name} must be a line number") from exc
    if value < 1:
        raise SandboxError(400, f"{name} must be a line number")
    return value


@routes.post(PULL_PAGE + "/reviews", name=f"{PAGE}:review-form")
async def review_form(request: web.Request) -> web.Response:
    """A review with one comment on `path` at `line`; `event`: COMMENT (default),
    REQUEST_CHANGES or APPROVE (only the body then)."""
    post = await _post(request, "review")
    if isinstance(post, web.Response):
        return post
    fields = post.fields
    event = fields.get("event", "COMMENT")
    body = fields.get("body", "").strip()
    # With a file, the text is the line's comment (the review's own body stays empty, as
    # when a reviewer only comments on lines); without one, it is the review's body.
    data: dict[str, Any] = {"event": event, "body": body}
    if fields.get("path"):
        line = _line(fields.get("line", ""), "line")
        data = {
            "event": event,
            "body": "",
            "comments": [{"path": fields["path"], "line": line, "body": body}],
        }
    outcome = Reviews(post.sandbox.ops).create_review(post.repo, post.actor, post.number, data)
    post.sandbox.emit(outcome.hooks)
    return _back(post, f"#pullrequestreview-{outcome.body['id']}")


@routes.post(PULL_PAGE + "/checks", name=f"{PAGE}:fail-check-form")
async def fail_check_form(request: web.Request) -> web.Response:
    """The pull request's head commit gets a failed Actions run named `name`, with an
    annotation on `path`:`line` when given and `log` as its job's log."""
    post = await _post(request, "fail-check")
    if isinstance(post, web.Response):
        return post
    fields = post.fields
    message = fields.get("message", "").strip() or "The check failed."
    data: dict[str, Any] = {"name": fields.get("name", "").strip() or "tests", "summary": message}
    if fields.get("log", "").strip():
        data["log"] = fields["log"].replace("\r\n", "\n")
    if fields.get("path"):
        line = _line(fields.get("line", ""), "line")
        data["annotations"] = [{"path": fields["path"], "line": line, "message": message}]
    pull = post.repo.pulls[post.number]
    head = Reviews(post.sandbox.ops).head_sha(post.repo, pull)
    fail_checks(post.sandbox, post.repo, head, data)
    return _back(post, "#checks")


@routes.post(PULL_PAGE + "/merge", name=f"{PAGE}:merge-form")
async def merge_form(request: web.Request) -> web.Response:
    post = await _post(request, "merge")
    if isinstance(post, web.Response):
        return post
    outcome = Reviews(post.sandbox.ops).merge(post.repo, post.actor, post.number, {})
    post.sandbox.emit(outcome.hooks)
    return _back(post)
