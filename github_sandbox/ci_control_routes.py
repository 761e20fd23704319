"""The sandbox's CI control routes, under /_sandbox/ like the rest of its control API (and
behind the same guard): make a commit's CI fail as GitHub Actions would report it (a
workflow run whose job fails, with its check run, annotations and log) or set a commit
status. Not part of GitHub: GitHub's described operations have no way to write either.

    POST /_sandbox/repos/{owner}/{repo}/commits/{ref}/checks
        {"name": "tests", "workflow": "CI", "summary": "...", "log": "...",
         "annotations": [{"path": "a.py", "line": 3, "message": "...", "title": "..."}],
         "rerun": 123}
      ("rerun": a finished workflow run on that commit runs again, as its next attempt,
      instead of a new run; its earlier attempts' jobs stay, listed under `filter=all`)
    POST /_sandbox/repos/{owner}/{repo}/statuses/{ref}
        {"state": "failure", "context": "ci/lint", "description": "...", "target_url": "..."}
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.ci_ops import ACTIONS_APP, Checks, FailingJob
from github_sandbox.control_routes import PREFIX
from github_sandbox.operations import SandboxError, not_found
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Annotation, Repo

routes = web.RouteTableDef()
MAX_LOG_BYTES = 1024 * 1024
DEFAULT_LOG = "Run the tests\n##[error]Process completed with exit code 1.\n"


def failing_job(data: dict[str, Any]) -> FailingJob:
    """The failing job a request describes; SandboxError(400) says what is wrong."""
    name = data.get("name", "tests")
    summary = data.get("summary", "The job failed.")
    log = data.get("log", DEFAULT_LOG)
    raw = data.get("annotations", [])
    if not isinstance(name, str) or not name.strip():
        raise SandboxError(400, "name must be a non-empty string")
    if not isinstance(summary, str) or not isinstance(log, str):
        raise SandboxError(400, "summary and log must be strings")
    if len(log.encode()) > MAX_LOG_BYTES:
        raise SandboxError(400, f"log is over {MAX_LOG_BYTES} bytes")
    if not isinstance(raw, list):
        raise SandboxError(400, "annotations must be a list")
    return FailingJob(name.strip(), log, [_annotation(item) for item in raw], summary)


def _annotation(item: Any) -> Annotation:
    if not isinstance(item, dict):
        raise SandboxError(400, "each annotation must be an object")
    path, line, message = item.get("path"), item.get("line"), item.get("message")
    title = item.get("title")
    if not isinstance(path, str) or not path or not isinstance(message, str) or not message:
        raise SandboxError(400, "an annotation needs a path and a message")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise SandboxError(400, "an annotation's line must be a positive integer")
    if title is not None and not isinstance(title, str):
        raise SandboxError(400, "an annotation's title must be a string")
    return Annotation(path, line, line, "failure", message, title)


def fail_checks(sandbox: Sandbox, repo: Repo, ref: str, data: dict[str, Any]) -> dict[str, Any]:
    """Record a failed Actions run on `ref` and send its webhooks; what was made."""
    workflow = data.get("workflow", "CI")
    if not isinstance(workflow, str) or not workflow.strip():
        raise SandboxError(400, "workflow must be a non-empty string")
    job = failing_job(data)
    checks = Checks(sandbox.ops)
    rerun = data.get("rerun")
    if rerun is None:
        run, hooks = checks.fail_workflow(repo, ACTIONS_APP.bot, ref, workflow.strip(), [job])
    elif isinstance(rerun, int) and not isinstance(rerun, bool):
        run = checks.workflow_run(repo, rerun)
        if run.head_sha != checks.commit(repo, ref):
            raise SandboxError(400, "rerun names a workflow run of another commit")
        hooks = checks.rerun_workflow(repo, run, [job.name])
        hooks += checks.finish_workflow(repo, run, [job])
    else:
        raise SandboxError(400, "rerun must be a workflow run id")
    sandbox.emit(hooks)
    jobs = checks.current_jobs(repo, run)
    return {
        "workflow_run_id": run.id,
        "run_attempt": run.run_attempt,
        "job_ids": [item.id for item in jobs],
        "check_run_ids": [item.check_run_id for item in jobs],
        "head_sha": run.head_sha,
    }


def _repo(request: web.Request) -> tuple[Sandbox, Repo]:
    sandbox: Sandbox = request.app[SANDBOX]
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None:
        raise not_found()
    return sandbox, repo


async def _body(request: web.Request) -> dict[str, Any]:
    """As `control_routes` reads a body (a duplicates row: that module's helper is private
    and its guard is being reworked; the CI routes stay out of it)."""
    try:
        data = await request.json()
    except ValueError as exc:
        raise SandboxError(400, "Problems parsing JSON") from exc
    if not isinstance(data, dict):
        raise SandboxError(400, "expected a JSON object")
    return data


@routes.post(PREFIX + "/repos/{owner}/{repo}/commits/{ref:.+}/checks")
async def fail_commit_checks(request: web.Request) -> web.Response:
    sandbox, repo = _repo(request)
    made = fail_checks(sandbox, repo, request.match_info["ref"], await _body(request))
    return web.json_response(made, status=201)


@routes.post(PREFIX + "/repos/{owner}/{repo}/statuses/{ref:.+}")
async def set_commit_status(request: web.Request) -> web.Response:
    sandbox, repo = _repo(request)
    data = await _body(request)
    checks = Checks(sandbox.ops)
    sha = checks.commit(repo, request.match_info["ref"])
    by = data.get("by", ACTIONS_APP.bot.login)
    fields = {k: data.get(k) for k in ("state", "context", "description", "target_url")}
    if not all(v is None or isinstance(v, str) for v in fields.values()) or not isinstance(by, str):
        raise SandboxError(400, "state, context, description, target_url and by are strings")
    outcome = checks.add_status(
        repo,
        sandbox.world.user(by, kind="Bot" if by.endswith("[bot]") else "User"),
        sha,
        state=fields["state"] or "",
        context=fields["context"] or "default",
        description=fields["description"],
        target_url=fields["target_url"],
    )
    sandbox.emit(outcome.hooks)
    return web.json_response(outcome.body, status=201)
