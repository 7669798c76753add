"""A private redis-server with the faults a Redis operator meets: crash, clean stop, pause, OOM,
run-time config changes and an AOF rolled back to an earlier moment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from support.angelos_process import free_port

# Redis 7.0 keeps a multi-part AOF in <dir>/appendonlydir/: appendonly.aof.<n>.base.rdb (the
# last rewrite, RDB preamble), appendonly.aof.<n>.incr.aof (commands since) and
# appendonly.aof.manifest naming both; a rewrite switches to <n+1> and deletes the old pair.
AOF_DIRNAME = "appendonlydir"
OOM_PROBE_KEY = "controlled-redis:oom-probe"


class ControlledRedis:
    """A redis-server (AOF, appendfsync always, noeviction) on a free loopback port and own dir."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.log_path = directory / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._snapshots = 0

    @property
    def url(self) -> str:
        """Return its redis:// URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def aof_dir(self) -> Path:
        """Return the directory holding the multi-part AOF."""
        return self.dir / AOF_DIRNAME

    @property
    def running(self) -> bool:
        """Return whether the process exists (paused counts as running)."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start (or restart) on the same port and directory; return once PING answers."""
        if self.running:
            raise RuntimeError("the controlled redis-server is already running")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--maxmemory-policy", "noeviction", "--dir", str(self.dir.resolve()),
             "--logfile", str(self.log_path.resolve())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._wait_ping(within=30)

    def kill(self) -> None:
        """SIGKILL it (a crash: only what the AOF holds survives) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def shutdown(self) -> None:
        """Stop it cleanly with SHUTDOWN through redis-cli and wait for the process to exit."""
        if not self.running:
            return
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)  # a paused server could not answer
        subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), "shutdown"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        self.proc.wait(30)

    def pause(self) -> None:
        """SIGSTOP it; return once the kernel reports it stopped."""
        assert self.proc is not None and self.running
        os.kill(self.proc.pid, signal.SIGSTOP)
        self._wait_state("T")

    def resume(self) -> None:
        """SIGCONT it; return once PING answers again."""
        assert self.proc is not None and self.running
        os.kill(self.proc.pid, signal.SIGCONT)
        self._wait_ping(within=30)

    def oom(self, on: bool) -> None:
        """While on, every denyoom (memory-growing) command fails with OOM; off restores service.

        Commands that free memory (DEL, UNLINK, EXPIRE, XDEL, ...) and read-only commands still
        run; a Lua script fails at its first write (`-OOM ... script: ...`).
        """
        with self._admin() as admin:
            admin.config_set("maxmemory", "1" if on else "0")
            if not on:
                return
            try:
                admin.set(OOM_PROBE_KEY, "x")
            except redis.exceptions.OutOfMemoryError:
                return
            admin.delete(OOM_PROBE_KEY)
        raise RuntimeError("maxmemory 1 did not make writes fail with OOM")

    def config_set(self, name: str, value: str) -> None:
        """CONFIG SET name value at run time (an AOF rewrite it starts has finished on return)."""
        with self._admin() as admin:
            admin.config_set(name, value)
            self._settle_aof(admin)

    def snapshot_aof(self) -> Path:
        """Copy the AOF as it is now into a new directory and return that directory.

        Measured on 7.0.15 (100 copies per method, two threads writing pipelined SETs, each
        copy then loaded with aof-load-truncated no): a plain copy of the running server's
        appendonlydir tore the incr file mid-command 3 times (and in a heavier run one copy
        failed outright: an automatic rewrite deleted a file between listing and copying);
        copying right after a
        BGREWRITEAOF settles tore 1 (writes that follow the rewrite race the copy the same
        way). Copying while the process is held stopped (SIGSTOP) tore none: SIGSTOP never
        splits a write(2), the main thread only ever replaces the manifest by an atomic rename,
        and the bio threads stop too, so the copy ends on a command boundary. A rewrite child
        is not stopped, but it only writes temp-rewriteaof-<pid>.aof beside appendonlydir; any
        rewrite is still let settle first, so the copy holds one base and one incr file.
        """
        self._snapshots += 1
        target = self.dir / "aof-snapshots" / str(self._snapshots)
        if not self.running or self._state() == "T":
            shutil.copytree(self.aof_dir, target)
            return target
        with self._admin() as admin:
            self._settle_aof(admin)
        self.pause()
        try:
            shutil.copytree(self.aof_dir, target)
        finally:
            self.resume()
        return target

    def restore_aof(self, snapshot: Path) -> None:
        """With the server stopped, replace its AOF by a snapshot: the next start loads that."""
        if self.running:
            raise RuntimeError("stop the controlled redis-server before restoring its AOF")
        shutil.rmtree(self.aof_dir, ignore_errors=True)
        shutil.copytree(snapshot, self.aof_dir)

    def stop(self) -> None:
        """Stop it for good (SIGKILL)."""
        self.kill()

    def log(self) -> str:
        """Return the server's log so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _admin(self, timeout: float = 10) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )

    def _settle_aof(self, admin: redis.Redis, within: float = 30) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            info = admin.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                return
            time.sleep(0.02)
        raise RuntimeError("the AOF rewrite did not finish")

    def _wait_ping(self, within: float) -> None:
        deadline = time.monotonic() + within
        with self._admin(timeout=1) as admin:
            while True:
                try:
                    if admin.ping():
                        break
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                    pass  # not listening yet, or still loading the AOF (BusyLoadingError)
                if not self.running or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer: {self.log()[-2000:]}")
                time.sleep(0.02)
            pid = admin.info("server")["process_id"]
        if self.proc is None or pid != self.proc.pid:
            raise RuntimeError(f"127.0.0.1:{self.port} answers, but from another redis-server")

    def _state(self) -> str:
        """The kernel's state letter: T once every thread (bio ones too) has stopped, X if gone."""
        assert self.proc is not None
        try:
            states = {
                stat.read_text().rsplit(")", 1)[1].split()[0]
                for stat in Path(f"/proc/{self.proc.pid}/task").glob("*/stat")
            }
        except OSError:
            return "X"
        if not states:
            return "X"
        return "T" if states == {"T"} else "R"

    def _wait_state(self, wanted: str, within: float = 10) -> None:
        deadline = time.monotonic() + within
        while self._state() != wanted:
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not reach state {wanted}")
            time.sleep(0.005)


@contextlib.contextmanager
def controlled_redis(directory: Path) -> Iterator[ControlledRedis]:
    """A started ControlledRedis that is always killed afterwards (resumed or not)."""
    server = ControlledRedis(directory)
    try:
        server.start()
        yield server
    finally:
        server.stop()
