"""Serve the SDK's ASGI app from aiohttp (aiohttp-asgi), with its receive() fixed."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp_asgi import ASGIResource

Scope = dict[str, Any]
Message = dict[str, Any]


def block_after_body(app: Any) -> Any:
    """Make receive() wait for disconnect after the body, as ASGI servers do.

    aiohttp-asgi 0.7.1 keeps returning empty request messages after the body, which turns the
    SDK's disconnect listener into a busy loop.
    """

    async def wrapped(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body_done = False

        async def receive_once() -> Message:
            nonlocal body_done
            if body_done:
                await asyncio.Event().wait()  # until the request task is cancelled
            message: Message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_done = True
            return message

        await app(scope, receive_once, send)

    return wrapped


def mount_asgi(app: web.Application, asgi_app: Any) -> None:
    """Register the ASGI app as the catch-all resource, with its lifespan, after native routes."""
    resource = ASGIResource(block_after_body(asgi_app), root_path="/")
    app.router.register_resource(resource)
    resource.lifespan_mount(app)
