"""The options of `steelframe memory`. Its work is in memory.py, imported only once a
subcommand runs: `memory --help` loads no database driver (nor the index: numpy, scikit-learn).
"""

from __future__ import annotations

from typing import Any

from steelframe.cli import Handler


def _memory(function: str) -> Handler:
    return Handler("steelframe.commands.memory", function)


def register(subparsers: Any) -> None:
    memory = subparsers.add_parser("memory")
    sub = memory.add_subparsers(dest="memory_command", required=True, metavar="SUBCOMMAND")

    add = sub.add_parser("add", help="store a chunk of memory")
    add.add_argument("text", help="the chunk's text, or - to read it from standard input")
    add.add_argument(
        "--source",
        default="note",
        help="chat_summary, worker_session, issue, pull_request, comment, committed_memory or note",
    )
    add.add_argument("--repo", help="owner/name (default: the default agent's repository)")
    add.add_argument("--issue", type=int, help="the issue or pull request number it is about")
    add.add_argument("--paths", default="", help="comma-separated paths it concerns")
    add.add_argument("--session-id", help="the chat or worker session it came from")
    add.add_argument("--key", help="idempotency key: the same key replaces the chunk")
    add.set_defaults(handler=_memory("cmd_add"))

    search = sub.add_parser("search", help="print the hits for a query, with scores")
    search.add_argument("query", help="what to look for, in plain words")
    search.add_argument("--repo", help="only this repository (default: all)")
    search.add_argument("--focus", type=int, help="lift chunks about this issue/PR")
    search.add_argument("-k", type=int, default=8, help="how many hits")
    search.add_argument("--floor", type=float, help="minimum cosine (default: the Chat floor)")
    search.set_defaults(handler=_memory("cmd_search"))

    forget = sub.add_parser(
        "forget", help="forget chunks: by key, or everything about an issue or pull request"
    )
    forget.add_argument("keys", nargs="*", metavar="KEY", help="a chunk's key (comment:4567)")
    forget.add_argument("--issue", type=int, help="every chunk about this issue or PR number")
    forget.add_argument(
        "--repo", help="the repository of --issue (default: the default agent's repository)"
    )
    forget.set_defaults(handler=_memory("cmd_forget"))

    reindex = sub.add_parser("reindex", help="rebuild the index from the database")
    reindex.set_defaults(handler=_memory("cmd_reindex"))
