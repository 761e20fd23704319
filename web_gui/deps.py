"""What the web GUI's handlers use: one typed object, built whole by the composition root
(`steelframe.composition`) and reached through `app[GUI]`."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from bot.config import Settings
from bot.db import Database


@dataclass(frozen=True)
class Gui:
    settings: Settings
    db: Database


GUI = web.AppKey("web_gui", Gui)
