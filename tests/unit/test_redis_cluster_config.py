"""A Redis Cluster as the ledger store: the +cluster URLs, SEND_LEDGER_WAIT_REPLICAS, and the
loud check-config lines for the durability settings the operator attests to."""

from __future__ import annotations

import pytest

from ledger.store.connection import is_cluster_url
from schemas.secret import Secret
from service.config import check_config_lines
from service.config._urls import RedisTarget, parse_redis_url
from support.config_env import MAILBOX, load, variables

PASSWORD = "s3cr3t-cluster"
REDIS = {**MAILBOX, "ANGELOS_REDIS_URL": "redis://127.0.0.1:6379/0"}
FSYNC_WARNING = (
    "WARNING: SEND_LEDGER_FSYNC=provider_managed: YOU ATTEST that the Redis provider keeps every"
    " acknowledged write through a crash and a failover; angelos cannot read"
    " appendonly/appendfsync there and does not check them"
)
NOEVICTION_WARNING = (
    "WARNING: SEND_LEDGER_ASSUME_NOEVICTION=1: YOU ATTEST that the Redis store never evicts"
    " keys; angelos does not check maxmemory-policy"
)


def accepted(url: str) -> RedisTarget:
    target, problem = parse_redis_url(url)
    assert target is not None, problem
    assert problem == ""
    return target


class TestClusterUrls:
    @pytest.mark.parametrize(
        ("url", "host", "port", "db"),
        [
            ("redis+cluster://127.0.0.1:7000", "127.0.0.1", 7000, None),
            ("redis+cluster://127.0.0.1:7000/0", "127.0.0.1", 7000, 0),
            ("redis+cluster://localhost:7001/", "localhost", 7001, None),
            ("redis+cluster://[::1]:7002", "::1", 7002, None),
            ("REDIS+CLUSTER://127.0.0.1:7003", "127.0.0.1", 7003, None),
        ],
    )
    def test_a_loopback_seed_node_is_a_cluster(
        self, url: str, host: str, port: int, db: int | None
    ) -> None:
        target = accepted(url)
        assert (target.cluster, target.tls, target.host, target.port, target.db) == (
            True,
            False,
            host,
            port,
            db,
        )

    @pytest.mark.parametrize(
        "url",
        [
            "rediss+cluster://cache.example.com:6380",
            "rediss+cluster://cache.example.com/0",
            f"rediss+cluster://default:{PASSWORD}@cache.example.com:6380/0",
            "RediSS+Cluster://cache.example.com",
            "rediss+cluster://10.0.0.5:6380",
        ],
    )
    def test_a_tls_seed_node_anywhere_is_a_cluster(self, url: str) -> None:
        target = accepted(url)
        assert (target.cluster, target.tls) == (True, True)

    @pytest.mark.parametrize(
        "url",
        [
            "redis+cluster://cache.example.com:6379",
            "redis+cluster://10.0.0.5:6379",
            f"redis+cluster://:{PASSWORD}@cache.example.com",
            "redis+cluster://localhost.example.com",
        ],
    )
    def test_plain_cluster_on_a_public_host_is_refused(self, url: str) -> None:
        target, problem = parse_redis_url(url)
        assert target is None
        assert "only allowed for loopback hosts" in problem

    @pytest.mark.parametrize(
        "url",
        [
            "redis+cluster://127.0.0.1:7000/1",
            "rediss+cluster://cache.example.com/2",
            "rediss+cluster://cache.example.com:6380/15",
        ],
    )
    def test_a_database_other_than_zero_is_refused(self, url: str) -> None:
        assert parse_redis_url(url) == (None, "a Redis Cluster has only database 0")

    def test_a_single_server_may_still_name_another_database(self) -> None:
        target = accepted("redis://127.0.0.1:6379/1")
        assert (target.cluster, target.db) == (False, 1)

    @pytest.mark.parametrize(
        "url",
        [
            "redis+sentinel://127.0.0.1:26379",
            "cluster://127.0.0.1:7000",
            "redis+cluster+cluster://127.0.0.1:7000",
            "http+cluster://127.0.0.1:7000",
            "rediss+cluster://cache.example.com?ssl_cert_reqs=none",
        ],
    )
    def test_other_schemes_and_queries_are_refused(self, url: str) -> None:
        target, problem = parse_redis_url(url)
        assert target is None
        assert problem

    @pytest.mark.parametrize(
        ("url", "shown", "has_credentials"),
        [
            (
                f"rediss+cluster://default:{PASSWORD}@cache.example.com:6380/0",
                "rediss+cluster://cache.example.com:6380/0",
                True,
            ),
            (
                f"redis+cluster://:{PASSWORD}@127.0.0.1:7000",
                "redis+cluster://127.0.0.1:7000",
                True,
            ),
            ("redis+cluster://[::1]:7000/0", "redis+cluster://[::1]:7000/0", False),
            ("rediss+cluster://cache.example.com", "rediss+cluster://cache.example.com", False),
            ("rediss://cache.example.com:6380", "rediss://cache.example.com:6380", False),
        ],
    )
    def test_the_redacted_form_shows_the_cluster_scheme_without_credentials(
        self, url: str, shown: str, has_credentials: bool
    ) -> None:
        target = accepted(url)
        assert target.redacted() == shown
        assert target.has_credentials is has_credentials
        assert PASSWORD not in target.redacted()
        assert "@" not in target.redacted()

    @pytest.mark.parametrize(
        ("url", "cluster"),
        [
            ("redis+cluster://127.0.0.1:7000/0", True),
            ("rediss+cluster://cache.example.com:6380", True),
            ("REDISS+CLUSTER://cache.example.com", True),
            ("redis://127.0.0.1:6379/0", False),
            ("rediss://cache.example.com", False),
            ("redis://127.0.0.1:6379/0?name=+cluster", False),
            ("", False),
        ],
    )
    def test_is_cluster_url_reads_the_scheme(self, url: str, cluster: bool) -> None:
        assert is_cluster_url(url) is cluster

    def test_the_loader_keeps_a_cluster_url_and_check_config_shows_it_redacted(self) -> None:
        url = f"rediss+cluster://default:{PASSWORD}@cache.example.com:6380/0"
        config = load(MAILBOX, ANGELOS_REDIS_URL=url)
        assert config.problems == ()
        assert config.store is not None
        assert (config.store.mode, config.store.url) == ("redis", Secret(url))
        lines = check_config_lines(config)
        assert (
            "  ANGELOS_REDIS_URL = rediss+cluster://cache.example.com:6380/0 (credentials set)"
            in lines
        )
        assert not any(PASSWORD in line for line in lines)

    def test_the_loader_names_the_url_for_a_cluster_database(self) -> None:
        config = load(MAILBOX, ANGELOS_REDIS_URL="redis+cluster://127.0.0.1:7000/3")
        assert config.store is None
        assert variables(config.problems) == ["ANGELOS_REDIS_URL"]
        assert "a Redis Cluster has only database 0" in config.problems[0]


class TestWaitReplicas:
    def test_unset_is_zero(self) -> None:
        config = load(REDIS)
        assert config.problems == ()
        assert config.store is not None
        assert config.store.wait_replicas == 0

    @pytest.mark.parametrize(("text", "number"), [("0", 0), ("1", 1), ("2", 2), ("16", 16)])
    def test_a_count_is_loaded(self, text: str, number: int) -> None:
        config = load(REDIS, SEND_LEDGER_WAIT_REPLICAS=text)
        assert config.problems == ()
        assert config.store is not None
        assert config.store.wait_replicas == number

    @pytest.mark.parametrize("text", ["-1", "17", "one", "1.5", " 2x"])
    def test_a_bad_value_is_a_problem_naming_the_variable(self, text: str) -> None:
        config = load(REDIS, SEND_LEDGER_WAIT_REPLICAS=text)
        assert config.store is None
        assert variables(config.problems) == ["SEND_LEDGER_WAIT_REPLICAS"], config.problems

    def test_check_config_shows_the_value(self) -> None:
        lines = check_config_lines(load(REDIS, SEND_LEDGER_WAIT_REPLICAS="2"))
        assert "  SEND_LEDGER_WAIT_REPLICAS = 2" in lines


class TestAttestationWarnings:
    @staticmethod
    def warnings(lines: list[str]) -> list[str]:
        return [line for line in lines if line.startswith("WARNING")]

    def test_both_attestations_print_a_loud_warning_each_before_the_verdict(self) -> None:
        config = load(
            REDIS, SEND_LEDGER_FSYNC="provider_managed", SEND_LEDGER_ASSUME_NOEVICTION="1"
        )
        assert config.problems == ()
        lines = check_config_lines(config)
        assert self.warnings(lines) == [FSYNC_WARNING, NOEVICTION_WARNING]
        assert lines[-3:] == [FSYNC_WARNING, NOEVICTION_WARNING, "No problems found."]

    def test_provider_managed_alone_prints_its_warning(self) -> None:
        lines = check_config_lines(load(REDIS, SEND_LEDGER_FSYNC="provider_managed"))
        assert self.warnings(lines) == [FSYNC_WARNING]

    def test_assume_noeviction_alone_prints_its_warning(self) -> None:
        lines = check_config_lines(load(REDIS, SEND_LEDGER_ASSUME_NOEVICTION="1"))
        assert self.warnings(lines) == [NOEVICTION_WARNING]

    def test_a_cluster_url_warns_the_same(self) -> None:
        config = load(
            REDIS,
            ANGELOS_REDIS_URL="redis+cluster://127.0.0.1:7000/0",
            SEND_LEDGER_FSYNC="provider_managed",
            SEND_LEDGER_ASSUME_NOEVICTION="1",
        )
        assert self.warnings(check_config_lines(config)) == [FSYNC_WARNING, NOEVICTION_WARNING]

    def test_unset_attestations_print_no_warning(self) -> None:
        lines = check_config_lines(load(REDIS))
        assert self.warnings(lines) == []
        assert lines[-1] == "No problems found."

    def test_switched_off_noeviction_prints_no_warning(self) -> None:
        lines = check_config_lines(load(REDIS, SEND_LEDGER_ASSUME_NOEVICTION="0"))
        assert self.warnings(lines) == []

    def test_without_a_redis_url_nothing_is_attested(self) -> None:
        """The embedded store is angelos's own: the settings are set there, not attested."""
        lines = check_config_lines(
            load(MAILBOX, SEND_LEDGER_FSYNC="provider_managed", SEND_LEDGER_ASSUME_NOEVICTION="1")
        )
        assert self.warnings(lines) == []
