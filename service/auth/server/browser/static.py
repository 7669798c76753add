"""The pages' one script and one style sheet, shipped as package data and served same-origin."""

from __future__ import annotations

from importlib import resources
from typing import Final

from aiohttp import web

ASSETS: Final = {"app.js": "text/javascript", "app.css": "text/css"}


class AssetFiles:
    """Serves /oauth/assets/<name> for the two known names."""

    def __init__(self) -> None:
        folder = resources.files("service.auth.server.browser") / "assets"
        self._bodies = {name: (folder / name).read_bytes() for name in ASSETS}

    async def serve(self, request: web.Request) -> web.Response:
        """Answer one asset (GET or HEAD)."""
        name = request.path.rsplit("/", 1)[1]
        return web.Response(body=self._bodies[name], content_type=ASSETS[name], charset="utf-8")
