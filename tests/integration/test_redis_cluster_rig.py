"""The real Redis Cluster the cluster tests will run on: formed, durable, single-slot scripts."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from support.redis_cluster import SCRIPT, exported

ONE_SLOT = "return redis.call('SET', KEYS[1], ARGV[1]) and redis.call('INCR', KEYS[2])"


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    started = subprocess.run(
        [str(SCRIPT), "start"], capture_output=True, text=True, timeout=120, check=True
    )
    values = exported(started.stdout)
    try:
        yield values
    finally:
        subprocess.run(
            [str(SCRIPT), "stop", values["MAILTEST_CLUSTER_DIR"]], timeout=60, check=True
        )


def test_three_primaries_cover_every_slot_with_aof_always(cluster: dict[str, str]) -> None:
    nodes = cluster["MAILTEST_CLUSTER_NODES"].split()
    assert 3 == len(nodes)
    for node in nodes:
        host, port = node.split(":")
        client = redis.Redis(host=host, port=int(port))
        try:
            info = client.cluster("INFO")
            config = client.config_get("append*")
        finally:
            client.close()
        assert "ok" == info["cluster_state"] and 16384 == int(info["cluster_slots_assigned"])
        assert {"appendonly": "yes", "appendfsync": "always"} == {
            k: config[k] for k in ("appendonly", "appendfsync")
        }


def test_a_script_runs_only_on_keys_of_one_hash_tag(cluster: dict[str, str]) -> None:
    host, port = cluster["MAILTEST_CLUSTER_NODES"].split()[0].split(":")
    client = RedisCluster(host=host, port=int(port))
    try:
        assert 1 == client.eval(ONE_SLOT, 2, "{ns}:stream", "{ns}:clock", "x")
        with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
            client.eval(ONE_SLOT, 2, "ns:stream", "other:clock", "x")
    finally:
        client.close()


def test_stop_leaves_no_node_and_no_directory() -> None:
    started = subprocess.run(
        [str(SCRIPT), "start"], capture_output=True, text=True, timeout=120, check=True
    )
    values = exported(started.stdout)
    directory = Path(values["MAILTEST_CLUSTER_DIR"])
    pids = [int((path / "redis.pid").read_text()) for path in directory.iterdir() if path.is_dir()]
    assert 3 == len(pids)
    subprocess.run([str(SCRIPT), "stop", str(directory)], timeout=60, check=True)
    assert not directory.exists()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
