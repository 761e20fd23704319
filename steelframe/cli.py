"""The `steelframe` command: serve, dev, db, operator, config (packages add more).

Each command module exposes `register(subparsers)`; `COMMAND_MODULES` lists them, so a
package adds its commands in one line here and keeps its code to itself.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bot import __version__
from bot.config import Settings
from bot.config_values import ConfigError

if TYPE_CHECKING:  # the type only: --help and --version import no database driver
    from sqlalchemy.engine import Engine

T = TypeVar("T")

# Every top-level command, the module that registers it and its one-line help. Only the
# module of the command being run is imported, so `--version` and `--help` stay fast.
# A module that registers a command whose work imports much (the database, the lifecycle,
# the app) names its handler with `Handler`, so `COMMAND --help` imports none of that either.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("steelframe.commands.core_options", "run the web service (migrates first)"),
    "dev": ("steelframe.commands.dev_options", "run everything locally on embedded defaults"),
    "worker": ("steelframe.commands.worker_options", "run RQ workers for the task lifecycle"),
    "reconcile": ("steelframe.commands.worker_options", "repair lifecycle drift once and exit"),
    "db": ("steelframe.commands.core_options", "database migrations: upgrade, current, history"),
    "operator": ("steelframe.commands.core_options", "manage operators and their tokens"),
    "config": ("steelframe.commands.config", "show the effective settings (secrets masked)"),
    "github": ("steelframe.commands.github_options", "GitHub App commands"),
    "webhooks": ("steelframe.commands.github_options", "the webhook delivery log"),
    "memory": (
        "steelframe.commands.memory_options",
        "session memory: add, search, forget, reindex",
    ),
    "tui": ("steelframe.commands.tui", "open the terminal client"),
    "doctor": (
        "steelframe.commands.doctor",
        "check the configuration: database, Redis, GitHub App, sandbox, coding agent, model",
    ),
    "desktop": ("steelframe.commands.desktop", "open the web GUI in its own window"),
}


@dataclass(frozen=True)
class Handler:
    """A command's function named by module and attribute, imported once the command runs:
    after parsing, so `--help` (which ends in parsing) loads none of the modules it needs."""

    module: str
    attribute: str

    def load(self) -> Callable[[argparse.Namespace], int | None]:
        loaded: Callable[[argparse.Namespace], int | None]
        loaded = getattr(importlib.import_module(self.module), self.attribute)
        return loaded


def load_settings(**defaults: object) -> Settings:
    """Settings for this process: embedded `defaults` < ./steelframe.toml (or the file
    STEELFRAME_CONFIG names) < ./.env < environment (a `.env` file never overrides a
    variable the environment sets)."""
    dotenv = read_dotenv(Path(".env"))
    # STEELFRAME_CONFIG (from the environment, else .env) names the file to read instead,
    # even when a ./steelframe.toml is also there.
    named = os.environ.get("STEELFRAME_CONFIG", dotenv.get("STEELFRAME_CONFIG"))
    toml = Path(named) if named else Path("steelframe.toml")
    return Settings.from_env(
        os.environ,
        toml_path=toml if named or toml.exists() else None,
        defaults=defaults,
        dotenv=dotenv,
    )


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables of a `.env` file (quotes, `export`, multi-line PEM values), if any."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # only when there is a file: keeps start-up light

    return {name: value for name, value in dotenv_values(path).items() if value is not None}


def require_data_dir(settings: Settings) -> None:
    """Make the data folder and write in it, or raise the OSError now (cli.main says it in
    one line): the memory index, worktrees and setup cache live there, and a service that
    cannot write it answered ready while every memory write failed."""
    import tempfile

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=settings.data_dir, prefix=".probe-"):
        pass


def with_database(fn: Callable[..., T], *args: Any) -> T:
    """Run `fn(session, *args)` in one transaction on the configured database (migrated
    first), for commands that do one piece of database work and exit."""
    from bot import db as dbmod

    database = dbmod.Database.from_url(load_settings().database_url)
    try:
        dbmod.upgrade(database.engine)
        return database.call(fn, *args)
    finally:
        database.dispose()


@dataclass(frozen=True)
class MigrationState:
    """Where a database stands against the migrations this version knows (`db current`,
    `doctor`, and the line a start-up becomes when a newer version migrated it)."""

    applied: tuple[str, ...]
    known: tuple[str, ...]  # oldest first

    @property
    def latest(self) -> str:
        return self.known[-1]

    @property
    def unknown(self) -> tuple[str, ...]:
        """Applied migrations this version has no script for: a newer version ran them."""
        return tuple(revision for revision in self.applied if revision not in self.known)

    @property
    def up_to_date(self) -> bool:
        return self.applied == (self.latest,)


def migration_state(engine: Engine) -> MigrationState:
    from bot import db as dbmod

    known = tuple(revision for revision, _ in dbmod.migration_history())
    return MigrationState(dbmod.current_revisions(engine), known)


def unknown_migrations_problem(unknown: tuple[str, ...]) -> str:
    """What to say of a database at migrations this version does not know, and what to do."""
    return (
        f"is at migration {', '.join(unknown)}, which this version does not know: a newer "
        "Steelframe migrated it. Run that version (or restore a backup from before it); "
        "`steelframe db history` lists the migrations this one knows"
    )


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default after its help, when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        # Not an empty list either: a repeatable option given no times.
        shown = action.default not in (None, False, argparse.SUPPRESS, "", [])
        if shown and "%(default)" not in text and (action.option_strings or action.nargs == "?"):
            text += " (default: %(default)s)"
        return text


if TYPE_CHECKING:  # generic in the stubs only
    _SubParsersAction = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsersAction = argparse._SubParsersAction


class _Subcommands(_SubParsersAction):
    """Subcommands whose one-line help is also their description (`steelframe db --help`)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if "help" not in kwargs and name in COMMANDS:  # a top-level command: the table says
            kwargs["help"] = COMMANDS[name][1]
        kwargs.setdefault("description", kwargs.get("help"))
        return super().add_parser(name, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """A word the chosen command does not know is its error, with its usage and the
        option it looks like: argparse leaves it to the top parser, whose usage lists none
        of the command's options (`steelframe dev --prot 9000`)."""
        super().__call__(parser, namespace, values, option_string)
        unknown = getattr(namespace, argparse._UNRECOGNIZED_ARGS_ATTR, None)
        if unknown:
            chosen = self._name_parser_map[values[0]]
            chosen.error(f"unrecognized arguments: {' '.join(unknown)}{_near(chosen, unknown)}")


def _near(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """` (did you mean --port?)` for the first unknown option that is close to one."""
    known = [option for action in parser._actions for option in action.option_strings]
    for word in unknown:
        if word.startswith("-"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
            if close:
                return f" (did you mean {close[0]}?)"
    return ""


class CommandParser(argparse.ArgumentParser):
    """Every (sub)command's parser: described, with defaults shown, subcommands alike."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subcommands)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: the named command's module is imported; the others are listed."""
    parser = CommandParser(
        prog="steelframe",
        description="Steelframe: operator bot and GitHub App for AI coding work.",
        epilog="Run `steelframe COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"steelframe {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _command_module(argv)
    for name, (module, help_text) in COMMANDS.items():
        if module != chosen:
            subparsers.add_parser(name, help=help_text)
    if chosen is not None:
        importlib.import_module(chosen).register(subparsers)
    return parser


def _command_module(argv: Sequence[str] | None) -> str | None:
    words = list(sys.argv[1:] if argv is None else argv)
    first = next((word for word in words if not word.startswith("-")), None)
    return COMMANDS[first][0] if first in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    from steelframe import collector

    try:
        # A Ctrl-C while the command's modules load (a second or more on a busy machine)
        # ends it as quietly as one a moment later: no traceback of the import under way.
        with collector.modules_loaded():  # the command's modules live as long as the process
            args = build_parser(argv).parse_args(argv)  # `--help` ends here
            handler = args.handler.load() if isinstance(args.handler, Handler) else args.handler
    except KeyboardInterrupt:
        return 130
    try:
        result = handler(args)
    except ConfigError as exc:
        print(f"steelframe: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `steelframe config --list | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        message = _infrastructure_message(exc, args)
        if message is None:
            raise
        print(f"steelframe: {message}", file=sys.stderr)
        return 1
    return int(result or 0)


def _infrastructure_message(exc: Exception, args: argparse.Namespace) -> str | None:
    """A database, Redis or port failure as one line naming the setting to check."""
    # Loaded only once something failed: `--help` and `--version` import no driver.
    from steelframe.failures import explain, explain_listen

    try:
        settings: Settings | None = load_settings()
    except ConfigError:
        settings = None
    if isinstance(exc, OSError) and hasattr(args, "port"):
        # The options, else HOST and PORT (what serve and dev listened on).
        host = getattr(args, "host", None) or (settings.host if settings else "127.0.0.1")
        port = args.port if args.port is not None else (settings.port if settings else 8080)
        message = explain_listen(exc, host, port)
        if message is not None:
            return message
    return (
        explain(exc, settings)
        or _data_dir_message(exc, settings)
        or _unknown_migrations_message(exc, settings)
    )


def _data_dir_message(exc: Exception, settings: Settings | None) -> str | None:
    """A folder or file of the data folder (or the folder itself) that could not be made."""
    if settings is None or not isinstance(exc, OSError) or not exc.filename:
        return None
    failed, data_dir = Path(str(exc.filename)), settings.data_dir
    if not (failed == data_dir or failed in data_dir.parents or data_dir in failed.parents):
        return None
    where = "" if failed == data_dir else f" ({failed})"
    return (
        f"cannot make the data folder {data_dir}{where}: {exc.strerror or exc}. Check "
        "STEELFRAME_DATA_DIR: the service's user must be able to write there."
    )


def _unknown_migrations_message(exc: Exception, settings: Settings | None) -> str | None:
    """A migration step that failed because a newer version migrated the database (alembic:
    "Can't locate revision"), as one line; any other migration failure keeps its traceback."""
    from alembic.util.exc import CommandError

    from bot import db as dbmod

    if settings is None or not isinstance(exc, CommandError):
        return None
    database = dbmod.Database.from_url(settings.database_url)
    try:
        unknown = migration_state(database.engine).unknown
    except Exception:  # the database itself failing now: the original error stands
        return None
    finally:
        database.dispose()
    if not unknown:
        return None
    shown = settings.redacted()["STEELFRAME_DATABASE_URL"]
    return f"the database at {shown} {unknown_migrations_problem(unknown)}."


if __name__ == "__main__":
    # `python -m steelframe.cli`: run the `main` of the module the commands import, whose
    # `Handler` is the one their parsers hold (this `__main__` copy has a class of its own).
    from steelframe import cli

    raise SystemExit(cli.main())
