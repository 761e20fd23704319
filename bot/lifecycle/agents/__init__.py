"""Coding agents the worker drives: the demo runtime, the generic command protocol, and
presets for Claude Code, Codex CLI and aider (docs/runtimes.md, "Coding agents")."""
