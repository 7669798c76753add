"""Configuration: gates, mailbox rules (docs/configuration.md) and the operator report.

Acceptance checks covered here (docs/acceptance/auth-config.md): 5, 46, 47, 48, 49, 50 and the
config side of R1.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from schemas.secret import Secret
from service.config import (
    Config,
    GraphAccount,
    OAuthLogin,
    check_config_lines,
    describe,
    load_config,
)
from support.config_env import load

PASSWORD = "pw-Zq8#kR2!xV"
REDIS_PASSWORD = "redis-pw-7yT3"
HMAC_KEY = "ab" * 32
BASE = {"MAIL_USERNAME": "owner@example.com", "MAIL_PASSWORD": PASSWORD, "HOME": "/home/owner"}
ICLOUD = {**BASE, "MAIL_PROVIDER": "icloud", "MAIL_AUTH_MODE": "app_password"}
YAHOO = {**BASE, "MAIL_PROVIDER": "yahoo", "MAIL_AUTH_MODE": "app_password"}
GMAIL_APP = {**BASE, "MAIL_PROVIDER": "gmail", "MAIL_AUTH_MODE": "app_password"}
GOOGLE = {
    "GOOGLE_CLIENT_ID": "client-1.apps.googleusercontent.com",
    "GOOGLE_CLIENT_SECRET": "google-secret",
    "GOOGLE_REFRESH_TOKEN": "1//refresh-token",
}
GMAIL_OAUTH = {"MAIL_USERNAME": "owner@gmail.com", "MAIL_PROVIDER": "gmail", **GOOGLE}
MICROSOFT = {
    "MAIL_PROVIDER": "microsoft",
    "MAIL_USERNAME": "owner@outlook.com",
    "MICROSOFT_CLIENT_ID": "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1",
    "MICROSOFT_CLIENT_SECRET": "ms-secret",
    "MICROSOFT_REFRESH_TOKEN": "ms-refresh",
    "MICROSOFT_TENANT_ID": "consumers",
    "MICROSOFT_ACCOUNT_ID": "00000000-0000-0000-0000-000000000001",
    "MICROSOFT_TOKEN_ENCRYPTION_KEY": "0f" * 32,
}
CUSTOM = {**BASE, "MAIL_PROVIDER": "custom", "IMAP_HOST": "localhost", "SMTP_HOST": "localhost"}


def variables(config: Config) -> list[str]:
    """Return the variable named by each problem line."""
    return [problem.split(":", 1)[0] for problem in config.problems]


def assert_rejected(config: Config, variable: str) -> None:
    """The mailbox is unusable and one problem line names the variable, without the password."""
    assert config.mail is None
    assert variable in variables(config), config.problems
    for problem in config.problems:
        assert PASSWORD not in problem
        assert "\n" not in problem and "\r" not in problem


class TestGates:
    @pytest.mark.parametrize("value", ["", "true", "yes", "0", "on", " 1", "1 ", "01", "TRUE"])
    @pytest.mark.parametrize(
        "variable", ["MAIL_ENABLE_WRITES", "MAIL_ENABLE_SEND", "MAIL_ENABLE_DELETE"]
    )
    def test_only_the_exact_value_1_enables_a_gate(self, variable: str, value: str) -> None:
        """Check 5: anything but "1" leaves the gate off."""
        gates = load(BASE, **{variable: value}).gates
        assert (gates.writes, gates.send, gates.delete) == (False, False, False)

    def test_gates_are_independent(self) -> None:
        """Each "1" enables exactly its own gate."""
        gates = load(BASE, MAIL_ENABLE_SEND="1", MAIL_ENABLE_DELETE="1").gates
        assert (gates.writes, gates.send, gates.delete) == (False, True, True)

    def test_gates_are_off_by_default(self) -> None:
        """No variable, no capability."""
        gates = load(BASE).gates
        assert (gates.writes, gates.send, gates.delete) == (False, False, False)


class TestDefaults:
    def test_username_and_password_alone_give_spacemail(self) -> None:
        """Check 47: spacemail IMAP mail.spacemail.com:993 tls, SMTP :465 tls, 30 s timeout."""
        config = load(BASE)
        assert config.problems == ()
        mail = config.mail
        assert mail is not None
        assert (mail.provider, mail.auth_mode) == ("spacemail", "password")
        assert (mail.imap_host, mail.imap_port) == ("mail.spacemail.com", 993)
        assert (
            mail.smtp_host,
            mail.smtp_port,
            mail.smtp_tls_mode,
        ) == ("mail.spacemail.com", 465, "tls")
        assert mail.timeout_s == 30.0
        assert mail.from_addr == "owner@example.com"
        assert Secret(PASSWORD) == mail.password
        assert mail.aliases == ()
        assert (mail.tls_ca_file, mail.allow_private_hosts) == (None, False)
        assert (mail.gmail_imap, mail.smtp_stores_sent) == (False, False)

    def test_custom_smtp_port_587_infers_starttls(self) -> None:
        """Check 47: custom with SMTP_PORT=587 uses STARTTLS."""
        mail = load(CUSTOM, SMTP_PORT="587").mail
        assert mail is not None
        assert (mail.smtp_port, mail.smtp_tls_mode) == (587, "starttls")

    @pytest.mark.parametrize("mode", ["tls", "starttls"])
    def test_custom_ports_accept_either_tls_mode(self, mode: str) -> None:
        """Check 47: custom ports 1993/1587 work with either SMTP TLS mode."""
        mail = load(CUSTOM, IMAP_PORT="1993", SMTP_PORT="1587", SMTP_TLS_MODE=mode).mail
        assert mail is not None
        assert (1993, 1587, mode) == (mail.imap_port, mail.smtp_port, mail.smtp_tls_mode)

    def test_custom_other_port_defaults_to_tls(self) -> None:
        """A port other than 587 defaults to implicit TLS."""
        mail = load(CUSTOM, SMTP_PORT="2465").mail
        assert mail is not None
        assert mail.smtp_tls_mode == "tls"

    def test_localhost_is_an_acceptable_custom_host(self) -> None:
        """Test setups point IMAP_HOST/SMTP_HOST at localhost (a DNS name, not an IP literal)."""
        mail = load(CUSTOM, MAIL_ALLOW_PRIVATE_HOSTS="1").mail
        assert mail is not None
        assert (
            mail.imap_host,
            mail.smtp_host,
            mail.allow_private_hosts,
        ) == ("localhost", "localhost", True)

    def test_spacemail_hosts_and_ports_can_be_overridden(self) -> None:
        """spacemail is the one preset whose hosts may change."""
        mail = load(BASE, IMAP_HOST="imap.example.net", SMTP_HOST="smtp.example.net").mail
        assert mail is not None
        assert (mail.imap_host, mail.smtp_host) == ("imap.example.net", "smtp.example.net")

    def test_empty_values_count_as_unset(self) -> None:
        """An empty variable takes the default, as an unset one does."""
        config = load(BASE, MAIL_PROVIDER="", IMAP_PORT="", SMTP_TLS_MODE="", MAIL_TIMEOUT="")
        assert config.problems == ()

    @pytest.mark.parametrize("value", ["0", "", "true", "yes"])
    def test_private_hosts_need_exactly_1(self, value: str) -> None:
        """MAIL_ALLOW_PRIVATE_HOSTS follows the gate rule."""
        mail = load(BASE, MAIL_ALLOW_PRIVATE_HOSTS=value).mail
        assert mail is not None
        assert mail.allow_private_hosts is False


class TestMailboxRejects:
    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"MAIL_USERNAME": ""}, "MAIL_USERNAME"),
            ({"MAIL_USERNAME": None}, "MAIL_USERNAME"),
            ({"MAIL_USERNAME": "owner@example.com\r\n"}, "MAIL_USERNAME"),
            ({"IMAP_HOST": "127.0.0.1"}, "IMAP_HOST"),
            ({"IMAP_HOST": "::1"}, "IMAP_HOST"),
            ({"IMAP_HOST": "[::1]"}, "IMAP_HOST"),
            ({"IMAP_HOST": "127.1"}, "IMAP_HOST"),
            ({"IMAP_HOST": "https://mail.example.com"}, "IMAP_HOST"),
            ({"IMAP_HOST": "mail.example.com\r\nX: y"}, "IMAP_HOST"),
            ({"SMTP_HOST": "mail.example.com:465"}, "SMTP_HOST"),
            ({"SMTP_HOST": "user@mail.example.com"}, "SMTP_HOST"),
            ({"SMTP_HOST": "-mail.example.com"}, "SMTP_HOST"),
            ({"SMTP_HOST": "mail..example.com"}, "SMTP_HOST"),
            ({"SMTP_HOST": "mail.example.com."}, "SMTP_HOST"),
            ({"SMTP_HOST": "mail_1.example.com"}, "SMTP_HOST"),
            ({"SMTP_HOST": "a" * 64 + ".example.com"}, "SMTP_HOST"),
            ({"SMTP_TLS_MODE": "plain"}, "SMTP_TLS_MODE"),
            ({"SMTP_TLS_MODE": "TLS"}, "SMTP_TLS_MODE"),
            ({"SMTP_PORT": "587", "SMTP_TLS_MODE": "tls"}, "SMTP_TLS_MODE"),
            ({"SMTP_PORT": "465", "SMTP_TLS_MODE": "starttls"}, "SMTP_TLS_MODE"),
            ({"MAIL_TIMEOUT": "5m"}, "MAIL_TIMEOUT"),
            ({"MAIL_FROM": "owner@example.com\r\nBcc: x@example.org"}, "MAIL_FROM"),
            ({"MAIL_FROM": "Owner <owner@example.com>"}, "MAIL_FROM"),
            ({"IMAP_PORT": "-1"}, "IMAP_PORT"),
            ({"IMAP_PORT": "0"}, "IMAP_PORT"),
            ({"IMAP_PORT": "65536"}, "IMAP_PORT"),
            ({"IMAP_PORT": "imap"}, "IMAP_PORT"),
            ({"SMTP_PORT": "+465"}, "SMTP_PORT"),
            ({"SMTP_PORT": "\u0664\u0666\u0665"}, "SMTP_PORT"),
            ({"MAIL_PASSWORD": None}, "MAIL_PASSWORD"),
            ({"MAIL_PASSWORD": PASSWORD + "\n"}, "MAIL_PASSWORD"),
            ({"MAIL_PASSWORD": PASSWORD + "\x00"}, "MAIL_PASSWORD"),
            ({"MAIL_PROVIDER": "hotmail"}, "MAIL_PROVIDER"),
            ({"MAIL_PROVIDER": "Spacemail"}, "MAIL_PROVIDER"),
            ({"MAIL_AUTH_MODE": "oauth2"}, "MAIL_AUTH_MODE"),
            ({"MAIL_AUTH_MODE": "app_password"}, "MAIL_AUTH_MODE"),
        ],
    )
    def test_spacemail_rejects(self, changes: dict[str, str | None], variable: str) -> None:
        """Check 46: each bad value is rejected, naming its variable, never echoing the password."""
        assert_rejected(load(BASE, **changes), variable)

    def test_custom_requires_both_hosts(self) -> None:
        """custom has no preset hosts."""
        config = load(CUSTOM, IMAP_HOST=None, SMTP_HOST="")
        assert_rejected(config, "IMAP_HOST")
        assert "SMTP_HOST" in variables(config)

    def test_every_problem_is_collected(self) -> None:
        """Loading does not stop at the first problem."""
        config = load(
            BASE, MAIL_USERNAME=None, IMAP_PORT="x", SMTP_TLS_MODE="plain", MAIL_TIMEOUT="0s"
        )
        assert {"MAIL_USERNAME", "IMAP_PORT", "SMTP_TLS_MODE", "MAIL_TIMEOUT"} <= set(
            variables(config)
        )

    def test_non_address_username_needs_an_explicit_from(self) -> None:
        """A login name that is not an address cannot be the sender."""
        assert_rejected(load(CUSTOM, MAIL_USERNAME="owner"), "MAIL_FROM")
        mail = load(CUSTOM, MAIL_USERNAME="owner", MAIL_FROM="owner@example.com").mail
        assert mail is not None
        assert (mail.username, mail.from_addr) == ("owner", "owner@example.com")


class TestSmtpMaxConnections:
    def test_four_connections_unless_configured(self) -> None:
        mail = load(BASE).mail
        assert mail is not None
        assert 4 == mail.smtp_max_connections

    @pytest.mark.parametrize("value", ["1", "7", "32"])
    def test_one_to_thirty_two_are_accepted(self, value: str) -> None:
        mail = load(BASE, SMTP_MAX_CONNECTIONS=value).mail
        assert mail is not None
        assert int(value) == mail.smtp_max_connections

    @pytest.mark.parametrize("value", ["0", "33", "-1", "4.0", "four", " 4", "\u0664"])
    def test_anything_else_is_a_problem_naming_the_variable(self, value: str) -> None:
        assert_rejected(load(BASE, SMTP_MAX_CONNECTIONS=value), "SMTP_MAX_CONNECTIONS")

    def test_check_config_shows_the_effective_value(self) -> None:
        lines = check_config_lines(load(BASE, SMTP_MAX_CONNECTIONS="6"))
        assert "  SMTP_MAX_CONNECTIONS = 6" in lines


class TestTimeout:
    @pytest.mark.parametrize(
        ("value", "seconds"),
        [
            ("1s", 1.0),
            ("2m", 120.0),
            ("1m30s", 90.0),
            ("90s", 90.0),
            ("1.5s", 1.5),
            ("1000ms", 1.0),
            ("+45s", 45.0),
            ("0.5m", 30.0),
            ("1m0.5s", 60.5),
            ("1999999us", 1.999),
        ],
    )
    def test_go_durations_between_1s_and_2m(self, value: str, seconds: float) -> None:
        """MAIL_TIMEOUT takes Go duration syntax within 1 s..2 min."""
        mail = load(BASE, MAIL_TIMEOUT=value).mail
        assert mail is not None
        assert seconds == mail.timeout_s

    @pytest.mark.parametrize(
        "value",
        [
            "0",
            "0s",
            "999ms",
            "2m1s",
            "5m",
            "1h",
            "-30s",
            "30",
            "s",
            ".s",
            "1.5",
            "30 s",
            "30s ",
            "1e3ms",
            "3O s",
            "\u0663\u0660s",
        ],
    )
    def test_other_values_are_rejected(self, value: str) -> None:
        """Out of range or not a Go duration."""
        assert_rejected(load(BASE, MAIL_TIMEOUT=value), "MAIL_TIMEOUT")


class TestFromAndAliases:
    def test_explicit_from(self) -> None:
        """MAIL_FROM replaces the username as sender."""
        mail = load(BASE, MAIL_FROM="sales@example.com").mail
        assert mail is not None
        assert mail.from_addr == "sales@example.com"

    def test_aliases_are_trimmed_items(self) -> None:
        """Comma-separated, each item trimmed and kept in order."""
        mail = load(BASE, MAIL_ALIASES=" a@example.com ,b@example.org").mail
        assert mail is not None
        assert mail.aliases == ("a@example.com", "b@example.org")

    @pytest.mark.parametrize(
        "value",
        [
            "a@example.com,A@EXAMPLE.COM",
            "a@example.com,",
            "a@example.com,,b@example.com",
            "Alias <a@example.com>",
            "not-an-address",
            "a@example.com\tb@example.com",
            ",".join(f"user{i}@example.com" for i in range(51)),
            "a@example.com," + "x" * 16400,
        ],
    )
    def test_bad_aliases_are_rejected(self, value: str) -> None:
        """Duplicates (case-insensitive), empty or non-bare items, controls, > 50, > 16 KiB."""
        assert_rejected(load(BASE, MAIL_ALIASES=value), "MAIL_ALIASES")

    def test_fifty_aliases_are_accepted(self) -> None:
        """50 is the limit, inclusive."""
        mail = load(BASE, MAIL_ALIASES=",".join(f"user{i}@example.com" for i in range(50))).mail
        assert mail is not None
        assert len(mail.aliases) == 50


class TestCaFile:
    def test_existing_readable_file_is_kept(self, tmp_path: Path) -> None:
        """MAIL_TLS_CA_FILE names a CA bundle the mail clients add to the trust store."""
        bundle = tmp_path / "ca.pem"
        bundle.write_text("-----BEGIN CERTIFICATE-----\n")
        mail = load(BASE, MAIL_TLS_CA_FILE=str(bundle)).mail
        assert mail is not None
        assert str(bundle) == mail.tls_ca_file

    @pytest.mark.parametrize("name", ["missing.pem", "", "nul\x00.pem"])
    def test_missing_file_or_directory_is_rejected(self, tmp_path: Path, name: str) -> None:
        """A path that is not a readable file is bad configuration."""
        assert_rejected(load(BASE, MAIL_TLS_CA_FILE=str(tmp_path / name)), "MAIL_TLS_CA_FILE")


class TestICloudAndYahoo:
    @pytest.mark.parametrize("base", [ICLOUD, YAHOO], ids=["icloud", "yahoo"])
    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"MAIL_AUTH_MODE": "password"}, "MAIL_AUTH_MODE"),
            ({"MAIL_AUTH_MODE": "google_oauth2"}, "MAIL_AUTH_MODE"),
            ({"MAIL_AUTH_MODE": "oauth2"}, "MAIL_AUTH_MODE"),
            ({"MAIL_PASSWORD": None}, "MAIL_PASSWORD"),
            ({"GOOGLE_CLIENT_ID": "client"}, "GOOGLE_CLIENT_ID"),
            ({"GOOGLE_REFRESH_TOKEN": "token"}, "GOOGLE_REFRESH_TOKEN"),
            ({"MAIL_USERNAME": "person"}, "MAIL_USERNAME"),
            ({"MAIL_USERNAME": "Person <person@example.com>"}, "MAIL_USERNAME"),
            ({"IMAP_HOST": "imap.example.com"}, "IMAP_HOST"),
            ({"SMTP_HOST": "smtp.example.com"}, "SMTP_HOST"),
            ({"IMAP_PORT": "143"}, "IMAP_PORT"),
            ({"SMTP_PORT": "25"}, "SMTP_PORT"),
            ({"SMTP_TLS_MODE": "plain"}, "SMTP_TLS_MODE"),
        ],
    )
    def test_rejects(
        self, base: dict[str, str], changes: dict[str, str | None], variable: str
    ) -> None:
        """Check 48: app-password providers keep their pinned endpoints and bare-address login."""
        assert_rejected(load(base, **changes), variable)

    def test_icloud_defaults_to_587_starttls(self) -> None:
        """iCloud's preset SMTP is smtp.mail.me.com:587 STARTTLS."""
        config = load(ICLOUD)
        assert config.problems == ()
        mail = config.mail
        assert mail is not None
        assert (mail.imap_host, mail.imap_port) == ("imap.mail.me.com", 993)
        assert (
            mail.smtp_host,
            mail.smtp_port,
            mail.smtp_tls_mode,
        ) == ("smtp.mail.me.com", 587, "starttls")

    def test_icloud_rejects_465_tls(self) -> None:
        """Check 48: iCloud 465/tls is rejected."""
        assert_rejected(load(ICLOUD, SMTP_PORT="465", SMTP_TLS_MODE="tls"), "SMTP_PORT")

    def test_icloud_auth_mode_defaults_to_app_password(self) -> None:
        """The default auth mode of icloud is app_password."""
        mail = load(ICLOUD, MAIL_AUTH_MODE=None).mail
        assert mail is not None
        assert mail.auth_mode == "app_password"

    def test_yahoo_accepts_587_starttls(self) -> None:
        """Check 48: Yahoo SMTP_PORT=587 is accepted with STARTTLS."""
        mail = load(YAHOO, SMTP_PORT="587").mail
        assert mail is not None
        assert (
            mail.smtp_host,
            mail.smtp_port,
            mail.smtp_tls_mode,
        ) == ("smtp.mail.yahoo.com", 587, "starttls")

    def test_yahoo_defaults_to_465_tls(self) -> None:
        """Yahoo's preset SMTP is smtp.mail.yahoo.com:465 TLS."""
        mail = load(YAHOO).mail
        assert mail is not None
        assert (
            mail.imap_host,
            mail.smtp_port,
            mail.smtp_tls_mode,
        ) == ("imap.mail.yahoo.com", 465, "tls")

    def test_preset_host_spelled_out_is_not_an_override(self) -> None:
        """Naming the preset host itself (any case) is accepted."""
        assert load(YAHOO, IMAP_HOST="IMAP.mail.yahoo.com").problems == ()


class TestGmail:
    def test_app_password_is_accepted_with_gmail_safeguards(self) -> None:
        """gmail + app_password is usable; Gmail IMAP safeguards and automatic Sent apply."""
        config = load(GMAIL_APP)
        assert config.problems == ()
        mail = config.mail
        assert mail is not None
        assert (
            mail.imap_host,
            mail.imap_port,
            mail.smtp_host,
            mail.smtp_port,
        ) == ("imap.gmail.com", 993, "smtp.gmail.com", 465)
        assert (mail.gmail_imap, mail.smtp_stores_sent) == (True, True)

    def test_587_starttls_is_accepted(self) -> None:
        """smtp.gmail.com:587 with STARTTLS is the other pinned endpoint."""
        mail = load(GMAIL_APP, SMTP_PORT="587").mail
        assert mail is not None
        assert mail.smtp_tls_mode == "starttls"

    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"IMAP_HOST": "imap.example.com"}, "IMAP_HOST"),
            ({"SMTP_HOST": "smtp.googlemail.com"}, "SMTP_HOST"),
            ({"SMTP_PORT": "25"}, "SMTP_PORT"),
            ({"IMAP_PORT": "143"}, "IMAP_PORT"),
            ({"MAIL_USERNAME": "owner"}, "MAIL_USERNAME"),
            ({"GOOGLE_CLIENT_ID": "client"}, "GOOGLE_CLIENT_ID"),
            ({"GOOGLE_CLIENT_SECRET": "secret"}, "GOOGLE_CLIENT_SECRET"),
        ],
    )
    def test_app_password_rejects(self, changes: dict[str, str | None], variable: str) -> None:
        """Check 49: host overrides, port 25 and Google values with app_password are rejected."""
        assert_rejected(load(GMAIL_APP, **changes), variable)

    def test_google_oauth2_is_the_gmail_default(self) -> None:
        """google_oauth2 (the gmail default) loads its grant; secrets stay wrapped."""
        config = load(GMAIL_OAUTH)
        mail = config.mail
        assert config.problems == () and mail is not None
        assert (mail.auth_mode, mail.password) == ("google_oauth2", None)
        assert mail.smtp_stores_sent is True
        assert mail.oauth is not None and mail.oauth.issuer == "google"
        assert mail.oauth.refresh_token.reveal() == GOOGLE["GOOGLE_REFRESH_TOKEN"]
        assert GOOGLE["GOOGLE_REFRESH_TOKEN"] not in repr(mail)
        assert GOOGLE["GOOGLE_CLIENT_SECRET"] not in repr(mail)
        assert (mail.imap_host, mail.smtp_host) == ("imap.gmail.com", "smtp.gmail.com")

    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"MAIL_PASSWORD": PASSWORD}, "MAIL_PASSWORD"),
            ({"GOOGLE_CLIENT_ID": None}, "GOOGLE_CLIENT_ID"),
            ({"GOOGLE_CLIENT_SECRET": " "}, "GOOGLE_CLIENT_SECRET"),
            ({"GOOGLE_REFRESH_TOKEN": "1//token with space"}, "GOOGLE_REFRESH_TOKEN"),
            ({"GOOGLE_REFRESH_TOKEN": "x" * 16385}, "GOOGLE_REFRESH_TOKEN"),
            ({"GOOGLE_CLIENT_ID": "id\x7f"}, "GOOGLE_CLIENT_ID"),
        ],
    )
    def test_google_oauth2_rejects(self, changes: dict[str, str | None], variable: str) -> None:
        """Check 49: google_oauth2 with a password, or a missing or whitespace Google value."""
        assert_rejected(load(GMAIL_OAUTH, **changes), variable)

    def test_custom_with_google_hosts_gets_gmail_behaviour(self) -> None:
        """Gmail IMAP safeguards and automatic Sent follow Google host names, in any case."""
        mail = load(CUSTOM, IMAP_HOST="IMAP.GoogleMail.Com", SMTP_HOST="SMTP.GoogleMail.Com").mail
        assert mail is not None
        assert (mail.provider, mail.gmail_imap, mail.smtp_stores_sent) == ("custom", True, True)

    def test_custom_with_other_hosts_has_no_gmail_behaviour(self) -> None:
        """Ordinary hosts neither get Gmail safeguards nor automatic Sent."""
        mail = load(CUSTOM, IMAP_HOST="imap.example.com", SMTP_HOST="smtp.gmail.com").mail
        assert mail is not None
        assert (mail.gmail_imap, mail.smtp_stores_sent) == (False, True)


OUTLOOK = {
    "MAIL_PROVIDER": "outlook",
    "MAIL_USERNAME": "owner@outlook.com",
    "MICROSOFT_CLIENT_ID": "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1",
    "MICROSOFT_REFRESH_TOKEN": "ms-refresh",
    "MICROSOFT_TENANT_ID": "consumers",
}


class TestOutlook:
    def test_the_preset_is_pinned_and_uses_xoauth2(self) -> None:
        """outlook: Microsoft's IMAP and SMTP hosts, 587 STARTTLS, a public client by default."""
        mail = load(OUTLOOK).mail
        assert mail is not None
        assert (mail.imap_host, mail.imap_port) == ("outlook.office365.com", 993)
        assert (mail.smtp_host, mail.smtp_port, mail.smtp_tls_mode) == (
            "smtp.office365.com",
            587,
            "starttls",
        )
        assert (mail.auth_mode, mail.smtp_stores_sent, mail.gmail_imap) == (
            "microsoft_oauth2",
            True,
            False,
        )
        assert mail.oauth is not None
        assert (mail.oauth.issuer, mail.oauth.tenant, mail.oauth.client_secret) == (
            "microsoft",
            "consumers",
            None,
        )

    def test_a_client_secret_is_optional(self) -> None:
        """A confidential client's secret is read (and never shown)."""
        mail = load(OUTLOOK, MICROSOFT_CLIENT_SECRET="ms-secret").mail
        assert mail is not None and mail.oauth is not None
        assert mail.oauth.client_secret is not None and "ms-secret" not in repr(mail)

    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"MICROSOFT_CLIENT_ID": None}, "MICROSOFT_CLIENT_ID"),
            ({"MICROSOFT_CLIENT_ID": "not-a-uuid"}, "MICROSOFT_CLIENT_ID"),
            ({"MICROSOFT_REFRESH_TOKEN": None}, "MICROSOFT_REFRESH_TOKEN"),
            ({"MICROSOFT_TENANT_ID": "common"}, "MICROSOFT_TENANT_ID"),
            ({"MICROSOFT_ACCOUNT_ID": "x"}, "MICROSOFT_ACCOUNT_ID"),
            ({"MAIL_PASSWORD": PASSWORD}, "MAIL_PASSWORD"),
            ({"SMTP_PORT": "465"}, "SMTP_PORT"),
            ({"IMAP_HOST": "imap.example.com"}, "IMAP_HOST"),
            ({"MAIL_AUTH_MODE": "password"}, "MAIL_AUTH_MODE"),
            ({"MAIL_USERNAME": "owner"}, "MAIL_USERNAME"),
            ({"GOOGLE_CLIENT_ID": "client"}, "GOOGLE_CLIENT_ID"),
        ],
    )
    def test_outlook_rejects(self, changes: dict[str, str | None], variable: str) -> None:
        """Missing or malformed grant values, Graph-only values, passwords and overrides."""
        assert_rejected(load(OUTLOOK, **changes), variable)

    def test_microsoft_values_are_refused_elsewhere(self) -> None:
        """A Microsoft value with a password provider is a problem naming it."""
        assert_rejected(load(BASE, MICROSOFT_TENANT_ID="consumers"), "MICROSOFT_TENANT_ID")


class TestMicrosoft:
    def test_a_valid_graph_configuration_loads(self) -> None:
        """Check 50: tenant consumers is accepted; the grant and the Graph account are read."""
        config = load(MICROSOFT)
        assert config.problems == ()
        mail = config.mail
        assert mail is not None
        assert (mail.provider, mail.auth_mode, mail.smtp_stores_sent, mail.gmail_imap) == (
            "microsoft",
            "microsoft_graph",
            True,
            False,
        )
        assert (mail.imap_host, mail.smtp_host, mail.password, mail.aliases) == ("", "", None, ())
        assert mail.oauth == OAuthLogin(
            issuer="microsoft",
            client_id=MICROSOFT["MICROSOFT_CLIENT_ID"],
            client_secret=Secret("ms-secret"),
            refresh_token=Secret("ms-refresh"),
            tenant="consumers",
        )
        assert mail.graph == GraphAccount(
            account_id="00000000-0000-0000-0000-000000000001", token_key=Secret("0f" * 32)
        )

    def test_tenant_uuid_is_accepted(self) -> None:
        """A tenant UUID is as good as consumers."""
        tenant = "8d2f3c1a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
        mail = load(MICROSOFT, MICROSOFT_TENANT_ID=tenant).mail
        assert mail is not None and mail.oauth is not None and mail.oauth.tenant == tenant

    def test_the_key_is_held_in_lower_case(self) -> None:
        """The encryption key is case-insensitive hex; it is kept lower-case."""
        mail = load(MICROSOFT, MICROSOFT_TOKEN_ENCRYPTION_KEY="0F" * 32).mail
        assert mail is not None and mail.graph is not None
        assert mail.graph.token_key == Secret("0f" * 32)

    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"MICROSOFT_TOKEN_ENCRYPTION_KEY": None}, "MICROSOFT_TOKEN_ENCRYPTION_KEY"),
            ({"MICROSOFT_TOKEN_ENCRYPTION_KEY": "0f" * 31}, "MICROSOFT_TOKEN_ENCRYPTION_KEY"),
            ({"MICROSOFT_TOKEN_ENCRYPTION_KEY": "zz" * 32}, "MICROSOFT_TOKEN_ENCRYPTION_KEY"),
            ({"MICROSOFT_TOKEN_ENCRYPTION_KEY": "0f" * 33}, "MICROSOFT_TOKEN_ENCRYPTION_KEY"),
            ({"MICROSOFT_CLIENT_ID": None}, "MICROSOFT_CLIENT_ID"),
            ({"MICROSOFT_CLIENT_ID": "not-a-uuid"}, "MICROSOFT_CLIENT_ID"),
            ({"MICROSOFT_CLIENT_SECRET": None}, "MICROSOFT_CLIENT_SECRET"),
            ({"MICROSOFT_CLIENT_SECRET": "two words"}, "MICROSOFT_CLIENT_SECRET"),
            ({"MICROSOFT_REFRESH_TOKEN": None}, "MICROSOFT_REFRESH_TOKEN"),
            ({"MICROSOFT_REFRESH_TOKEN": "a b"}, "MICROSOFT_REFRESH_TOKEN"),
            ({"MICROSOFT_TENANT_ID": None}, "MICROSOFT_TENANT_ID"),
            ({"MICROSOFT_TENANT_ID": "common"}, "MICROSOFT_TENANT_ID"),
            ({"MICROSOFT_TENANT_ID": "organizations"}, "MICROSOFT_TENANT_ID"),
            ({"MICROSOFT_TENANT_ID": "Consumers"}, "MICROSOFT_TENANT_ID"),
            ({"MICROSOFT_TENANT_ID": "contoso.onmicrosoft.com"}, "MICROSOFT_TENANT_ID"),
            ({"MICROSOFT_ACCOUNT_ID": None}, "MICROSOFT_ACCOUNT_ID"),
            ({"MICROSOFT_ACCOUNT_ID": "x" * 257}, "MICROSOFT_ACCOUNT_ID"),
            ({"MICROSOFT_ACCOUNT_ID": "an id"}, "MICROSOFT_ACCOUNT_ID"),
            ({"MICROSOFT_ACCOUNT_ID": "id\x7f"}, "MICROSOFT_ACCOUNT_ID"),
            ({"MAIL_FROM": "other@outlook.com"}, "MAIL_FROM"),
            ({"MAIL_FROM": "Owner <owner@outlook.com>"}, "MAIL_FROM"),
            ({"MAIL_ALIASES": "alias@outlook.com"}, "MAIL_ALIASES"),
            ({"MAIL_PASSWORD": PASSWORD}, "MAIL_PASSWORD"),
            ({"GOOGLE_CLIENT_ID": "client"}, "GOOGLE_CLIENT_ID"),
            ({"IMAP_HOST": "outlook.office365.com"}, "IMAP_HOST"),
            ({"SMTP_HOST": "smtp.office365.com"}, "SMTP_HOST"),
            ({"SMTP_PORT": "587"}, "SMTP_PORT"),
            ({"IMAP_PORT": "143"}, "IMAP_PORT"),
            ({"SMTP_TLS_MODE": "starttls"}, "SMTP_TLS_MODE"),
            ({"MAIL_USERNAME": "owner"}, "MAIL_USERNAME"),
            ({"MAIL_USERNAME": None}, "MAIL_USERNAME"),
            ({"MAIL_AUTH_MODE": "password"}, "MAIL_AUTH_MODE"),
            ({"MAIL_AUTH_MODE": "microsoft_oauth2"}, "MAIL_AUTH_MODE"),
        ],
    )
    def test_rejects(self, changes: dict[str, str | None], variable: str) -> None:
        """Check 50: each bad Microsoft value is rejected with its own line."""
        assert_rejected(load(MICROSOFT, **changes), variable)

    def test_a_store_is_required(self) -> None:
        """Check 51: ANGELOS_REDIS_URL=off is a problem, so the server does not start."""
        from service.cli import startup_problems

        config = load(MICROSOFT, ANGELOS_REDIS_URL="off")
        assert variables(config) == ["ANGELOS_REDIS_URL"]
        assert startup_problems(config) == list(config.problems)

    def test_from_may_differ_in_case_only(self) -> None:
        """MAIL_FROM equal to the username case-insensitively is fine."""
        assert load(MICROSOFT, MAIL_FROM="Owner@Outlook.com").problems == ()

    def test_default_ports_may_be_spelled_out(self) -> None:
        """Ports 993/465 and tls are the tolerated defaults."""
        config = load(MICROSOFT, IMAP_PORT="993", SMTP_PORT="465", SMTP_TLS_MODE="tls")
        assert config.problems == ()

    def test_check_config_shows_the_graph_settings_and_no_secret(self) -> None:
        """The report names the account, shows each secret as set, and finds no problem."""
        lines = check_config_lines(load(MICROSOFT))
        for line in (
            "  MAIL_PROVIDER = microsoft",
            "  MAIL_AUTH_MODE = microsoft_graph",
            "  MICROSOFT_TENANT_ID = consumers",
            "  MICROSOFT_ACCOUNT_ID = 00000000-0000-0000-0000-000000000001",
            "  MICROSOFT_CLIENT_SECRET = set",
            "  MICROSOFT_REFRESH_TOKEN = set",
            "  MICROSOFT_TOKEN_ENCRYPTION_KEY = set",
        ):
            assert line in lines
        assert lines[-1] == "No problems found."
        text = "\n".join(lines) + repr(load(MICROSOFT))
        assert "ms-secret" not in text and "ms-refresh" not in text and "0f" * 32 not in text

    def test_bad_secrets_are_not_echoed(self) -> None:
        """Problems about refused secret values name the rule, never the value."""
        values = {
            "MICROSOFT_CLIENT_SECRET": "ms secret value",
            "MICROSOFT_REFRESH_TOKEN": "ms refresh value",
            "MICROSOFT_TOKEN_ENCRYPTION_KEY": "0f" * 31 + "zz",
        }
        config = load(MICROSOFT, **values)
        assert set(values) <= set(variables(config))
        text = "\n".join(config.problems + tuple(check_config_lines(config)))
        for value in values.values():
            assert value not in text
        assert "0f" * 31 not in text

    @pytest.mark.parametrize(
        "base", [BASE, GMAIL_APP, ICLOUD, CUSTOM], ids=["spacemail", "gmail", "icloud", "custom"]
    )
    def test_microsoft_values_need_the_microsoft_provider(self, base: dict[str, str]) -> None:
        """Check 50: any MICROSOFT_* value with another provider is rejected."""
        assert_rejected(load(base, MICROSOFT_TENANT_ID="consumers"), "MICROSOFT_TENANT_ID")
        assert_rejected(load(base, MICROSOFT_ACCOUNT_ID="id"), "MICROSOFT_ACCOUNT_ID")


class TestPort:
    def test_default_is_8080(self) -> None:
        """PORT defaults to 8080."""
        assert load(BASE).port == 8080

    def test_valid_port(self) -> None:
        """PORT takes an integer 1..65535."""
        assert load(BASE, PORT="3000").port == 3000

    @pytest.mark.parametrize("value", ["0", "70000", "http", "-1", " 80"])
    def test_invalid_port_is_a_problem(self, value: str) -> None:
        """A bad PORT is reported and the default kept."""
        config = load(BASE, PORT=value)
        assert variables(config) == ["PORT"]
        assert config.port == 8080


class TestNoSecretsShown:
    ENV: ClassVar[dict[str, str]] = {
        **BASE,
        "ANGELOS_REDIS_URL": f"rediss://:{REDIS_PASSWORD}@cache.example.com:6380/2",
        "ANGELOS_LEDGER_HMAC_KEY": HMAC_KEY,
    }

    def test_repr_hides_every_secret(self) -> None:
        """repr(Config) shows neither the mailbox password, the Redis password nor the HMAC key."""
        config = load(self.ENV)
        assert config.problems == ()
        text = repr(config)
        for secret in (PASSWORD, REDIS_PASSWORD, HMAC_KEY):
            assert secret not in text

    def test_describe_shows_secrets_only_as_set(self) -> None:
        """describe() is secret-free: set/unset markers and a Redis URL without userinfo."""
        summary = describe(load(self.ENV))
        text = repr(summary)
        for secret in (PASSWORD, REDIS_PASSWORD, HMAC_KEY):
            assert secret not in text
        assert (
            "set",
            "rediss://cache.example.com:6380/2 (credentials set)",
            "set",
        ) == (
            summary["MAIL_PASSWORD"],
            summary["ANGELOS_REDIS_URL"],
            summary["ANGELOS_LEDGER_HMAC_KEY"],
        )

    def test_describe_is_json_encodable(self) -> None:
        """describe() is plain data the CLI can print as JSON."""
        msgspec.json.encode(describe(load(self.ENV)))

    def test_config_itself_is_not_json_encodable(self) -> None:
        """Encoding the Config by accident fails instead of leaking the password."""
        with pytest.raises(TypeError):
            msgspec.json.encode(load(self.ENV))

    def test_bad_secrets_are_not_echoed(self) -> None:
        """Problems about secret variables name the rule, not the value."""
        config = load(
            BASE,
            MAIL_PASSWORD=PASSWORD + "\r\n",
            ANGELOS_REDIS_URL=f"redis://:{REDIS_PASSWORD}@cache.example.com",
            ANGELOS_LEDGER_HMAC_KEY=HMAC_KEY + "0",
        )
        assert {"MAIL_PASSWORD", "ANGELOS_REDIS_URL", "ANGELOS_LEDGER_HMAC_KEY"} <= set(
            variables(config)
        )
        text = "\n".join(config.problems + tuple(check_config_lines(config)))
        for secret in (PASSWORD, REDIS_PASSWORD, HMAC_KEY):
            assert secret not in text


class TestLoadingRules:
    def test_dotenv_file_is_never_read(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A .env file in the working directory is ignored; only the mapping counts."""
        (tmp_path / ".env").write_text("MAIL_USERNAME=owner@example.com\nMAIL_PASSWORD=x\n")
        monkeypatch.chdir(tmp_path)
        assert {"MAIL_USERNAME", "MAIL_PASSWORD"} <= set(variables(load_config({})))

    def test_process_environment_is_not_read(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Variables of the process environment do not leak into an explicit mapping."""
        monkeypatch.setenv("MAIL_USERNAME", "owner@example.com")
        monkeypatch.setenv("MAIL_PASSWORD", "x")
        assert "MAIL_USERNAME" in variables(load_config({}))

    def test_config_is_frozen(self) -> None:
        """Configuration cannot be changed after loading."""
        config = load(BASE)
        with pytest.raises(AttributeError):
            config.port = 1  # type: ignore[misc]


class TestCheckConfigLines:
    def test_valid_configuration(self) -> None:
        """R1: effective configuration first, then the verdict, with no secret."""
        lines = check_config_lines(load(BASE))
        assert lines[0] == "Effective configuration:"
        assert "  MAIL_PROVIDER = spacemail" in lines
        assert "  MAIL_PASSWORD = set" in lines
        assert "  MCP_RESOURCE_URL = unset" in lines
        assert lines[-1] == "No problems found."
        assert all(PASSWORD not in line for line in lines)

    def test_invalid_configuration_lists_each_problem(self) -> None:
        """R1: one line per problem after the effective configuration."""
        config = load(BASE, MAIL_USERNAME=None, SMTP_TLS_MODE="plain")
        lines = check_config_lines(config)
        assert "  MAIL_USERNAME = invalid (see Problems)" in lines
        assert "  SMTP_TLS_MODE = invalid (see Problems)" in lines
        start = lines.index(f"Problems ({len(config.problems)}):")
        assert [f"  - {problem}" for problem in config.problems] == lines[start + 1 :]

    def test_control_characters_in_values_are_neutralised(self) -> None:
        """An operator-supplied value cannot inject terminal controls into the report."""
        lines = check_config_lines(load(BASE, ANGELOS_LOCAL_OWNER="owner\u200bname"))
        assert all(line.isprintable() for line in lines)
