"""`steelframe-tui`: start the TUI against a running service (--url, --token or env)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "STEELFRAME_URL"
TOKEN_ENV = "STEELFRAME_TOKEN"


class UsageError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"service URL (env {URL_ENV}; default {DEFAULT_URL})")
    parser.add_argument(
        "--token",
        help=f"operator token (env {TOKEN_ENV}, which keeps it out of the process list)",
    )


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str]:
    """The service URL and token: flags first, then the environment."""
    url = (args.url or environ.get(URL_ENV) or DEFAULT_URL).strip()
    token = (args.token or environ.get(TOKEN_ENV) or "").strip()
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https://, got {url!r}")
    if not token:
        raise UsageError(
            f"no operator token: pass --token or set {TOKEN_ENV} "
            "(`steelframe dev` prints one; `steelframe operator create NAME` makes one)"
        )
    return url, token


def run(args: argparse.Namespace, environ: Mapping[str, str], *, prog: str) -> int:
    try:
        url, token = resolve(args, environ)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    # Textual loads only when the app really starts, so `steelframe --help` stays fast.
    from tui_client.api import OperatorClient
    from tui_client.app import SteelframeApp

    app = SteelframeApp(OperatorClient(url, token))
    app.run()
    return app.return_code or 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="steelframe-tui", description="The Steelframe terminal client"
    )
    add_arguments(parser)
    return run(parser.parse_args(argv), os.environ, prog="steelframe-tui")


if __name__ == "__main__":
    raise SystemExit(main())
