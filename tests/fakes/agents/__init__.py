"""Fake `claude`, `codex` and `aider` executables (in `bin/`) that reproduce the documented
output of the real CLIs line for line (../shared/agents/coding-agents.md, sections 1.6, 2.6,
3.5 and 6), including their error cases, and really edit files in their working directory.

Which case a run plays is chosen by the prompt, the one input every sandbox passes on: the
words `scenario:NAME` anywhere in it (the tests put them in the issue title). Without one,
a run succeeds. `BIN` is the directory to put first on PATH.
"""

from __future__ import annotations

from pathlib import Path

BIN = Path(__file__).parent / "bin"
