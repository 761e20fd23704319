"""`steelframe doctor`: which coding agents are installed, at which version, and whether
the configured one can run."""

from __future__ import annotations

import argparse
from typing import Any

from bot.lifecycle.agents.installed import configured_problem, find_all
from steelframe.cli import load_settings


def register(subparsers: Any) -> None:
    doctor = subparsers.add_parser("doctor")
    doctor.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    settings = load_settings()
    agent = settings.coding_agent or ("command" if settings.coding_command else None)
    found = find_all()
    print(
        f"coding agent: {agent or 'none'}"
        + (f" · model {settings.coding_model}" if settings.coding_model else "")
    )
    for item in found:
        where = f" at {item.path}" if item.path else ""
        name, label = item.preset.agent.value, item.preset.label
        print(f"  {name:<7} {label:<12} {item.version or '-':<10} {item.verdict()}{where}")
    problem = configured_problem(agent, found)
    if problem:
        print(f"problem: {problem}")
        return 1
    print("ok")
    return 0
