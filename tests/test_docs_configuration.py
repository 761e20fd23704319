"""docs/configuration.md's defaults are the code's: each table row's default, read with the
setting's own parser, equals the default `Settings` declares (bot/config*.py)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.config import FIELDS
from steelframe.processes import CHILD_STOP_MARGIN_SECONDS

ROOT = Path(__file__).resolve().parent.parent

# Defaults the code derives from another setting when it resolves them (the doc says from
# which), so the declared default is a placeholder.
DERIVED = {
    "STEELFRAME_DATABASE_URL": "`sqlite:///<data dir>/steelframe.db`",
    "STEELFRAME_CODING_AGENT": "`command` if `STEELFRAME_CODING_COMMAND` is set",
    "STEELFRAME_CHAT_EMBEDDINGS_URL": "`OPENAI_BASE_URL`",
}


def _documented_defaults() -> dict[str, str]:
    defaults: dict[str, str] = {}
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = line.strip().strip("|").split(" | ")
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
            defaults[name] = cells[1].strip()
    return defaults


def test_every_documented_default_is_the_codes() -> None:
    documented = _documented_defaults()
    wrong = []
    for spec in FIELDS:
        said = documented[spec.env]
        if spec.env in DERIVED:
            assert said.startswith(DERIVED[spec.env]), (spec.env, said)
            continue
        if said.startswith("none"):
            if spec.default not in (None, (), [], {}):
                wrong.append(f"{spec.env}: doc says none, code {spec.default!r}")
            continue
        value = re.match(r"`([^`]*)`", said)
        assert value, f"{spec.env}: the default cell starts with neither none nor a value"
        if spec.parse(value[1]) != spec.default:
            wrong.append(f"{spec.env}: doc {value[1]!r}, code {spec.default!r}")
    assert wrong == []


def test_a_changed_default_is_caught() -> None:
    """The comparison above reads values with the settings' parsers: `120` and 120.0 are
    the same, `60` and 30.0 are not."""
    [spec] = [s for s in FIELDS if s.env == "STEELFRAME_TASK_RETRY_BACKOFF_SECONDS"]
    assert spec.parse("30") == spec.default and spec.parse("60") != spec.default


def test_the_supervisors_stop_timeouts_leave_the_documented_room() -> None:
    """STEELFRAME_SHUTDOWN_GRACE_SECONDS' row: a supervisor must wait the grace plus 15 s
    (what `serve --processes` gives its own children) or its SIGKILL lands before the
    turns' end is written; compose.yaml and the Kubernetes serve Deployment are such
    supervisors, and docs/deploy.md names their figures."""
    [grace] = [s.default for s in FIELDS if s.env == "STEELFRAME_SHUTDOWN_GRACE_SECONDS"]
    needed = grace + CHILD_STOP_MARGIN_SECONDS
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    for name in ("serve-1", "serve-2"):
        period = services[name]["stop_grace_period"]
        assert period.endswith("s") and float(period[:-1]) >= needed, (name, period)
    documents = yaml.safe_load_all((ROOT / "deploy/kubernetes/steelframe.yaml").read_text())
    [serve] = [d for d in documents if d["metadata"]["name"] == "steelframe-serve"]
    kubernetes = serve["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert kubernetes >= needed
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert f"`stop_grace_period: {period}`" in deploy
    assert f"`terminationGracePeriodSeconds: {kubernetes}`" in deploy
    assert f"`STEELFRAME_SHUTDOWN_GRACE_SECONDS` ({grace:g} s)" in deploy
