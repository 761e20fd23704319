"""The GUI's static files, addressed by one content hash so they can be cached for a year.

ES modules import each other by relative paths, so every file sits under the same hashed
folder (`/gui/static/<version>/app.js`); any change to any file is a new version.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

STATIC_DIR = Path(__file__).with_name("static")
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}
SERVED_SUFFIXES = frozenset(CONTENT_TYPES) | {".png", ".ico"}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


@dataclass(frozen=True)
class StaticAssets:
    version: str
    files: dict[str, Asset]

    @classmethod
    def load(cls, root: Path = STATIC_DIR) -> StaticAssets:
        """Read every servable file once at start-up (a few hundred KB); serving never
        touches the disk, so no path from a request ever reaches the file system."""
        files: dict[str, Asset] = {}
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix not in SERVED_SUFFIXES:
                continue
            name = path.relative_to(root).as_posix()
            body = path.read_bytes()
            kind = CONTENT_TYPES.get(path.suffix) or mimetypes.guess_type(name)[0]
            files[name] = Asset(body, kind or "application/octet-stream")
            digest.update(name.encode() + b"\0" + body + b"\0")
        return cls(version=digest.hexdigest()[:16], files=files)

    def url(self, name: str) -> str:
        return f"/gui/static/{self.version}/{name}"


ASSETS = web.AppKey("gui_assets", StaticAssets)
