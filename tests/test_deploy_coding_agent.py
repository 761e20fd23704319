"""A deployment from the image does coding work only once it is given a coding agent: the
image carries none (no Node.js, no agent CLI) and workers without one leave every task
waiting for info. deploy/steelframe.env.example and docs/deploy.md say so where an operator
fills in the deployment, not only in docs/runtimes.md."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_image_installs_no_coding_agent() -> None:
    """What the two texts below rely on: the Dockerfile installs none of the presets'
    binaries (if it starts to, they should say which)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    for agent in ("claude-code", "@openai/codex", "aider-chat", "nodejs", "npm"):
        assert agent not in dockerfile


def test_the_env_example_names_the_coding_agent_settings() -> None:
    text = (ROOT / "deploy/steelframe.env.example").read_text()
    assert "STEELFRAME_CODING_AGENT" in text and "ANTHROPIC_API_KEY" in text
    said = text[text.index("STEELFRAME_CODING_AGENT") - 200 :]
    assert "docs/deploy.md" in said[:600] and "waits for" in said[:600]


def test_deploy_md_says_how_a_coding_agent_gets_into_the_image() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    part = text[text.index("- **Coding agents**") :]
    part = part[: part.index("\n- **", 3)]
    assert "FROM steelframe:local" in part and "STEELFRAME_CODING_AGENT" in part
    assert "waiting for info" in part and "steelframe doctor" in part
