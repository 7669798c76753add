"""The send policy: its three variables through the real loader, check-config, capabilities, and
the pure checks of schemas/send_policy.py."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from schemas.send_policy import (
    APPROVALS,
    NO_POLICY,
    WINDOWS_MS,
    RateLimit,
    RecipientAllowlist,
    SendPolicy,
)
from service.config import Config, check_config_lines, describe
from support.config_env import MAILBOX, load
from support.oauth_keys import p256, pkcs8

BASE = {**MAILBOX, "MAIL_ENABLE_SEND": "1"}
FIRST_PARTY = {
    **BASE,
    "MAIL_FROM": "owner@example.com",
    "ANGELOS_OAUTH_ENABLED": "1",
    "MCP_OAUTH_ISSUER": "https://mail.example.com",
    "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
    "MCP_OAUTH_JWKS_URL": "https://mail.example.com/oauth/jwks.json",
    "MCP_ALLOWED_SUBJECTS": "owner",
    "ANGELOS_OAUTH_SIGNING_KEY_PEM": pkcs8(p256()),
    "ANGELOS_OAUTH_SIGNING_KEY_ID": "k-2025",
    "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps(
        [
            {
                "client_id": "angelos-claude",
                "client_name": "Claude",
                "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
            }
        ]
    ),
}
APPROVAL = "ANGELOS_SEND_APPROVAL"
ALLOWLIST = "MAIL_SEND_ALLOWED_RECIPIENTS"
RATE = "MAIL_SEND_RATE_LIMIT"
POLICY_VARIABLES = (APPROVAL, ALLOWLIST, RATE)
# Address parts that must never reach a problem line or check-config.
PERSONAL = ("zelda", "quinton", "private-example", "hidden-example")


def named(config: Config) -> list[str]:
    """The variable named by each problem line."""
    return [problem.split(":", 1)[0] for problem in config.problems]


def policy_problems(config: Config) -> list[str]:
    return [p for p in config.problems if p.split(":", 1)[0] in POLICY_VARIABLES]


def refused(config: Config, variable: str) -> str:
    """The one problem naming the variable; a refused policy keeps sending off."""
    problems = [p for p in config.problems if p.startswith(variable + ": ")]
    assert len(problems) == 1, config.problems
    assert config.gates.send is False
    assert describe(config)[variable] == "invalid (see Problems)"
    return problems[0].split(": ", 1)[1]


class TestDefaults:
    def test_unset_means_no_policy_and_sending_stays_on(self) -> None:
        config = load(BASE)
        assert (config.problems, config.send_policy, config.gates.send) == ((), NO_POLICY, True)

    @pytest.mark.parametrize("variable", POLICY_VARIABLES)
    def test_empty_is_unset(self, variable: str) -> None:
        config = load(BASE, **{variable: ""})
        assert (config.problems, config.send_policy) == ((), NO_POLICY)

    def test_check_config_shows_the_defaults(self) -> None:
        lines = check_config_lines(load(BASE))
        assert lines.index("  # Send policy") == lines.index("  MAIL_ENABLE_DELETE = off") + 1
        assert [
            "  ANGELOS_SEND_APPROVAL = off",
            "  MAIL_SEND_ALLOWED_RECIPIENTS = unset",
            "  MAIL_SEND_RATE_LIMIT = unset",
        ] == [line for line in lines if line.split(" = ")[0].strip() in POLICY_VARIABLES]


class TestApproval:
    @pytest.mark.parametrize("value", ["off", "elicitation"])
    def test_needs_no_first_party_server(self, value: str) -> None:
        config = load(BASE, ANGELOS_SEND_APPROVAL=value)
        assert (config.problems, config.send_policy.approval) == ((), value)

    @pytest.mark.parametrize("value", APPROVALS)
    def test_every_value_with_the_first_party_server(self, value: str) -> None:
        config = load(FIRST_PARTY, ANGELOS_SEND_APPROVAL=value)
        assert config.first_party is not None, config.problems
        assert (config.problems, config.send_policy.approval) == ((), value)
        assert config.gates.send is True

    @pytest.mark.parametrize("value", ["passkey", "elicitation_or_passkey"])
    def test_a_passkey_needs_the_first_party_server(self, value: str) -> None:
        config = load(BASE, ANGELOS_SEND_APPROVAL=value)
        assert refused(config, APPROVAL) == (
            f"{value} needs the first-party authorization server (ANGELOS_OAUTH_ENABLED=1)"
        )

    def test_a_broken_first_party_server_still_counts_as_enabled(self) -> None:
        """Its own problems say what is wrong; the approval adds none of its own."""
        config = load(FIRST_PARTY, ANGELOS_SEND_APPROVAL="passkey", MCP_ALLOWED_SUBJECTS="a,b")
        assert config.first_party is None
        assert APPROVAL not in named(config)

    @pytest.mark.parametrize("value", ["on", "1", "Passkey", "OFF", " off", "elicitation "])
    def test_other_values_are_refused(self, value: str) -> None:
        assert refused(load(BASE, ANGELOS_SEND_APPROVAL=value), APPROVAL) == (
            "must be one of off, elicitation, passkey, elicitation_or_passkey"
        )

    def test_check_config_shows_the_setting(self) -> None:
        lines = check_config_lines(load(BASE, ANGELOS_SEND_APPROVAL="elicitation"))
        assert "  ANGELOS_SEND_APPROVAL = elicitation" in lines


class TestAllowlist:
    def test_entries_are_trimmed_lower_cased_deduplicated_and_sorted(self) -> None:
        value = "Carol@Example.ORG ,@Example.net,  ann@example.org,carol@example.org"
        config = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS=value)
        assert config.problems == ()
        assert config.send_policy.allowlist == RecipientAllowlist(
            entries=("@example.net", "ann@example.org", "carol@example.org")
        )

    @pytest.mark.parametrize(
        "value", ["ann@example.org", "@example.org", "@localhost", "o'brien+tag@mail.example.org"]
    )
    def test_one_entry(self, value: str) -> None:
        allowlist = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS=value).send_policy.allowlist
        assert allowlist == RecipientAllowlist(entries=(value.lower(),))

    def test_a_thousand_entries_and_no_more(self) -> None:
        entries = [f"user{n}@example.org" for n in range(1000)]
        allowlist = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS=",".join(entries)).send_policy.allowlist
        assert allowlist is not None and len(allowlist.entries) == 1000
        config = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS=",".join([*entries, "ann@example.org"]))
        assert refused(config, ALLOWLIST) == "must list at most 1000 entries"
        assert config.send_policy.allowlist is None

    @pytest.mark.parametrize(
        ("value", "problem"),
        [
            ("zelda@private-example.org,,quinton@private-example.org", "entry 2 is empty"),
            ("zelda@private-example.org,", "entry 2 is empty"),
            (" , zelda@private-example.org", "entry 1 is empty"),
            ("zelda@private-example.org, quinton", "entry 2 is neither a bare address nor @domain"),
            ("@", "entry 1 is neither a bare address nor @domain"),
            ("private-example.org", "entry 1 is neither a bare address nor @domain"),
            (
                "zelda@private-example.org,quinton@private-example.org,@@private-example.org",
                "entry 3 is neither",
            ),
            ("@-bad.private-example.org", "entry 1 is neither"),
            ("@private-example.org.", "entry 1 is neither"),
            ("@10.0.0.1", "entry 1 is neither"),
            ("@private-example.org:25", "entry 1 is neither"),
            ("@*.private-example.org", "entry 1 is neither"),
            ("Zelda <zelda@private-example.org>", "entry 1 is neither"),
            ("zelda@private-example.org; quinton@private-example.org", "entry 1 is neither"),
            ("zelda@private-example.org\tquinton@private-example.org", "entry 1 is neither"),
            ("zelda@priväte-example.org", "entry 1 is neither"),
            ("zelda@private-example.org\n", "entry 1 is neither"),
        ],
    )
    def test_bad_entries_are_named_by_position_only(self, value: str, problem: str) -> None:
        config = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS=value)
        said = refused(config, ALLOWLIST)
        assert said.startswith(problem)
        assert config.send_policy.allowlist is None
        report = "\n".join(check_config_lines(config))
        for part in PERSONAL:
            assert part not in said and part not in report.lower()

    def test_check_config_shows_only_the_number_of_entries(self) -> None:
        """The value is personal data: check-config never prints an address or a domain."""
        value = "zelda@private-example.org, @hidden-example.net, quinton@private-example.org,"
        value += " ZELDA@Private-Example.ORG"
        config = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS=value)
        lines = check_config_lines(config)
        assert "  MAIL_SEND_ALLOWED_RECIPIENTS = set (3 entries, not shown)" in lines
        text = "\n".join(lines).lower() + repr(describe(config)).lower()
        for part in PERSONAL:
            assert part not in text

    def test_one_entry_is_said_in_the_singular(self) -> None:
        lines = check_config_lines(load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS="@private-example.org"))
        assert "  MAIL_SEND_ALLOWED_RECIPIENTS = set (1 entry, not shown)" in lines


class TestRateLimit:
    @pytest.mark.parametrize(
        ("value", "count", "unit"),
        [("20/h", 20, "h"), ("200/d", 200, "d"), ("1/m", 1, "m"), ("100000/d", 100_000, "d")],
    )
    def test_valid_limits(self, value: str, count: int, unit: str) -> None:
        config = load(BASE, MAIL_SEND_RATE_LIMIT=value)
        assert config.problems == ()
        assert config.send_policy.rate == RateLimit(count, WINDOWS_MS[unit], value)

    @pytest.mark.parametrize(
        "value",
        [
            "0/h",
            "100001/h",
            "020/h",
            "-1/h",
            "+1/h",
            "20",
            "/h",
            "20/",
            "20/hour",
            "20/H",
            "20/s",
            "20 /h",
            "20/h ",
            "1e3/h",
            "20/h/d",
            "\uff120/h",  # a full-width 2
            "9" * 5000 + "/h",
        ],
    )
    def test_other_values_are_refused(self, value: str) -> None:
        config = load(BASE, MAIL_SEND_RATE_LIMIT=value)
        assert refused(config, RATE) == "must be N/m, N/h or N/d with N 1-100000, such as 20/h"
        assert config.send_policy.rate is None

    def test_check_config_shows_the_value_as_configured(self) -> None:
        assert "  MAIL_SEND_RATE_LIMIT = 20/h" in check_config_lines(
            load(BASE, MAIL_SEND_RATE_LIMIT="20/h")
        )


class TestTogether:
    def test_every_part_at_once(self) -> None:
        config = load(
            FIRST_PARTY,
            ANGELOS_SEND_APPROVAL="elicitation_or_passkey",
            MAIL_SEND_ALLOWED_RECIPIENTS="@example.org",
            MAIL_SEND_RATE_LIMIT="5/m",
        )
        assert config.problems == ()
        assert config.send_policy == SendPolicy(
            approval="elicitation_or_passkey",
            allowlist=RecipientAllowlist(entries=("@example.org",)),
            rate=RateLimit(count=5, window_ms=60_000, text="5/m"),
        )

    def test_every_problem_is_reported_at_once(self) -> None:
        config = load(
            BASE,
            ANGELOS_SEND_APPROVAL="passkey",
            MAIL_SEND_ALLOWED_RECIPIENTS="ann@example.org,bob",
            MAIL_SEND_RATE_LIMIT="20/hour",
        )
        assert sorted(named(config)) == sorted(POLICY_VARIABLES)
        assert config.gates.send is False

    def test_a_refused_policy_also_keeps_the_first_challenge_from_asking_for_mail_send(
        self,
    ) -> None:
        """The gates the resource server reads are the ones the policy left."""
        config = load(FIRST_PARTY, MAIL_SEND_RATE_LIMIT="0/h")
        assert config.gates.send is False
        assert config.http_auth is not None
        assert "mail.send" not in config.http_auth.initial_scopes


class TestAllowlistChecks:
    LIST = RecipientAllowlist(entries=("@example.org", "ann@example.net"))

    @pytest.mark.parametrize(
        "address",
        ["bob@example.org", "BOB@Example.ORG", "ann@example.net", "Ann@EXAMPLE.NET"],
    )
    def test_allows_listed_addresses_and_domains_in_any_case(self, address: str) -> None:
        assert self.LIST.allows(address)

    @pytest.mark.parametrize(
        "address",
        [
            "bob@mail.example.org",  # a domain entry is that exact domain, not a subdomain
            "bob@example.org.evil.test",
            "bob@notexample.org",
            "bob@example.net",
            "ann@mail.example.net",
            "example.org",
            "",
        ],
    )
    def test_refuses_everything_else(self, address: str) -> None:
        assert not self.LIST.allows(address)

    def test_refused_names_positions_in_to_cc_bcc_order(self) -> None:
        refused_positions = self.LIST.refused(
            to=["a@example.org", "x@other.test", "ann@example.net"],
            cc=["y@other.test"],
            bcc=["b@example.org", "z@sub.example.org"],
        )
        assert ["to[1]", "cc[0]", "bcc[1]"] == refused_positions

    @pytest.mark.parametrize(
        ("header", "allowed"),
        [
            ("<bob@example.org>", True),
            ('"Bob" <bob@example.org>', True),
            ("=?utf-8?q?B=C3=B6b?= <bob@example.org>", True),
            ('"ann@example.net" <x@other.test>', False),  # the display name never counts
            ("Bob <bob@other.test>", False),
            ("<<>>", False),  # does not parse: judged as written, so refused
        ],
    )
    def test_a_header_form_is_judged_by_its_address(self, header: str, allowed: bool) -> None:
        assert allowed is self.LIST.allows(header)

    def test_an_envelope_recipient_no_header_names_is_refused_too(self) -> None:
        headers = {"to": ["<a@example.org>"], "cc": [], "bcc": []}
        envelope = ["a@example.org", "x@other.test"]
        assert ["envelope[1]"] == self.LIST.refused(**headers, envelope=envelope)
        assert [] == self.LIST.refused(**headers, envelope=envelope[:1])

    def test_refused_is_empty_when_all_are_allowed(self) -> None:
        assert [] == self.LIST.refused(to=["A@Example.org"], cc=[], bcc=["ann@example.net"])

    def test_digest_is_of_the_sorted_unique_entries(self) -> None:
        expected = hashlib.sha256(b"@example.org\nann@example.net").hexdigest()
        shuffled = RecipientAllowlist(entries=("ann@example.net", "@example.org", "@example.org"))
        assert expected == self.LIST.digest == shuffled.digest

    def test_digest_of_the_loaded_list(self) -> None:
        config = load(BASE, MAIL_SEND_ALLOWED_RECIPIENTS="Ann@Example.NET, @example.org")
        assert config.send_policy.allowlist is not None
        assert self.LIST.digest == config.send_policy.allowlist.digest


class TestRequired:
    def test_off_requires_nothing(self) -> None:
        assert NO_POLICY.required is None
        assert SendPolicy(approval="off").required is None

    @pytest.mark.parametrize("approval", ["elicitation", "passkey", "elicitation_or_passkey"])
    def test_anything_else_is_required_as_set(self, approval: Any) -> None:
        assert approval == SendPolicy(approval=approval).required
