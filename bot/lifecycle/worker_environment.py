"""The worker's environment, read once when the worker starts: its variables do not change
while it runs, so a job reads this snapshot (`LifecycleContext.environment`), never
`os.environ`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bot.config import Settings
from bot.lifecycle.redact import Redactor, from_settings


@dataclass(frozen=True)
class WorkerEnvironment:
    """The variables the worker started with, and the secret values among them and in its
    settings (the App's key, the webhook secret, model keys, database and Redis passwords,
    the key variables passed to the coding runtime), which setup is never given."""

    variables: Mapping[str, str]
    own_secrets: Redactor

    @classmethod
    def read(cls, settings: Settings, environ: Mapping[str, str]) -> WorkerEnvironment:
        variables = MappingProxyType(dict(environ))
        return cls(variables=variables, own_secrets=from_settings(settings, variables))

    def values(self, names: Iterable[str]) -> list[str | None]:
        """The values of these variables (None where one is not set)."""
        return [self.variables.get(name) for name in names]
