"""Typed application keys of the webhooks package."""

from __future__ import annotations

from aiohttp import web

from webhooks.processor import DeliveryProcessor
from webhooks.receiver import Receiver

RECEIVER = web.AppKey("webhook_receiver", Receiver)
PROCESSOR = web.AppKey("webhook_processor", DeliveryProcessor)
