"""A local stand-in for the part of GitHub Steelframe uses: the REST endpoints of the App,
installation tokens, issues, labels, comments, pull requests, bare git repositories, and
signed webhooks back to the service. Checked in tests against GitHub's own OpenAPI
description and webhook schemas."""

from github_sandbox.app import create_sandbox_app
from github_sandbox.keys import generate_app_keys
from github_sandbox.sandbox import Sandbox
from github_sandbox.server import SandboxServer, serve_sandbox

__all__ = ["Sandbox", "SandboxServer", "create_sandbox_app", "generate_app_keys", "serve_sandbox"]
