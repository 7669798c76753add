"""The one loader of Lua scripts kept as package data, for the send ledger and the OAuth store.

A package's scripts live in its `lua/` folder: `common.lua` is the shared prelude, put before
every script body. Registered on a redis.asyncio client, each script is a redis-py AsyncScript,
which runs by EVALSHA and loads the script itself when the server answers NOSCRIPT.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from importlib import resources

from redis.commands.core import AsyncScript

from ledger.store.connection import StoreClient

Arg = bytes | str | int


def _unchanged(prelude: str) -> str:
    return prelude


class LuaScripts:
    """The named scripts of one package, each its prelude (`prelude` may render it) then body."""

    def __init__(
        self,
        package: str,
        names: Iterable[str],
        *,
        prelude: Callable[[str], str] = _unchanged,
    ) -> None:
        self.package = package
        self.names = tuple(names)
        self._prelude = prelude
        self._sources: dict[str, str] = {}

    def source(self, name: str) -> str:
        """Return the full source of one script: the shared prelude, then the script body."""
        if name not in self.names:
            raise ValueError(f"no script named {name!r} in {self.package}")
        if name not in self._sources:
            self._sources[name] = self._prelude(self._read("common")) + "\n" + self._read(name)
        return self._sources[name]

    def sha(self, name: str) -> str:
        """Return the SHA-1 Redis uses to name a loaded script."""
        return hashlib.sha1(self.source(name).encode("utf-8")).hexdigest()

    def register(self, client: StoreClient) -> dict[str, AsyncScript]:
        """Return every script registered on a client, by name."""
        return {name: client.register_script(self.source(name)) for name in self.names}

    def _read(self, name: str) -> str:
        return resources.files(self.package).joinpath("lua", f"{name}.lua").read_text("utf-8")
