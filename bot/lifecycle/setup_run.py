"""The repository's environment for a run, made before the agent starts: its config read
from the base commit, the agent and model it asks for, and its setup, run in the sandbox
or restored from the setup cache (docs/repository-config.md, docs/lifecycle.md "One run").

Setup never runs in the agent's checkout. It runs in a fresh export of the base commit (the
worker's own git, never what an agent wrote on the task's branch), as the sandboxed
nobody, with the run's allowlist plus the config's registries and the setup-only secrets in
its environment. What it added there (files the base commit does not track) is searched for
the secrets' values, kept in the cache, and moved into the agent's checkout, where the
worker's git ignores it (`info/exclude`), so it is never committed. Setup's own home and
temporary folder are thrown away: the agent never sees them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.contracts.tasks import EventData
from bot.lifecycle import egress_blocked, tasks, worktree
from bot.lifecycle.context import LifecycleContext, LifecyclePolicy
from bot.lifecycle.models import EventKind
from bot.lifecycle.progress import Phase, update_progress
from bot.lifecycle.repo_config import (
    CONFIG_PATH,
    DEFAULT,
    MAX_CONFIG_BYTES,
    RepoConfig,
    RepoConfigError,
    RepoEnv,
    SetupState,
    parse,
)
from bot.lifecycle.sandbox import SandboxRun
from bot.lifecycle.scope import Run
from bot.lifecycle.setup_cache import (
    SetupCache,
    TreeEntry,
    cache_key,
    free_place,
    remove_path,
)
from bot.lifecycle.setup_process import CommandResult, ended_by_memory, run_command
from bot.lifecycle.setup_secrets import SetupSecretError, files_holding, load

log = logging.getLogger(__name__)
# The file each preset reads by itself; other instruction files go into its prompt.
NATIVE_INSTRUCTIONS = {"claude": ("CLAUDE.md",), "codex": ("AGENTS.md",), "aider": ()}
MAX_INSTRUCTIONS_BYTES = 20_000


class SetupRefused(Exception):
    """The run cannot start in the repository's environment. `public` is the task's one
    line; `private` goes to the operator's log only; `retry`: worth another attempt."""

    def __init__(self, public: str, *, private: str = "", retry: bool = False) -> None:
        super().__init__(public)
        self.public = public
        self.private = private
        self.retry = retry


@dataclass(frozen=True)
class BaseTree:
    """The base commit as the worker's git sees it: every file and its blob id."""

    ref: str
    entries: tuple[TreeEntry, ...]
    sizes: dict[str, int]

    def sha(self, path: str) -> str | None:
        return next((e.sha for e in self.entries if e.path == path), None)


async def base_tree(tree: worktree.Worktree) -> BaseTree:
    ref = f"origin/{tree.base}"
    listed = await worktree.git(
        tree.git_dir.parent,
        "ls-tree",
        "-r",
        "-l",
        "-z",
        ref,
        git_dir=tree.git_dir,
        base_env=tree.base_env,
    )
    entries, sizes = [], {}
    for record in listed.split("\0"):
        meta, _, path = record.partition("\t")
        fields = meta.split()
        if len(fields) != 4 or fields[1] != "blob":
            continue
        entries.append(TreeEntry(path, fields[2]))
        sizes[path] = int(fields[3]) if fields[3].isdigit() else 0
    return BaseTree(ref, tuple(entries), sizes)


async def _blob(tree: worktree.Worktree, sha: str) -> str:
    return await worktree.git(
        tree.git_dir.parent, "cat-file", "blob", sha, git_dir=tree.git_dir, base_env=tree.base_env
    )


async def read_config(tree: worktree.Worktree, base: BaseTree) -> RepoConfig:
    """The base commit's config (the defaults when it has none); RepoConfigError if wrong."""
    sha = base.sha(CONFIG_PATH)
    if sha is None:
        return DEFAULT
    if base.sizes.get(CONFIG_PATH, 0) > MAX_CONFIG_BYTES:
        raise RepoConfigError(f"{CONFIG_PATH} is larger than {MAX_CONFIG_BYTES // 1024} KiB")
    return parse(await _blob(tree, sha))


def effective_policy(
    settings: Settings, policy: LifecyclePolicy, config: RepoConfig
) -> LifecyclePolicy:
    """The installation's policy with the repository's agent and model, where allowed: a
    model for any agent; another agent only one the operator lists in STEELFRAME_REPO_AGENTS
    (its key variables must be set for it). Raises SetupRefused for any other agent."""
    current = policy.coding_agent
    agent = config.agent.value if config.agent is not None else current
    model = config.model or policy.coding_model
    if agent != current and agent not in settings.repo_agents:
        raise SetupRefused(
            f"{CONFIG_PATH} asks for the agent {agent}, which this installation does not let "
            f"repositories choose (it runs {current or 'no agent'}; STEELFRAME_REPO_AGENTS)"
        )
    if agent != current:
        # Another agent: its own command and sandbox (key variables), as the settings make.
        return LifecyclePolicy.from_settings(
            replace(settings, coding_agent=agent, coding_model=model)
        )
    if model == policy.coding_model:
        return policy
    return replace(policy, coding_model=model, coding_prices=settings.model_prices.get(model or ""))


def with_registries(policy: LifecyclePolicy, config: RepoConfig) -> LifecyclePolicy:
    """The run's egress allowlist plus the registries the config names (setup, the agent
    and the tests all run with it)."""
    if not config.network.allow:
        return policy
    sandbox = policy.sandbox
    allowed = replace(sandbox, allow_hosts=sandbox.allow_hosts + config.network.allow)
    return replace(policy, sandbox=allowed)


def with_budget(policy: LifecyclePolicy, config: RepoConfig) -> LifecyclePolicy:
    """The task budget the config sets, field by field over the installation's, as the run's
    own: the usage hook (`budget.for_run`) and a preset agent's own cost limit
    (`presets_run.agent_env`, Claude Code's `--max-budget-usd`) then stop at the same sum.
    An agent told the installation's budget instead stopped itself below a budget the
    repository raised, and a run whose task had spent that much was told 0 every time."""
    wanted = config.budget
    tokens = wanted.tokens if wanted.tokens is not None else policy.max_tokens
    usd = wanted.usd if wanted.usd is not None else policy.max_cost_usd
    if (tokens, usd) == (policy.max_tokens, policy.max_cost_usd):
        return policy
    return replace(policy, max_tokens=tokens, max_cost_usd=usd)


def for_the_prompt(config: RepoConfig, agent: str | None) -> list[str]:
    """The config's instruction files that `agent` does not read by itself."""
    native = NATIVE_INSTRUCTIONS.get(agent or "", ())
    return [path for path in config.instructions if path not in native]


async def instructions_text(
    tree: worktree.Worktree, base: BaseTree, config: RepoConfig, agent: str | None
) -> str:
    """The instruction files the agent does not read by itself, for its prompt."""
    parts: list[str] = []
    for path in for_the_prompt(config, agent):
        sha = base.sha(path)
        if sha is None:
            continue
        text = (await _blob(tree, sha))[:MAX_INSTRUCTIONS_BYTES]
        parts += [f'<instructions file="{path}">', text, "</instructions>"]
    if not parts:
        return ""
    head = "The repository's instructions for agents (committed in its base branch; follow them):"
    return "\n".join(["", head, *parts]) + "\n"


def products(root: Path, base: BaseTree) -> list[str]:
    """What setup added to its export of the base commit: every path the commit does not
    track, as whole folders where nothing under them is tracked."""
    tracked = {e.path for e in base.entries}
    folders = {str(Path(p).parent) for p in tracked} | {"."}
    folders |= {str(parent) for p in tracked for parent in Path(p).parents}
    found: list[str] = []

    def walk(folder: Path) -> None:
        for child in sorted(folder.iterdir()):
            rel = str(child.relative_to(root))
            if rel == ".git":
                continue
            if child.is_dir() and not child.is_symlink() and rel in folders:
                walk(child)
            elif rel not in tracked:
                found.append(rel)

    walk(root)
    return found


def _pattern(path: str) -> str:
    """`path` as an anchored gitignore pattern matching itself. A line break cannot be
    written in a gitignore line (a name holding one was cut into two patterns, neither its
    own, and setup's product was committed): it is matched by `?`, any one character, so
    the pattern may also match a like name beside it, never miss this one."""
    escaped = "".join("?" if c in "\n\r" else f"\\{c}" if c in "*?[]\\!# " else c for c in path)
    return f"/{escaped}"


def ignore(paths: list[str], *exclude_files: Path) -> None:
    """Keep what setup made out of every commit: the worker's git (and the agent's own)
    ignore these paths."""
    if not paths:
        return
    lines = "".join(f"{_pattern(p)}\n" for p in paths)
    for file in exclude_files:
        file.parent.mkdir(parents=True, exist_ok=True)
        with file.open("a") as out:
            out.write("# what the repository's setup made (Steelframe)\n" + lines)


def move_products(source: Path, checkout: Path, paths: list[str]) -> list[str]:
    """Move setup's products into the agent's checkout (a path it has already stays)."""
    moved = []
    for rel in paths:
        if not free_place(checkout, rel):
            continue
        target = checkout / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source / rel, target)
        moved.append(rel)
    return moved


def setup_failure(result: CommandResult, index: int, total: int) -> str:
    which = f"setup command {index} of {total}"
    if result.memory_limit_mb is not None:
        return f"{which} {ended_by_memory(result.memory_limit_mb)}"
    if result.timed_out:
        return f"{which} did not finish within STEELFRAME_SETUP_TIME_LIMIT (all of setup)"
    if result.exit_code is None:
        return f"{which} could not start"
    return f"{which} failed (exit {result.exit_code})"


async def export_base(tree: worktree.Worktree, target: Path) -> None:
    """A fresh checkout of the base commit at `target`, with no git directory."""
    remove_path(target)
    await worktree.git(
        tree.git_dir.parent,
        "clone",
        "--quiet",
        "--no-tags",
        "--shared",
        "--branch",
        tree.base,
        str(tree.git_dir),
        str(target),
        base_env=tree.base_env,
    )
    await asyncio.to_thread(shutil.rmtree, target / ".git")


def setup_cache(ctx: LifecycleContext) -> SetupCache:
    return SetupCache(ctx.settings.data_dir / "setup-cache", ctx.settings.setup_cache_keep)


def load_secrets(ctx: LifecycleContext, repo: str, config: RepoConfig) -> dict[str, str]:
    try:
        values = load(
            ctx.settings.setup_secrets_dir,
            repo,
            config.setup_secrets,
            worker_secrets=ctx.environment.own_secrets,
        )
    except SetupSecretError as exc:
        raise SetupRefused(exc.public, private=exc.private) from exc
    ctx.redactor.add(*values.values())  # never in a log, comment or push
    return values


def leaked(root: Path, paths: list[str], values: dict[str, str]) -> SetupRefused | None:
    found = files_holding(root, paths, values)
    if not found:
        return None
    return SetupRefused(
        "the repository's setup was refused by the worker (the operator's log says why)",
        private=(
            "[worker] setup left the value of a setup-only secret in what it made "
            f"({', '.join(found)}); nothing was kept and the agent did not run. Setup must not "
            "write its secrets into the workspace (write them to $HOME, which is thrown away)."
        ),
    )


async def prepare(run: Run, tree: worktree.Worktree) -> RepoEnv:
    """The repository's environment for this run, before its agent starts: the config
    (from the base commit), the agent, model and budget it asks for (`run.ctx` then carries
    them), and setup restored from the cache or run. Raises SetupRefused (nothing pushed)."""
    base = await base_tree(tree)
    try:
        config = await read_config(tree, base)
    except RepoConfigError as exc:
        raise SetupRefused(str(exc)) from exc
    policy = effective_policy(run.ctx.settings, run.ctx.policy, config)
    policy = with_budget(with_registries(policy, config), config)
    if policy != run.ctx.policy:
        run.ctx = replace(run.ctx, policy=policy)
        run.ctx.redactor.add(*run.ctx.environment.values(policy.sandbox.env_passthrough))
    env = RepoEnv(config, await instructions_text(tree, base, config, policy.coding_agent))
    if not config.setup:
        return env
    return await _setup(run, tree, base, env)


async def _setup(run: Run, tree: worktree.Worktree, base: BaseTree, env: RepoEnv) -> RepoEnv:
    config, repo = env.config, run.task.repo
    cache = setup_cache(run.ctx)
    key = cache_key(config, base.entries)
    excludes = (tree.git_dir / "info" / "exclude", tree.path / ".git" / "info" / "exclude")
    entry = await asyncio.to_thread(cache.lookup, repo, key)
    if entry is not None:
        try:
            restored = await asyncio.to_thread(cache.restore, entry, tree.path)
        except OSError as exc:  # pruned meanwhile: run setup instead
            log.info("lifecycle: task %s: setup cache entry went away (%s)", run.task.id, exc)
        else:
            ignore(restored.paths, *excludes)
            await say(run, "setup: cached", {"setup": SetupState.CACHED, "key": key})
            return replace(env, setup=SetupState.CACHED)
    secrets = load_secrets(run.ctx, repo, config)
    count = len(config.setup)
    await say(run, f"setup: running {count} command{'s' if count != 1 else ''}", {"key": key})
    started, work = time.monotonic(), run.folder / "setup"
    place = SandboxRun(repo=work / "repo", tmp=work / "tmp", prompt=work / "prompt.md")
    try:
        await export_base(tree, place.repo)
        output = await _run_commands(run, config, place, secrets)
        made = await asyncio.to_thread(products, place.repo, base)
        refused = await asyncio.to_thread(leaked, place.repo, made, secrets)
        if refused is not None:
            raise refused
        await asyncio.to_thread(cache.store, repo, key, place.repo, made)
        moved = await asyncio.to_thread(move_products, place.repo, tree.path, made)
        ignore(moved, *excludes)
    finally:
        await asyncio.to_thread(remove_path, work)
    await say(
        run, f"setup: ran {count} command{'s' if count != 1 else ''}", {"setup": SetupState.RAN}
    )
    took = time.monotonic() - started
    return replace(env, setup=SetupState.RAN, setup_log=output, setup_seconds=took)


async def _run_commands(
    run: Run, config: RepoConfig, place: SandboxRun, secrets: dict[str, str]
) -> str:
    """Each setup command in its own sandboxed process, in order; setup's output (for the
    operator's log), or SetupRefused at the first that fails."""
    sandbox = run.ctx.policy.sandbox
    # Setup gets no model key: only its own secrets and the task's ids.
    policy = replace(sandbox, env_passthrough=(), env_prefixes=())
    env = {"STEELFRAME_REPO": run.task.repo, "STEELFRAME_SETUP": "1", **secrets}
    output: list[str] = []
    deadline = time.monotonic() + run.ctx.settings.setup_time_limit  # for all of setup
    for index, command in enumerate(config.setup, 1):
        result = await run_command(
            policy,
            place,
            command,
            env,
            time_limit=max(deadline - time.monotonic(), 0.0),
            stop=run.watch.stop,
            base_env=run.ctx.environment.variables,
        )
        await record_blocked(run, result)
        run.watch.check()
        output += [f"[setup] $ {command}", result.tail, f"[setup] {ended(result)}"]
        if not result.passed:
            problem = setup_failure(result, index, len(config.setup))
            raise SetupRefused(
                f"the repository's setup failed: {problem}; its output is in the task's "
                "private log",
                private="\n".join(output),
                # The same setup under the same limit stops the same way: only a failure
                # that may not recur (a registry's hiccup, a flaky step) is worth an attempt.
                retry=result.memory_limit_mb is None,
            )
    return "\n".join(output)


def ended(result: CommandResult) -> str:
    """How a setup command ended, for setup's output (the operator's log)."""
    if result.memory_limit_mb is not None:
        how = ended_by_memory(result.memory_limit_mb)
    else:
        how = "timed out" if result.timed_out else f"exit {result.exit_code}"
    return f"{how}, {result.seconds:.1f} s"


async def record_blocked(run: Run, result: CommandResult) -> None:
    """What a repository command's proxy refused, on the task beside the agent's."""
    if result.blocked:
        task = run.task
        await asyncio.to_thread(
            run.ctx.db.call,
            egress_blocked.add,
            task.id,
            task.generation,
            task.attempts,
            result.blocked,
        )


async def say(run: Run, text: str, data: EventData) -> None:
    """A step of the environment: a task event, and the progress comment's note."""
    ctx, task = run.ctx, run.task

    def record(session: Session) -> None:
        tasks.hold(session, task.id, run.fence, ctx.clock)
        current = tasks.get_task(session, task.id)
        tasks.record(
            session,
            current,
            EventKind.NOTE,
            actor=run.actor,
            detail=text,
            data=data,
            clock=ctx.clock,
        )

    await asyncio.to_thread(ctx.db.call, record)
    note = f"Attempt {task.attempts} of {ctx.policy.max_attempts} is running.\n\n{text}"
    try:
        await update_progress(
            ctx.db, run.github, task.id, Phase.RUNNING, note, create=False, clock=ctx.clock
        )
    except Exception as exc:  # a progress edit never fails the run
        log.warning("lifecycle: task %s progress not shown: %s", task.id, type(exc).__name__)
