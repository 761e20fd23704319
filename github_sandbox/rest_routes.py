"""The REST endpoints the sandbox serves, under GitHub's paths and parameter names (the
parameter names match GitHub's OpenAPI description, so contract checks can find each
operation by its route)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from github_sandbox import contents, mergeability, registration
from github_sandbox.appkeys import USAGE
from github_sandbox.apps import installation_on
from github_sandbox.auth import issue_installation_token, rate_key, resolve_token, token_scope
from github_sandbox.operations import SandboxError, not_found
from github_sandbox.ratelimit import SEARCH_LIMIT, budget
from github_sandbox.rest_common import (
    REPO,
    answer,
    app_caller,
    page,
    page_slice,
    path_number,
    read_json,
    repo_and_caller,
    sandbox_of,
)
from github_sandbox.state import iso

routes = web.RouteTableDef()


# -- the App ------------------------------------------------------------------------------


@routes.get("/app")
async def get_app(request: web.Request) -> web.Response:
    caller = app_caller(request)
    assert caller.app is not None
    return web.json_response(sandbox_of(request).shapes.app(caller.app))


@routes.get(REPO + "/installation")
async def get_repo_installation(request: web.Request) -> web.Response:
    caller = app_caller(request)
    assert caller.app is not None
    sandbox = sandbox_of(request)
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    inst = None if repo is None else installation_on(sandbox.world, caller.app, repo)
    if inst is None:
        raise not_found()
    return web.json_response(sandbox.shapes.installation(caller.app, inst))


@routes.post("/app/installations/{installation_id}/access_tokens")
async def create_access_token(request: web.Request) -> web.Response:
    caller = app_caller(request)
    sandbox = sandbox_of(request)
    inst = sandbox.world.installations.get(path_number(request, "installation_id"))
    if inst is None or sandbox.world.app_of(inst) is not caller.app:  # another App's
        raise not_found()
    if inst.suspended_at is not None:
        raise SandboxError(403, "This installation has been suspended")
    repos, permissions = token_scope(sandbox.world, inst, await read_json(request))
    token, issued = issue_installation_token(
        sandbox.world, inst, sandbox.token_ttl, repos=repos, permissions=permissions
    )
    sandbox.token_requests[inst.id] = sandbox.token_requests.get(inst.id, 0) + 1
    body: dict[str, Any] = {
        "token": token,
        "expires_at": iso(issued.expires_at),
        "permissions": dict(permissions or sandbox.world.app_of(inst).permissions),
        "repository_selection": "selected",
    }
    if repos is not None:
        shown = [sandbox.world.repo(name) for name in sorted(repos)]
        body["repositories"] = [sandbox.shapes.repository(r) for r in shown if r is not None]
    return web.json_response(body, status=201)


@routes.post("/app-manifests/{code}/conversions")
async def create_from_manifest(request: web.Request) -> web.Response:
    # No credential: the one-time code is the proof (GitHub's manifest flow).
    return web.json_response(
        registration.convert(sandbox_of(request), request.match_info["code"]), status=201
    )


@routes.get("/installation/repositories")
async def installation_repositories(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    caller = resolve_token(sandbox.world, request.headers.get("Authorization", ""))
    if caller.installation is None:
        raise SandboxError(403, "You must authenticate with an installation access token")
    reach = caller.installation.repos
    if caller.token is not None and caller.token.repos is not None:
        reach = reach & caller.token.repos  # a narrowed token lists only its repositories
    names = sorted(reach)
    repos = [sandbox.world.repos[name] for name in names if name in sandbox.world.repos]
    chunk, headers = page_slice(request, [sandbox.shapes.repository(repo) for repo in repos])
    body = {"total_count": len(repos), "repository_selection": "selected", "repositories": chunk}
    return web.json_response(body, headers=headers)


@routes.get("/rate_limit")
async def rate_limit(request: web.Request) -> web.Response:
    """The caller's budget; asking does not spend it (as on GitHub)."""
    sandbox = sandbox_of(request)
    used = request.app[USAGE].get(
        rate_key(sandbox.world, request.headers.get("Authorization", "")), 0
    )
    core = budget(sandbox.clock(), used)
    search = budget(sandbox.clock(), 0, SEARCH_LIMIT)
    return web.json_response({"resources": {"core": core, "search": search}, "rate": core})


# -- repositories, issues, labels -------------------------------------------------------


@routes.get(REPO)
async def get_repo(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    return web.json_response(sandbox_of(request).shapes.full_repository(repo))


@routes.get(REPO + "/contents/{path:.*}")
async def get_content(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    if repo.git_path is None:
        raise not_found()
    sandbox = sandbox_of(request)
    ref = request.query.get("ref") or repo.default_branch
    found = contents.lookup(repo.git_path, ref, request.match_info["path"])
    if found is None:
        raise not_found()
    if isinstance(found, list):
        return web.json_response(
            [contents.entry_shape(sandbox.shapes, repo, ref, e) for e in found]
        )
    if found.kind == "submodule":  # nothing makes submodules in sandbox repositories
        raise not_found()
    data = contents.blob(repo.git_path, found.sha)
    if found.kind == "symlink":
        shaped = {**contents.entry_shape(sandbox.shapes, repo, ref, found), "target": data.decode()}
        return web.json_response(shaped)
    return web.json_response(contents.file_shape(sandbox.shapes, repo, ref, found, data))


# The handlers below repeat one shape on purpose (a duplicates row): each parses the path and
# body, calls one `Operations` method and shapes its answer, so the route table reads like
# GitHub's REST reference; the logic lives once, in `operations.py`.


@routes.post(REPO + "/issues")
async def create_issue(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    return answer(request, sandbox_of(request).ops.create_issue(repo, caller.user, data))


@routes.get(REPO + "/issues")
async def list_issues(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    return page(request, sandbox_of(request).ops.list_issues(repo, dict(request.query)))


@routes.get(REPO + "/issues/{issue_number}")
async def get_issue(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    return answer(
        request, sandbox_of(request).ops.get_issue(repo, path_number(request, "issue_number"))
    )


@routes.patch(REPO + "/issues/{issue_number}")
async def update_issue(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "issue_number")
    return answer(request, sandbox_of(request).ops.update_issue(repo, caller.user, number, data))


@routes.get(REPO + "/labels")
async def list_repo_labels(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    shapes = sandbox_of(request).shapes
    return page(request, [shapes.label(repo, label) for label in repo.labels.values()])


@routes.post(REPO + "/labels")
async def create_label(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    return answer(request, sandbox_of(request).ops.create_label(repo, caller.user, data))


@routes.get(REPO + "/issues/{issue_number}/labels")
async def list_issue_labels(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    ops = sandbox_of(request).ops
    return page(
        request, ops.issue_labels(repo, ops.issue(repo, path_number(request, "issue_number")))
    )


@routes.post(REPO + "/issues/{issue_number}/labels")
async def add_labels(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "issue_number")
    return answer(request, sandbox_of(request).ops.add_labels(repo, caller.user, number, data))


@routes.delete(REPO + "/issues/{issue_number}/labels/{name}")
async def remove_label(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    number = path_number(request, "issue_number")
    name = request.match_info["name"]
    return answer(request, sandbox_of(request).ops.remove_label(repo, caller.user, number, name))


# -- comments ---------------------------------------------------------------------------


@routes.get(REPO + "/issues/{issue_number}/comments")
async def list_comments(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    number = path_number(request, "issue_number")
    return page(request, sandbox_of(request).ops.list_comments(repo, number, dict(request.query)))


@routes.post(REPO + "/issues/{issue_number}/comments")
async def create_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "issue_number")
    return answer(request, sandbox_of(request).ops.create_comment(repo, caller.user, number, data))


@routes.get(REPO + "/issues/comments/{comment_id}")
async def get_comment(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    sandbox = sandbox_of(request)
    comment = sandbox.ops.comment(repo, path_number(request, "comment_id"))
    return web.json_response(sandbox.shapes.comment(repo, comment))


@routes.patch(REPO + "/issues/comments/{comment_id}")
async def update_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    comment_id = path_number(request, "comment_id")
    ops = sandbox_of(request).ops
    return answer(request, ops.update_comment(repo, caller.user, comment_id, data))


@routes.delete(REPO + "/issues/comments/{comment_id}")
async def delete_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    comment_id = path_number(request, "comment_id")
    outcome = sandbox_of(request).ops.delete_comment(repo, caller.user, comment_id)
    sandbox_of(request).emit(outcome.hooks)
    return web.Response(status=204)


@routes.get(REPO + "/issues/{issue_number}/timeline")
async def list_timeline(request: web.Request) -> web.Response:
    """The issue's timeline as far as the sandbox keeps history: its comments, each a
    `commented` event, oldest first."""
    repo, _ = repo_and_caller(request)
    sandbox = sandbox_of(request)
    issue = sandbox.ops.issue(repo, path_number(request, "issue_number"))
    events = [
        sandbox.shapes.timeline_comment(repo, repo.comments[cid]) for cid in issue.comment_ids
    ]
    return page(request, events)


# -- pull requests, collaborators ------------------------------------------------------


@routes.post(REPO + "/pulls")
async def create_pull(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    return answer(request, sandbox_of(request).ops.create_pull(repo, caller.user, data))


@routes.get(REPO + "/pulls")
async def list_pulls(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    return page(request, sandbox_of(request).ops.list_pulls(repo, dict(request.query)))


@routes.get(REPO + "/pulls/{pull_number}")
async def get_pull(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    sandbox = sandbox_of(request)
    pull = sandbox.ops.pull(repo, path_number(request, "pull_number"))
    shaped = sandbox.shapes.pull(repo, pull)
    if shaped["state"] == "open":
        # What is known is answered; the test merge for the tips now is what the next
        # read sees (GitHub's background job, github_sandbox.mergeability).
        mergeability.refresh(repo, pull)
    return web.json_response(shaped)


@routes.patch(REPO + "/pulls/{pull_number}")
async def update_pull(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "pull_number")
    ops = sandbox_of(request).ops
    if data.get("state") == "closed":
        return answer(request, ops.close_pull(repo, caller.user, number, merge=False))
    if data.get("state") == "open":
        return answer(request, ops.reopen_pull(repo, caller.user, number))
    return web.json_response(sandbox_of(request).shapes.pull(repo, ops.pull(repo, number)))


@routes.get(REPO + "/collaborators/{username}/permission")
async def collaborator_permission(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    username = request.match_info["username"]
    return answer(request, sandbox_of(request).ops.collaborator_permission(repo, username))
