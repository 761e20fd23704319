"""The HTTP edge: what every HTTP shell (operator_api, webhooks, web_gui) shares, below them.

Errors as JSON (`errors`), requests refused before routing answered in the same shape
(`refusals`), request ids (`request_ids`), answered-request counting
(`answers`), bounded JSON bodies and typed fields (`validation`), the operator's credentials
(`credentials`: request keys, the failed-authentication `throttle`) and the browser
session's cookie and CSRF names (`cookies`), and the app keys the composition root fills
(`appkeys`). It imports the core (`bot`) and aiohttp, never a shell.
"""
