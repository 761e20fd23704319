"""`steelframe tui`: the terminal client, the same as `steelframe-tui`, but for one thing:
given no token (--token, STEELFRAME_TOKEN), it uses the `steelframe dev` running on this
checkout's data folder (or, given --data-dir DIR, on that folder only), its URL and the dev
token it keeps, so `make run` in one terminal and `make tui` in another need nothing copied
between them. The discovery lives here, not in tui_client, which knows only HTTP.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from steelframe.cli import load_settings
from steelframe.dev_settings import dev_client, dev_folders, own_data_folder, running_dev
from tui_client.__main__ import TOKEN_ENV, URL_ENV, UsageError, add_arguments, run

PROG = "steelframe tui"


def register(subparsers: Any) -> None:
    tui = subparsers.add_parser("tui")
    add_arguments(tui)
    tui.add_argument(
        "--data-dir",
        type=Path,
        help="use the steelframe dev running on this folder only (`steelframe dev --data-dir "
        "DIR`'s); default: this directory's data folders",
    )
    tui.set_defaults(handler=cmd_tui)


def cmd_tui(args: argparse.Namespace) -> int:
    try:
        args, note = with_running_dev(args, os.environ, checkout_dev_folders)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"{PROG}: {note}", file=sys.stderr)
    return run(args, os.environ, prog=PROG)


def checkout_dev_folders() -> list[Path]:
    """Where a dev started here runs: the data folders of this directory's settings."""
    return dev_folders(load_settings())


def with_running_dev(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    folders: Callable[[], list[Path]],
) -> tuple[argparse.Namespace, str]:
    """`args` with the URL and token of a dev running on `args.data_dir` (--data-dir), else
    on one of `folders`, and what to say of it; unchanged, with nothing to say, when a flag
    or the environment gives the token (a token given always wins). A URL given without a
    token takes the token of the dev at that URL. Raises UsageError when nothing gives a
    token. `folders` is called only when no token and no --data-dir is given: the settings
    are not read otherwise."""
    url = (args.url or environ.get(URL_ENV) or "").strip() or None
    if (args.token or environ.get(TOKEN_ENV) or "").strip():
        return args, ""
    given = args.data_dir is not None
    searched = [own_data_folder(args.data_dir)] if given else folders()
    found = dev_client(searched, url=url)
    if found is None:
        raise UsageError(_no_token(searched, url, folder_given=given))
    dev = found.dev
    used = "the token of the steelframe dev" if url else "the steelframe dev"
    note = f"using {used} running on {dev.folder} (pid {dev.pid}) at {found.url}"
    return argparse.Namespace(**{**vars(args), "url": found.url, "token": found.token}), note


def _no_token(folders: list[Path], url: str | None, *, folder_given: bool = False) -> str:
    """The missing token, and what the running devs (or their absence) say of it."""
    devs = [dev for dev in map(running_dev, folders) if dev is not None]
    given = f"no operator token for {url}" if url else "no operator token"
    if not devs:
        where = " or ".join(str(folder) for folder in folders)
        # A --data-dir folder is found only by a dev started on it, not by `make run`'s.
        start = (
            f"`steelframe dev --data-dir {shlex.quote(str(folders[0]))}`"
            if folder_given
            else "`make run` (steelframe dev)"
        )
        return (
            f"{given}, and no steelframe dev runs on {where}: start one with {start} in "
            f"another terminal and this finds it, or pass --token or set "
            f"{TOKEN_ENV} (`steelframe operator create NAME` makes one for a serve)"
        )
    dev = devs[0]
    if dev.url is None:
        return (
            f"{given}: the steelframe dev running on {dev.folder} (pid {dev.pid}) is still "
            f"starting; try again once it prints its token, or pass --token or set {TOKEN_ENV}"
        )
    return (
        f"{given}: pass --token or set {TOKEN_ENV} (the steelframe dev running on "
        f"{dev.folder} (pid {dev.pid}) is at {dev.url})"
    )
