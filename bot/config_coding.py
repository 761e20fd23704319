"""The settings of coding runs: the coding agent, its sandbox and network, task limits and
retries, the repository's setup and tests, push limits (docs/lifecycle.md). One part of
`bot.config.Settings`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.config_values import (
    CODING_AGENTS,
    DEFAULT_UID_RANGE,
    UidRange,
    parse_bool,
    parse_budget_tokens,
    parse_budget_usd,
    parse_coding_agent,
    parse_egress_hosts,
    parse_egress_private,
    parse_float,
    parse_names,
    parse_network,
    parse_non_negative_int,
    parse_paths,
    parse_positive_int,
    parse_repo_agents,
    parse_sandbox,
    parse_str,
    parse_uid_range,
    setting,
)


@dataclass(frozen=True)
class CodingSettings:
    """How a coding run is driven, isolated and limited."""

    coding_command: str | None = setting(
        "STEELFRAME_CODING_COMMAND", parse_str, "worker's coding runtime"
    )
    # The coding runtime's isolation (docs/lifecycle.md, "The sandbox"): `off` runs it
    # unisolated, with a warning at every run, on /healthz and on the board.
    coding_sandbox: str = setting(
        "STEELFRAME_CODING_SANDBOX", parse_sandbox, "bwrap|off (off: no isolation)", "bwrap"
    )
    # --- the coding run's network (docs/lifecycle.md, "Egress"; issue 36) ---
    coding_network: str = setting(
        "STEELFRAME_CODING_NETWORK",
        parse_network,
        "allowlist (out only through the run's proxy, to allowed hosts) | off (no way out); "
        "true/false mean the same",
        "allowlist",
    )
    egress_allow: tuple[str, ...] = setting(
        "STEELFRAME_EGRESS_ALLOW",
        parse_egress_hosts,
        "hosts coding runs may reach besides the agent's model API: host[:port], "
        "comma-separated (no port: 443 and 80)",
        (),
    )
    egress_private: tuple[str, ...] = setting(
        "STEELFRAME_EGRESS_PRIVATE",
        parse_egress_private,
        "host:port entries coding runs may reach although private or loopback (a local "
        "model server), comma-separated",
        (),
    )
    coding_file_size_mb: int = setting(
        "STEELFRAME_CODING_FILE_SIZE_MB",
        parse_positive_int,
        "largest file the coding runtime may write (MB)",
        100,
    )
    coding_env_passthrough: tuple[str, ...] = setting(
        "STEELFRAME_CODING_ENV_PASSTHROUGH",
        parse_names,
        "variables passed to the coding runtime (its model key), comma-separated",
        (),
    )
    coding_memory_mb: int = setting(
        "STEELFRAME_CODING_MEMORY_MB", parse_positive_int, "coding runtime memory (data, MB)", 4096
    )
    coding_max_processes: int = setting(
        "STEELFRAME_CODING_MAX_PROCESSES", parse_positive_int, "coding runtime processes", 256
    )
    # A root worker's runs each get a uid of their own from here, so RLIMIT_NPROC (which
    # counts every process of a uid) is one run's (docs/lifecycle.md, "Who it runs as").
    sandbox_uid_range: UidRange | None = setting(
        "STEELFRAME_SANDBOX_UID_RANGE",
        parse_uid_range,
        "START-END: uids a root worker gives its sandboxed runs, one each (off: nobody)",
        DEFAULT_UID_RANGE,
    )
    coding_read_only_paths: tuple[Path, ...] = setting(
        "STEELFRAME_CODING_READ_ONLY_PATHS",
        parse_paths,
        "extra paths the coding runtime reads (os.pathsep-separated)",
        (),
    )
    coding_writable_paths: tuple[Path, ...] = setting(
        "STEELFRAME_CODING_WRITABLE_PATHS",
        parse_paths,
        "extra paths the coding runtime writes (os.pathsep-separated)",
        (),
    )
    # None: `command` when STEELFRAME_CODING_COMMAND is set, else no coding runtime.
    coding_agent: str | None = setting(
        "STEELFRAME_CODING_AGENT", parse_coding_agent, "|".join(CODING_AGENTS)
    )
    coding_model: str | None = setting(
        "STEELFRAME_CODING_MODEL", parse_str, "model the coding agent uses (its own default: none)"
    )
    coding_max_turns: int = setting(
        "STEELFRAME_CODING_MAX_TURNS", parse_positive_int, "agent turns per run (claude)", 50
    )
    task_time_limit: int = setting(
        "STEELFRAME_TASK_TIME_LIMIT", parse_positive_int, "seconds", 1800
    )
    task_max_attempts: int = setting(
        "STEELFRAME_TASK_MAX_ATTEMPTS", parse_positive_int, "attempts", 3
    )
    task_max_tokens: int | None = setting(
        "STEELFRAME_TASK_MAX_TOKENS", parse_budget_tokens, "tokens a task"
    )
    task_max_cost_usd: float | None = setting(
        "STEELFRAME_TASK_MAX_COST_USD", parse_budget_usd, "USD a task"
    )
    # A repository's spend across its tasks (docs/lifecycle.md, "Budgets"): over it, new
    # runs wait for the next day (or month) or until the operator raises the budget.
    repo_daily_max_tokens: int | None = setting(
        "STEELFRAME_REPO_DAILY_MAX_TOKENS", parse_budget_tokens, "tokens a repository, per UTC day"
    )
    repo_daily_max_cost_usd: float | None = setting(
        "STEELFRAME_REPO_DAILY_MAX_COST_USD", parse_budget_usd, "USD a repository, per UTC day"
    )
    repo_monthly_max_tokens: int | None = setting(
        "STEELFRAME_REPO_MONTHLY_MAX_TOKENS", parse_budget_tokens, "tokens a repository, per month"
    )
    repo_monthly_max_cost_usd: float | None = setting(
        "STEELFRAME_REPO_MONTHLY_MAX_COST_USD", parse_budget_usd, "USD a repository, per month"
    )
    # Every task's first run only plans (docs/lifecycle.md, "Plan-first runs"); a
    # repository's config or the `steelframe:plan-first` label asks for it per task.
    plan_first: bool = setting("STEELFRAME_PLAN_FIRST", parse_bool, "plan before coding", False)
    # A task whose estimate (the 90th percentile of its repository's past tasks) is above
    # this many USD plans first too: the operator approves before it spends.
    approve_above_usd: float | None = setting(
        "STEELFRAME_APPROVE_ABOVE_USD", parse_budget_usd, "estimated USD that asks for approval"
    )
    # A run renews its lease every third of this; a lease not renewed for this long is dead.
    task_lease_seconds: float = setting(
        "STEELFRAME_TASK_LEASE_SECONDS", parse_float, "run lease expiry", 60.0
    )
    # Failing CI on a task's pull request (bot.lifecycle.ci_intake): fix runs per failing
    # head commit, counting the commits fix runs pushed after it; 0 asks a person at once.
    ci_fix_runs: int = setting(
        "STEELFRAME_CI_FIX_RUNS", parse_non_negative_int, "fix runs per failing head commit", 2
    )
    # A task's pull request that conflicts with its moved base (bot.lifecycle.base_intake):
    # update runs (the base merged into the branch) per conflicting head, counting the merge
    # commits they pushed; 0 asks a person at once.
    base_update_runs: int = setting(
        "STEELFRAME_BASE_UPDATE_RUNS",
        parse_non_negative_int,
        "update runs per pull request that conflicts with its base",
        1,
    )
    # A review's webhooks (the review, each of its line comments) arrive one by one: its run
    # starts this long after the first, so one run takes up every thread of the review (a run
    # started at once took the first comment only, and a follow-up run the rest).
    review_gather_seconds: float = setting(
        "STEELFRAME_REVIEW_GATHER_SECONDS",
        parse_float,
        "wait before a review's run starts, for the rest of its comments",
        3.0,
    )
    task_retry_backoff_seconds: float = setting(
        "STEELFRAME_TASK_RETRY_BACKOFF_SECONDS",
        parse_float,
        "first retry delay; doubles per attempt",
        30.0,
    )
    # The repository's own environment (docs/repository-config.md): setup, its secrets
    # and cache, the test command, and which agents a repository may choose.
    setup_secrets_dir: Path | None = setting(
        "STEELFRAME_SETUP_SECRETS_DIR", Path, "folder of <owner>/<repo>.env setup-only secrets"
    )
    setup_time_limit: int = setting(
        "STEELFRAME_SETUP_TIME_LIMIT", parse_positive_int, "seconds all of setup may take", 600
    )
    setup_cache_keep: int = setting(
        "STEELFRAME_SETUP_CACHE_KEEP",
        parse_non_negative_int,
        "prepared workspaces kept per repository (0: no cache)",
        3,
    )
    test_time_limit: int = setting(
        "STEELFRAME_TEST_TIME_LIMIT", parse_positive_int, "seconds the test command may take", 300
    )
    repo_agents: tuple[str, ...] = setting(
        "STEELFRAME_REPO_AGENTS",
        parse_repo_agents,
        "agents a repository's config may choose besides the installation's (comma-separated)",
        (),
    )
    push_max_bytes: int = setting(
        "STEELFRAME_PUSH_MAX_BYTES",
        parse_positive_int,
        "largest change a run may push: bytes of its new files, in total",
        50 * 1024 * 1024,
    )
    push_max_file_bytes: int = setting(
        "STEELFRAME_PUSH_MAX_FILE_BYTES",
        parse_positive_int,
        "largest single file a run may push, in bytes",
        20 * 1024 * 1024,
    )
