"""Which jobs a lifecycle worker runs from Redis: JSON payloads naming one of Steelframe's own
job functions and callbacks, and nothing else.

A job hash in Redis is untrusted input: whatever reaches Redis (a coding run on the same
host did) can write one. RQ's default serializer is pickle, which runs code while loading;
and RQ imports a job's function and callbacks by the names the hash carries, so even a JSON
job naming `os.system` would run. `TrustedJob` is the job class of every lifecycle queue and
worker: it decodes with `JSONSerializer` only (whatever serializer a caller passes), and it
resolves a function or callback only when the job is one Steelframe enqueues: a name on
`JOB_FUNCTIONS`, one task id, allowlisted callbacks, no instance, no webhooks. Every path
that runs something passes through `func` and the three callback properties (the work horse,
the in-process worker, registry cleanup), so the check sits there, before any import.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

from redis import Redis
from rq.exceptions import DeserializationError, NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer

log = logging.getLogger(__name__)

JOB_SERIALIZER = JSONSerializer
LIFECYCLE_JOB = "bot.lifecycle.jobs.task_lifecycle"
CONTINUE_JOB = "bot.lifecycle.jobs.task_continue"
ON_FAILURE = "bot.lifecycle.jobs.on_job_failure"
ON_STOPPED = "bot.lifecycle.jobs.on_job_stopped"
# Everything `LifecycleQueue.enqueue` names; nothing else is ever imported from a job hash.
JOB_FUNCTIONS = frozenset({LIFECYCLE_JOB, CONTINUE_JOB})
FAILURE_CALLBACKS = frozenset({ON_FAILURE})
STOPPED_CALLBACKS = frozenset({ON_STOPPED})
SUCCESS_CALLBACKS: frozenset[str] = frozenset()


class RefusedJob(DeserializationError):
    """A job hash this worker will not run; the message says why. A `DeserializationError`,
    so RQ's own logging of a failed job never tries to read the refused payload again."""


class TrustedJob(Job):
    """An RQ job that decodes as JSON and runs only Steelframe's own functions (a subclass
    may name more: the lifecycle benchmark's no-op job)."""

    functions: ClassVar[frozenset[str]] = JOB_FUNCTIONS

    def __init__(
        self, id: str | None = None, connection: Redis | None = None, serializer: Any = None
    ) -> None:
        # Always JSON, whatever a queue, registry or worker built without it passes.
        super().__init__(id, connection=connection, serializer=JOB_SERIALIZER)

    def restore(self, raw_data: Any) -> None:
        """A hash whose fields do not parse (a bad timeout, a date that is not one) is a job
        that does not exist: RQ's dequeue then skips it, where its error would stop the
        worker's loop."""
        try:
            super().restore(raw_data)
        except NoSuchJobError:
            raise
        except Exception as exc:
            log.error("refused job %s: its hash does not parse (%r)", self.id, exc)
            raise NoSuchJobError(f"job {self.id}: its hash does not parse") from exc

    def _deserialize_data(self) -> None:
        try:
            payload = self.serializer.loads(self.data)
        except Exception as exc:
            raise RefusedJob(
                f"job {self.id}: its payload is not JSON (pickled by an older Steelframe, "
                "or not written by Steelframe)"
            ) from exc
        call = _steelframe_call(self.id, payload, self.functions)
        self._func_name, self._instance, self._args, self._kwargs = call

    def refusal(self) -> str | None:
        """Why this job must not run, or None when it is one Steelframe enqueued."""
        try:
            self.func_name  # decodes and checks the payload  # noqa: B018
        except RefusedJob as exc:
            return str(exc)
        callbacks = (
            ("success", self._success_callback_name, SUCCESS_CALLBACKS),
            ("failure", self._failure_callback_name, FAILURE_CALLBACKS),
            ("stopped", self._stopped_callback_name, STOPPED_CALLBACKS),
        )
        for kind, name, allowed in callbacks:
            if name and name not in allowed:
                return f"job {self.id}: its {kind} callback {name!r} is not Steelframe's"
        if getattr(self, "webhooks", None):
            return f"job {self.id}: it asks for webhooks, which Steelframe never sets"
        return None

    @property
    def func(self) -> Callable[..., Any]:
        reason = self.refusal()
        if reason is not None:
            raise RefusedJob(reason)
        resolved: Callable[..., Any] = super().func
        return resolved

    # A refused job runs no callback at all: its arguments are the writer's, not ours.
    @property
    def success_callback(self) -> Any:
        return None if self.refusal() else super().success_callback

    @property
    def failure_callback(self) -> Any:
        return None if self.refusal() else super().failure_callback

    @property
    def stopped_callback(self) -> Any:
        return None if self.refusal() else super().stopped_callback


def _steelframe_call(
    job: str, payload: Any, functions: frozenset[str]
) -> tuple[str, None, list[int], dict[str, Any]]:
    """(function, instance, args, kwargs) of a payload shaped as `LifecycleQueue` writes it:
    an allowlisted function called with one task id."""
    if not isinstance(payload, list) or len(payload) != 4:
        raise RefusedJob(f"job {job}: its payload is not an RQ call")
    func_name, instance, args, kwargs = payload
    if func_name not in functions:
        raise RefusedJob(f"job {job}: its function {func_name!r} is not a Steelframe job")
    if instance is not None or kwargs != {}:
        raise RefusedJob(f"job {job}: {func_name} is called with an instance or keywords")
    if not (isinstance(args, list) and len(args) == 1 and type(args[0]) is int):
        raise RefusedJob(f"job {job}: {func_name} takes one task id, not {args!r}"[:200])
    return func_name, None, args, {}


def trusted_task_id(job: Job) -> int | None:
    """The task id of a lifecycle job (None for a refused job or any other)."""
    if isinstance(job, TrustedJob) and job.refusal() is not None:
        return None
    try:
        args = job.args or ()
    except DeserializationError:
        return None
    return int(args[0]) if args and type(args[0]) is int else None
