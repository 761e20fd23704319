"""Typed aiohttp application keys shared by the HTTP packages."""

from __future__ import annotations

from aiohttp import web

from bot.services import Services

SERVICES = web.AppKey("services", Services)
