"""JSON at the model-provider seam: `JsonObject` and `TaggedDecoder`, defined in
bot/contracts/tagged_json.py (below the lifecycle too, whose coding agents' output lines
decode with it) and named here for the runtimes."""

from __future__ import annotations

from bot.contracts.tagged_json import JsonObject as JsonObject
from bot.contracts.tagged_json import TaggedDecoder as TaggedDecoder
