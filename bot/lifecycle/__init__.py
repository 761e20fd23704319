"""The per-issue task lifecycle: tasks and their states, RQ jobs, the coding runtime, delivery.

The map (docs/architecture.md): `pickup`, `resume`, `terminate` and `board` (the views) are
the nouns the web service drives, each built whole by the composition root
(`steelframe.parts.TaskLifecycle`) and handed to the shells that need it; `run` and `steps` are a
worker's run; `reconcile` and `recovery` repair. Every state change goes through
`transition.transition` (state, event, notice, labels, sticky comment); `announce` mirrors
committed changes onto the operator events stream.

The database convention: a unit of work is a sync function taking a `Session` (one
transaction, `Database.call`). Code running on an event loop never calls `db.call` nor a sync
helper that does: it awaits `db.run(unit, ...)` (or `asyncio.to_thread(helper, ...)`), which
runs the unit off the loop on a worker thread. Sync code (threads, RQ's job plumbing, the
commit hooks) calls `db.call` directly.
"""
