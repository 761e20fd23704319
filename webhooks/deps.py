"""What the webhook shell's handlers use: one typed object, built whole by the composition
root (`steelframe.composition`) and reached through `app[WEBHOOKS]`."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from bot.db import Database
from webhooks.processor import DeliveryProcessor
from webhooks.receiver import Receiver
from webhooks.writer import DeliveryWriter


@dataclass(frozen=True)
class Webhooks:
    db: Database
    receiver: Receiver
    processor: DeliveryProcessor
    writer: DeliveryWriter


WEBHOOKS = web.AppKey("webhooks", Webhooks)
