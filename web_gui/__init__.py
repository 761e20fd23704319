"""The web GUI: the Chat surface, Board and Dashboard in the browser, served at `/`.

One Jinja2 page and static ES modules (no build step); it speaks only the operator API, with
a session cookie instead of a bearer token (sign-in: `web_gui.routes`). `setup(app)`
adds its routes to the web service (see `steelframe.server.default_plugins`); what they use
(`web_gui.deps.Gui`) comes from the composition root.
"""

from __future__ import annotations

from aiohttp import web

from web_gui import routes
from web_gui.assets import ASSETS, StaticAssets
from web_gui.openapi import GUI_PATHS

# The GUI's part of the API description (composed by steelframe.server).
OPENAPI_PATHS = GUI_PATHS


def setup(app: web.Application) -> None:
    app[ASSETS] = StaticAssets.load()
    app.add_routes(routes.routes)
