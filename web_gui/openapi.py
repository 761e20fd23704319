"""The GUI's routes in the OpenAPI description (a test checks it lists every route)."""

from __future__ import annotations

from typing import Any

_ERR = {"description": "Error", "content": {"application/json": {}}}
_SESSION = {
    "type": "object",
    "properties": {
        "operator": {"type": "string"},
        "csrf_token": {"type": "string"},
        "agents": {"type": "array", "items": {"type": "object"}},
    },
}

GUI_PATHS: dict[str, Any] = {
    "/": {
        "get": {
            "summary": "The web GUI (HTML page)",
            "tags": ["gui"],
            "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
        }
    },
    "/gui/static/{version}/{name}": {
        "get": {
            "summary": "A GUI static file (content-hashed, cached for a year)",
            "tags": ["gui"],
            "parameters": [
                {"name": "version", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "responses": {"200": {"description": "The file"}, "404": _ERR},
        }
    },
    "/gui/session": {
        "get": {
            "summary": "Who is signed in (session cookie), the CSRF token and the agents",
            "tags": ["gui"],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": _SESSION}}},
                "401": _ERR,
                "429": _ERR,
            },
        },
        "post": {
            "summary": "Sign in: exchange an operator token for an HttpOnly session cookie",
            "tags": ["gui"],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["token"],
                            "properties": {"token": {"type": "string"}},
                        }
                    }
                },
            },
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": _SESSION}}},
                "400": _ERR,
                "401": _ERR,
                "403": _ERR,
                "413": _ERR,
                "429": _ERR,
            },
        },
        "delete": {
            "summary": "Sign out (needs the X-CSRF-Token header)",
            "tags": ["gui"],
            "responses": {"200": {"description": "OK"}, "401": _ERR, "403": _ERR, "429": _ERR},
        },
    },
    "/api/operator/sign-in-codes": {
        "post": {
            "summary": "A one-time sign-in code for a link (`/#code=CODE`): two minutes, once",
            "tags": ["gui"],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["code", "expires_in"],
                                "properties": {
                                    "code": {"type": "string"},
                                    "expires_in": {"type": "integer"},
                                },
                            }
                        }
                    },
                },
                "400": _ERR,
                "401": _ERR,
                "413": _ERR,
                "429": _ERR,
            },
        }
    },
    "/gui/link": {
        "post": {
            "summary": "Claim a sign-in code for this browser (a nonce cookie); whose it is",
            "tags": ["gui"],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["code"],
                            "properties": {"code": {"type": "string"}},
                        }
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["operator"],
                                "properties": {"operator": {"type": "string"}},
                            }
                        }
                    },
                },
                "400": _ERR,
                "401": _ERR,
                "403": _ERR,
                "413": _ERR,
                "429": _ERR,
            },
        }
    },
    "/gui/link/confirm": {
        "post": {
            "summary": "Sign in the browser that claimed a code (the person confirmed)",
            "tags": ["gui"],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": _SESSION}}},
                "400": _ERR,
                "401": _ERR,
                "403": _ERR,
                "413": _ERR,
                "429": _ERR,
            },
        }
    },
}
