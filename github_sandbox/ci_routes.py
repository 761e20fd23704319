"""The REST endpoints for CI on a commit: check runs and their annotations, the combined
status, Actions workflow runs, their jobs and a job's log (GitHub answers the log download
with a 302 to a short-lived signed URL; so does the sandbox, to a plain-text page of its
own). Each handler parses, calls one `Checks` method and answers; rules in `ci_ops`."""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.ci_ops import Checks
from github_sandbox.operations import not_found
from github_sandbox.pages import PAGE
from github_sandbox.rest_common import (
    REPO,
    answer,
    page,
    page_slice,
    path_number,
    read_json,
    repo_and_caller,
    sandbox_of,
)
from github_sandbox.sandbox import Sandbox

# The handlers repeat one shape on purpose (a duplicates row), as in `rest_routes`: parse,
# call one method, answer; so the table reads like GitHub's REST reference.
routes = web.RouteTableDef()
# Not the REST API: the plain-text log behind the redirect (the web host, like the pages).
log_routes = web.RouteTableDef()
LOG_URL_SECONDS = 60  # GitHub's signed log URLs live about a minute
LOG_PATH = "/{owner}/{repo}/actions/jobs/{job_id}/log"


def _checks(request: web.Request) -> Checks:
    return Checks(sandbox_of(request).ops)


@routes.post(REPO + "/check-runs")
async def create_check_run(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    return answer(request, _checks(request).create_check_run(repo, caller.kind, data))


@routes.get(REPO + "/check-runs/{check_run_id}")
async def get_check_run(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    checks = _checks(request)
    run = checks.check_run(repo, path_number(request, "check_run_id"))
    return web.json_response(checks.shaped_run(repo, run))


@routes.patch(REPO + "/check-runs/{check_run_id}")
async def update_check_run(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    run_id = path_number(request, "check_run_id")
    return answer(request, _checks(request).update_check_run(repo, caller.kind, run_id, data))


@routes.get(REPO + "/check-runs/{check_run_id}/annotations")
async def list_annotations(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    run_id = path_number(request, "check_run_id")
    return page(request, _checks(request).list_annotations(repo, run_id))


@routes.get(REPO + "/commits/{ref:.+}/check-runs")
async def list_check_runs_for_ref(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    ref = request.match_info["ref"]
    runs = _checks(request).list_for_ref(repo, ref, dict(request.query))
    chunk, headers = page_slice(request, runs)
    return web.json_response({"total_count": len(runs), "check_runs": chunk}, headers=headers)


@routes.get(REPO + "/commits/{ref:.+}/status")
async def combined_status(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    combined = _checks(request).combined_status(repo, request.match_info["ref"])
    combined["statuses"], _ = page_slice(request, combined["statuses"])
    return web.json_response(combined)


@routes.get(REPO + "/actions/runs/{run_id}")
async def get_workflow_run(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    checks = _checks(request)
    run = checks.workflow_run(repo, path_number(request, "run_id"))
    shaped = checks.shaped_workflow_run(repo, run)
    if request.query.get("exclude_pull_requests") == "true":
        shaped["pull_requests"] = []
    return web.json_response(shaped)


@routes.get(REPO + "/actions/runs/{run_id}/jobs")
async def list_jobs(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    jobs = _checks(request).list_jobs(repo, path_number(request, "run_id"), dict(request.query))
    chunk, headers = page_slice(request, jobs)
    return web.json_response({"total_count": len(jobs), "jobs": chunk}, headers=headers)


@routes.get(REPO + "/actions/jobs/{job_id}/logs")
async def download_job_log(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    sandbox = sandbox_of(request)
    job = _checks(request).job(repo, path_number(request, "job_id"))
    expires = int(sandbox.clock()) + LOG_URL_SECONDS
    signature = _sign(sandbox, repo.full_name, job.id, expires)
    location = (
        f"{sandbox.base_url.rstrip('/')}/{repo.full_name}/actions/jobs/{job.id}/log"
        f"?expires={expires}&signature={signature}"
    )
    # An answer, not a raised HTTPFound: the recorder and the contract check see it.
    return web.Response(status=302, headers={"Location": location})


def _sign(sandbox: Sandbox, repo: str, job_id: int, expires: int) -> str:
    message = f"{repo.lower()}:{job_id}:{expires}".encode()
    return hmac.new(sandbox.url_secret, message, hashlib.sha256).hexdigest()


@log_routes.get(LOG_PATH, name=f"{PAGE}:job-log")
async def job_log_text(request: web.Request) -> web.Response:
    """The log as plain text, for whoever holds an unexpired signed URL (no credential, as
    GitHub's log storage takes none)."""
    sandbox: Sandbox = request.app[SANDBOX]
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    try:
        job_id = int(request.match_info["job_id"])
        expires = int(request.query.get("expires", ""))
    except ValueError as exc:
        raise not_found() from exc
    signature = request.query.get("signature", "")
    if repo is None or job_id not in repo.jobs:
        raise not_found()
    good = _sign(sandbox, repo.full_name, job_id, expires)
    if not hmac.compare_digest(good, signature) or expires < sandbox.clock():
        return web.Response(status=403, text="This signed log URL has expired or is invalid.\n")
    return web.Response(text=repo.jobs[job_id].log, content_type="text/plain", charset="utf-8")
