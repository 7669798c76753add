"""A private Redis Cluster (scripts/test-redis-cluster) with the faults a cluster operator meets:
the primary of the ledger's slot killed or paused, its replica promoted, the old node back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import redis
from redis.cluster import key_slot

from support.angelos_process import ROOT

SCRIPT = ROOT / "scripts" / "test-redis-cluster"


def exported(text: str) -> dict[str, str]:
    """The variables of the script's `export NAME=value` lines."""
    values = {}
    for line in text.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        values[name] = value.strip('"')
    return values


class ControlledCluster:
    """3 primaries (and `replicas` each) on loopback; faults aimed at the node serving `key`."""

    def __init__(self, key: str, *, replicas: int = 1, node_timeout_ms: int = 3000) -> None:
        self.slot = key_slot(key.encode())
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.dir: Path | None = None
        self.nodes: list[str] = []
        self.down: list[str] = []  # nodes killed and not restarted
        self.paused: list[str] = []

    @property
    def url(self) -> str:
        """ANGELOS_REDIS_URL for the cluster, seeded by every node's first (alive) one."""
        alive = [n for n in self.nodes if n not in self.down]
        return f"redis+cluster://{alive[0]}/0"

    def start(self, tries: int = 3) -> None:
        """Form the cluster; a port another process took between the script's pick and a
        node's bind fails that try, and the next picks again (RuntimeError after `tries`)."""
        for _ in range(tries):
            started = subprocess.run(
                [str(SCRIPT), "start", "--replicas", str(self.replicas),
                 "--node-timeout", str(self.node_timeout_ms)],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            if started.returncode == 0:
                break
        else:
            raise RuntimeError(f"the Redis Cluster did not form: {started.stderr[-400:]}")
        values = exported(started.stdout)
        self.dir = Path(values["MAILTEST_CLUSTER_DIR"])
        self.nodes = values["MAILTEST_CLUSTER_NODES"].split()

    def stop(self) -> None:
        """Stop every node (a paused one is resumed first) and remove the directory."""
        for node in self.paused:
            self._signal(node, signal.SIGCONT)
        if self.dir is not None:
            subprocess.run([str(SCRIPT), "stop", str(self.dir)], timeout=60, check=False)

    # ------------------------------------------------------------------ what the cluster says

    def primary(self) -> str:
        """The node serving the slot now, as an alive node reports it."""
        for node in self.nodes:
            if node in self.down or node in self.paused:
                continue
            try:
                with self._client(node) as client:
                    slots = client.execute_command("CLUSTER", "SLOTS")
                for start, end, (host, port, *_), *_ in slots:
                    if int(start) <= self.slot <= int(end):
                        return f"{_text(host)}:{int(port)}"
            except redis.RedisError:
                continue
        raise RuntimeError("no alive node reports the ledger slot's primary")

    def replicas_of(self, node: str) -> int:
        """How many replicas are connected to `node` now."""
        with self._client(node) as client:
            info = client.info("replication")
        return int(info.get("connected_slaves", 0))

    # ------------------------------------------------------------------ faults

    def kill_primary(self) -> str:
        """SIGKILL the slot's primary (a crash); return its name."""
        node = self.primary()
        self._signal(node, signal.SIGKILL)
        self.down.append(node)
        return node

    def pause_primary(self) -> str:
        """SIGSTOP the slot's primary; return its name."""
        node = self.primary()
        self._signal(node, signal.SIGSTOP)
        self.paused.append(node)
        return node

    def resume(self) -> None:
        """SIGCONT every paused node."""
        for node in self.paused:
            self._signal(node, signal.SIGCONT)
        self.paused.clear()

    def await_failover(self, old: str, within_s: float = 60) -> str:
        """Wait until another node serves the slot and answers writes; return it."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                node = self.primary()
                if node != old:
                    with self._client(node) as client:
                        if client.cluster("INFO")["cluster_state"] == "ok":
                            return node
            except (RuntimeError, redis.RedisError):
                pass
            time.sleep(0.1)
        raise RuntimeError("no replica took over the ledger slot in time")

    def restart_down(self, within_s: float = 60) -> None:
        """Start the killed nodes again; each rejoins as a replica of the new primary."""
        assert self.dir is not None
        for node in self.down:
            port = node.rsplit(":", 1)[1]
            subprocess.run(
                ["redis-server", str(self.dir / port / "redis.conf")],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=True,
            )  # fmt: skip
        self.down.clear()
        self.await_replicas(within_s)

    def await_replicas(self, within_s: float = 60) -> None:
        """Wait until the slot's primary has all its replicas connected again."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                if self.replicas_of(self.primary()) >= self.replicas:
                    return
            except (RuntimeError, redis.RedisError):
                pass
            time.sleep(0.1)
        raise RuntimeError("the slot's primary did not get its replicas back in time")

    def _signal(self, node: str, sig: signal.Signals) -> None:
        assert self.dir is not None
        port = node.rsplit(":", 1)[1]
        pid = int((self.dir / port / "redis.pid").read_text())
        os.kill(pid, sig)

    @staticmethod
    def _client(node: str) -> redis.Redis:
        host, port = node.rsplit(":", 1)
        return redis.Redis(host=host, port=int(port), socket_timeout=2, socket_connect_timeout=2)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
