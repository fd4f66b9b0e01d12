"""The console's own assets (stylesheet, script), read once from package data.

Only the files shipped in `static/` are served, by exact name: no path from a
URL ever reaches the file system.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

CONTENT_TYPES = {
    ".css": "text/css",
    ".js": "text/javascript",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


@dataclass(frozen=True)
class StaticFiles:
    assets: dict[str, Asset]

    def get(self, name: str) -> Asset | None:
        return self.assets.get(name)


def load_static() -> StaticFiles:
    folder = resources.files("qinglong.service.console").joinpath("static")
    assets = {}
    for entry in folder.iterdir():
        suffix = entry.name[entry.name.rfind(".") :]
        if entry.is_file() and suffix in CONTENT_TYPES:
            assets[entry.name] = Asset(entry.read_bytes(), CONTENT_TYPES[suffix])
    return StaticFiles(assets)
