"""/api/operator/board and /api/operator/tasks/*: thin handlers over the task lifecycle."""

from __future__ import annotations

import re

import msgspec
from aiohttp import web

from bot.contracts.errors import ErrorDetail
from bot.contracts.tasks import Board, TaskDetail, TaskLog
from bot.errors import BadRequest, Unavailable
from bot.lifecycle import archiving
from bot.lifecycle import board as views
from bot.lifecycle.sandbox import status as sandbox_status
from bot.lifecycle.states import TaskState
from bot.lifecycle.terminate import Terminations
from http_edge.credentials import OPERATOR_NAME
from http_edge.validation import query_int, read_json, reject_unknown
from operator_api.deps import OPERATOR_API
from operator_api.openapi import Endpoints, errors, json_body, path_param, query
from operator_api.schemas import ref

endpoints = Endpoints()
routes = endpoints.routes
TASK = path_param("id", {"type": "integer", "minimum": 1})
ACTION_ERRORS = errors(400, 401, 404, 409, 413, 503)
ACTION_BODY_LIMIT = 1024
TASK_ID = re.compile(r"[1-9][0-9]{0,11}")


def _json(body: Board | TaskDetail | TaskLog, *, status: int = 200) -> web.Response:
    """The task JSON, encoded from its Struct (bot.contracts.tasks)."""
    return web.Response(
        body=msgspec.json.encode(body),
        status=status,
        content_type="application/json",
        charset="utf-8",  # as web.json_response sent it
    )


def _terminations(request: web.Request) -> Terminations:
    """Terminate and archive need the task lifecycle, which needs Redis (docs/api.md)."""
    terminations = request.app[OPERATOR_API].terminations
    if terminations is None:
        raise Unavailable("the task lifecycle needs Redis: set STEELFRAME_REDIS_URL")
    return terminations


def _task_id(request: web.Request) -> int:
    raw = request.match_info["id"]
    # ASCII digits only: str.isdigit() accepts "²" and int() refuses it (or 5000 digits).
    if not TASK_ID.fullmatch(raw):
        raise BadRequest("task id must be a positive integer", detail=ErrorDetail(field="id"))
    return int(raw)


def _state(request: web.Request) -> TaskState | None:
    raw = request.query.get("state")
    if raw is None or raw == "":
        return None
    try:
        return TaskState(raw)
    except ValueError:
        allowed = [s.value for s in TaskState]
        raise BadRequest(
            f"state must be one of {', '.join(allowed)}",
            detail=ErrorDetail(field="state", allowed=allowed),
        ) from None


def _flag(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false").lower()
    if raw not in ("true", "false"):
        raise BadRequest(f"{name} must be true or false", detail=ErrorDetail(field=name))
    return raw == "true"


async def _no_body(request: web.Request) -> None:
    reject_unknown(await read_json(request, limit=ACTION_BODY_LIMIT, required=False), set())


@endpoints.get(
    "/api/operator/board",
    "Tasks newest first (archived ones only with archived=true)",
    {"200": json_body(ref("Board")), **errors(400, 401, 503)},
    params=[
        query("state", {"enum": [s.value for s in TaskState]}, "only tasks in this state"),
        query("archived", {"type": "boolean"}, "include archived tasks"),
        query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "at most N"),
    ],
)
async def board(request: web.Request) -> web.Response:
    state = _state(request)
    archived = _flag(request, "archived")
    limit = query_int(request, "limit", default=200, maximum=1000)
    api = request.app[OPERATOR_API]
    found = await api.db.run(views.board, state=state, archived=archived, limit=limit)
    return _json(Board(tasks=found, coding_sandbox=sandbox_status(api.settings)))


@endpoints.get(
    "/api/operator/tasks/{id}",
    "A task with its event log",
    {"200": json_body(ref("TaskDetail")), **errors(400, 401, 404, 503)},
    params=[TASK],
)
async def task_detail(request: web.Request) -> web.Response:
    task_id = _task_id(request)
    return _json(await request.app[OPERATOR_API].db.run(views.task_detail, task_id))


@endpoints.get(
    "/api/operator/tasks/{id}/log",
    "The private, redacted runtime log of the task's runs (newest last; operators only)",
    {"200": json_body(ref("TaskLog")), **errors(400, 401, 404)},
    params=[TASK, query("runs", {"type": "integer", "minimum": 1, "maximum": 20}, "last N")],
)
async def task_log(request: web.Request) -> web.Response:
    task_id = _task_id(request)
    limit = query_int(request, "runs", default=views.MAX_LOG_RUNS, maximum=views.MAX_LOG_RUNS)
    return _json(await request.app[OPERATOR_API].db.run(views.run_logs, task_id, limit=limit))


@endpoints.post(
    "/api/operator/tasks/{id}/terminate",
    "Stop a queued, running or waiting task (job cancelled, runtime killed); 202: the "
    "request is recorded and applied later (a frozen worker holds the task, or the database "
    "failed once it was recorded)",
    {
        "200": json_body(ref("TaskDetail")),
        "202": json_body(
            ref("TaskDetail"),
            "Recorded; applied once the worker's job stops or the database answers",
        ),
        **ACTION_ERRORS,
    },
    params=[TASK],
)
async def terminate(request: web.Request) -> web.Response:
    task_id = _task_id(request)
    await _no_body(request)
    actor = f"operator:{request[OPERATOR_NAME]}"
    result = await _terminations(request).terminate(task_id, actor=actor)
    # 202: the request is recorded, not applied yet (a frozen worker holds the task, or the
    # database failed after recording it): whoever next takes the task's row, or the
    # reconciler, applies it (docs/api.md). A request that could not be recorded is a 503.
    return _json(result.detail, status=200 if result.applied else 202)


@endpoints.post(
    "/api/operator/tasks/{id}/archive",
    "Hide a finished task from the board",
    {"200": json_body(ref("TaskDetail")), **ACTION_ERRORS},
    params=[TASK],
)
async def archive(request: web.Request) -> web.Response:
    task_id = _task_id(request)
    await _no_body(request)
    _terminations(request)  # only while the lifecycle runs, as terminate
    api, actor = request.app[OPERATOR_API], f"operator:{request[OPERATOR_NAME]}"
    return _json(await views.archive(api.db, task_id, actor=actor, clock=api.clock))


@endpoints.post(
    "/api/operator/tasks/{id}/unarchive",
    "Show an archived task on the board again (Undo of archive; idempotent)",
    {"200": json_body(ref("TaskDetail")), **errors(400, 401, 404, 413, 503)},
    params=[TASK],
)
async def unarchive(request: web.Request) -> web.Response:
    task_id = _task_id(request)
    await _no_body(request)
    _terminations(request)  # only while the lifecycle runs, as archive
    api, actor = request.app[OPERATOR_API], f"operator:{request[OPERATOR_NAME]}"
    await archiving.unarchive(api.db, task_id, actor=actor, clock=api.clock)
    return _json(await api.db.run(views.task_detail, task_id))
