"""Configuration of the resource server (the MCP_* variables) and of the stdio principal.

Acceptance checks covered here (docs/acceptance/auth-config.md): 4, 9, 31, 32, 43, 44, 45
(configuration side).
"""

from __future__ import annotations

import pytest

from support.config_env import EXTERNAL, MAILBOX, assert_rejected, load, variables

REJECTED_URLS = [
    "http://login.example.com/jwks",
    "https://localhost/mcp",
    "https://127.0.0.1/mcp",
    "https://[::1]/mcp",
    "https://8.8.8.8/mcp",
    "https://login.example.com:8443/jwks",
    "https://user:pass@login.example.com/jwks",
    "https://login.example.com/jwks?key=x",
    "https://login.example.com/jwks#part",
    "https://mail.local/mcp",
    "https://login.example.com/jwks?",
    "https://login.example.com/jwks#",
    "https://login.example.com:/jwks",
    "https://login.example.com:0443/jwks",
    "https:login.example.com/jwks",
    "https:///jwks",
    "https://login.example.com/%00",
    "https://login.example.com/a%5Cb",
    "https://login.example.com/%2e%2e/jwks",
    "https://login.example.com/a/../jwks",
    "https://login.example.com/./jwks",
    "https://login.example.com/a\\b",
    "https://login.example.com/a b",
    "https://login.example.com/a\tb",
    "https://login.example.com/jwks\r\n",
    "https://login.example.com./jwks",
    "https://login..example.com/jwks",
    "https://login_1.example.com/jwks",
    "https://-login.example.com/jwks",
    "https://login-.example.com/jwks",
    "https://keys.internal/jwks",
    "https://keys.test/jwks",
    "https://keys.invalid/jwks",
    "https://abc.onion/jwks",
    "https://app.localhost/jwks",
    "https://" + "a" * 64 + ".example.com/jwks",
    "https://" + ".".join(["abcdefghi"] * 26) + ".com/jwks",
    "https://xn--caf-dma.example.com/\u00e9",
    "https://2130706433/jwks",
    "https://127.1/jwks",
    "",
]
ACCEPTED_URLS = [
    "https://example.com",
    "https://login.example.com/",
    "https://login.example.com/tenant/jwks",
    "https://login.example.com:443/jwks",
]


class TestValidExternalConfig:
    def test_fixture_configuration_is_accepted(self) -> None:
        """The acceptance fixture configuration is valid; the initial scope defaults to read."""
        config = load(EXTERNAL)
        assert config.problems == ()
        assert config.http_auth is not None
        assert config.http_auth.resource_url == "https://mail.example.com/mcp"
        assert config.http_auth.issuer == "https://login.example.com/"
        assert config.http_auth.jwks_url == "https://login.example.com/.well-known/jwks.json"
        assert config.http_auth.allowed_subjects == ("owner-123",)
        assert config.http_auth.initial_scopes == ("mail.read",)

    def test_absent_group_is_not_configured_and_not_a_problem(self) -> None:
        """stdio needs no MCP_* variables: no group, no problem."""
        config = load(MAILBOX)
        assert (config.http_auth, config.http_auth_problems, config.problems) == (None, (), ())

    def test_empty_group_counts_as_absent(self) -> None:
        """Empty values are unset values."""
        config = load(MAILBOX, MCP_RESOURCE_URL="", MCP_OAUTH_ISSUER="", MCP_ALLOWED_SUBJECTS="")
        assert (config.http_auth, config.problems) == (None, ())

    def test_mailbox_problems_do_not_touch_the_resource_server(self) -> None:
        """Check 3: a bad mailbox leaves a valid resource-server config usable."""
        config = load(EXTERNAL, MAIL_USERNAME=None)
        assert config.http_auth is not None
        assert config.http_auth_problems == ()
        assert config.problems != ()


class TestRequiredVariables:
    @pytest.mark.parametrize(
        "variable",
        ["MCP_RESOURCE_URL", "MCP_OAUTH_ISSUER", "MCP_OAUTH_JWKS_URL", "MCP_ALLOWED_SUBJECTS"],
    )
    @pytest.mark.parametrize("value", ["", None])
    def test_each_required_variable_missing_is_rejected(
        self, variable: str, value: str | None
    ) -> None:
        """Check 43: each of the four required variables empty or unset rejects the group."""
        assert_rejected(load(EXTERNAL, **{variable: value}), variable)

    def test_initial_scopes_alone_make_the_group_present(self) -> None:
        """Setting any MCP_* variable asks for the whole group."""
        config = load(MAILBOX, MCP_OAUTH_INITIAL_SCOPES="mail.read")
        assert variables(config.http_auth_problems) == [
            "MCP_RESOURCE_URL",
            "MCP_OAUTH_ISSUER",
            "MCP_OAUTH_JWKS_URL",
            "MCP_ALLOWED_SUBJECTS",
        ]


class TestSubjects:
    def test_items_are_trimmed_and_empty_items_dropped(self) -> None:
        """Check 43: " owner-123, owner-456 " gives two subjects."""
        for value in (" owner-123, owner-456 ", "owner-123,,owner-456,"):
            http_auth = load(EXTERNAL, MCP_ALLOWED_SUBJECTS=value).http_auth
            assert http_auth is not None
            assert http_auth.allowed_subjects == ("owner-123", "owner-456")

    def test_thirty_two_subjects_are_accepted(self) -> None:
        """32 is the limit, inclusive."""
        value = ",".join(f"owner-{i}" for i in range(32))
        http_auth = load(EXTERNAL, MCP_ALLOWED_SUBJECTS=value).http_auth
        assert http_auth is not None
        assert len(http_auth.allowed_subjects) == 32

    @pytest.mark.parametrize(
        "value",
        [
            ",".join(f"owner-{i}" for i in range(33)),
            "owner\n",
            "owner-1,own\ter",
            "owner\x00",
            " , ,",
            "x" * 513,
            "owner-1," + "\u00e9" * 257,
        ],
    )
    def test_bad_subject_lists_are_rejected(self, value: str) -> None:
        """Check 43: 33 subjects, control characters, no subject, or a subject over 512 bytes."""
        assert_rejected(load(EXTERNAL, MCP_ALLOWED_SUBJECTS=value), "MCP_ALLOWED_SUBJECTS")

    def test_subject_of_512_bytes_is_accepted(self) -> None:
        """512 bytes is the limit, inclusive."""
        assert load(EXTERNAL, MCP_ALLOWED_SUBJECTS="x" * 512).http_auth is not None


class TestPublicHttpsUrlRule:
    @pytest.mark.parametrize("url", REJECTED_URLS)
    @pytest.mark.parametrize(
        "variable", ["MCP_OAUTH_JWKS_URL", "MCP_OAUTH_ISSUER", "MCP_RESOURCE_URL"]
    )
    def test_rejected_examples(self, variable: str, url: str) -> None:
        """Check 45: every negative example of the public HTTPS URL rule is refused for each URL."""
        if variable == "MCP_RESOURCE_URL":
            url = url.replace("/jwks", "/mcp")  # so that only the URL rule can refuse it
        config = load(EXTERNAL, **{variable: url})
        assert_rejected(config, variable)
        assert f"{variable}: path must be exactly /mcp" not in config.problems
        assert all(url not in problem for problem in config.problems if url)

    @pytest.mark.parametrize("url", ACCEPTED_URLS)
    def test_accepted_examples(self, url: str) -> None:
        """Check 45: the positive examples are accepted (as issuer and JWKS URL)."""
        config = load(EXTERNAL, MCP_OAUTH_ISSUER=url, MCP_OAUTH_JWKS_URL=url)
        assert config.http_auth_problems == ()
        assert config.http_auth is not None

    def test_scheme_and_host_case_are_tolerated(self) -> None:
        """Scheme and host compare case-insensitively; the value is kept as written."""
        config = load(EXTERNAL, MCP_OAUTH_JWKS_URL="HTTPS://Login.Example.COM/jwks")
        assert config.http_auth is not None
        assert config.http_auth.jwks_url == "HTTPS://Login.Example.COM/jwks"


class TestUrlRelations:
    @pytest.mark.parametrize(
        "path", ["/api", "/mcp/", "/MCP", "", "/", "/mcp/x", "/v1/mcp"], ids=repr
    )
    def test_resource_path_must_be_exactly_mcp(self, path: str) -> None:
        """Check 4: the resource URL path is exactly /mcp."""
        config = load(EXTERNAL, MCP_RESOURCE_URL=f"https://mail.example.com{path}")
        assert_rejected(config, "MCP_RESOURCE_URL")

    def test_jwks_on_another_host_is_rejected(self) -> None:
        """Check 44: the JWKS URL lives on the issuer's host."""
        config = load(EXTERNAL, MCP_OAUTH_JWKS_URL="https://keys.example.com/jwks")
        assert_rejected(config, "MCP_OAUTH_JWKS_URL")

    def test_jwks_with_explicit_443_matches_the_issuer(self) -> None:
        """The effective port of both is 443."""
        config = load(EXTERNAL, MCP_OAUTH_JWKS_URL="https://LOGIN.example.com:443/keys")
        assert config.http_auth is not None

    @pytest.mark.parametrize("issuer", ["https://mail.example.com/", "https://MAIL.example.com"])
    def test_root_issuer_on_the_resource_host_is_refused(self, issuer: str) -> None:
        """Check 9: a root issuer on the MCP origin needs first-party mode."""
        config = load(
            EXTERNAL, MCP_OAUTH_ISSUER=issuer, MCP_OAUTH_JWKS_URL=f"{issuer.rstrip('/')}/jwks"
        )
        assert_rejected(config, "MCP_OAUTH_ISSUER")

    def test_path_issuer_on_the_resource_host_is_allowed(self) -> None:
        """Check 9: https://mail.example.com/realms/owner stays allowed."""
        config = load(
            EXTERNAL,
            MCP_OAUTH_ISSUER="https://mail.example.com/realms/owner",
            MCP_OAUTH_JWKS_URL="https://mail.example.com/realms/owner/jwks",
        )
        assert config.http_auth is not None

    @pytest.mark.parametrize(
        "issuer", ["https://api.angelos.ashray.xyz", "https://api.angelos.ashray.xyz/"]
    )
    def test_legacy_first_party_origin_is_refused(self, issuer: str) -> None:
        """The old first-party origin cannot serve as an external issuer."""
        config = load(
            EXTERNAL,
            MCP_OAUTH_ISSUER=issuer,
            MCP_OAUTH_JWKS_URL="https://api.angelos.ashray.xyz/jwks",
        )
        assert_rejected(config, "MCP_OAUTH_ISSUER")

    def test_first_party_mode_with_external_settings_is_refused_without_fallback(self) -> None:
        """ANGELOS_OAUTH_ENABLED=1 with an external issuer's settings is not first-party mode."""
        config = load(EXTERNAL, ANGELOS_OAUTH_ENABLED="1")
        assert (None, None) == (config.first_party, config.http_auth)
        assert config.http_auth_problems

    def test_first_party_switch_needs_exactly_1(self) -> None:
        """Like the gates, only "1" switches first-party mode on."""
        assert load(EXTERNAL, ANGELOS_OAUTH_ENABLED="true").http_auth is not None


class TestInitialScopes:
    SCOPES = "mail.send mail.read mail.write"

    @pytest.mark.parametrize(
        ("writes", "send", "expected"),
        [
            ("1", "1", ("mail.read", "mail.write", "mail.send")),
            ("0", "1", ("mail.read", "mail.send")),
            ("1", "0", ("mail.read", "mail.write")),
            ("true", "yes", ("mail.read",)),
        ],
    )
    def test_scopes_follow_the_gates_in_canonical_order(
        self, writes: str, send: str, expected: tuple[str, ...]
    ) -> None:
        """Check 31: canonical order, and only scopes whose gate is exactly "1"."""
        config = load(
            EXTERNAL,
            MCP_OAUTH_INITIAL_SCOPES=self.SCOPES,
            MAIL_ENABLE_WRITES=writes,
            MAIL_ENABLE_SEND=send,
        )
        assert config.http_auth is not None
        assert config.http_auth.initial_scopes == expected

    def test_unset_means_mail_read(self) -> None:
        """Unset or empty → mail.read, whatever the gates."""
        config = load(EXTERNAL, MCP_OAUTH_INITIAL_SCOPES="", MAIL_ENABLE_SEND="1")
        assert config.http_auth is not None
        assert config.http_auth.initial_scopes == ("mail.read",)

    @pytest.mark.parametrize(
        "value",
        [
            "mail.write",
            "mail.send",
            "mail.read mail.read",
            "mail.read openid",
            " mail.read",
            "mail.read ",
            "mail.read  mail.send",
            "mail.read\tmail.send",
            "mail.read\r\nX-Injected: true",
            "MAIL.READ",
            "mail.read mail.write mail.send mail.read",
        ],
        ids=repr,
    )
    def test_invalid_values_are_rejected(self, value: str) -> None:
        """Check 32: anything but 1-3 distinct scopes with mail.read, single spaces."""
        config = load(EXTERNAL, MCP_OAUTH_INITIAL_SCOPES=value, MAIL_ENABLE_SEND="1")
        assert_rejected(config, "MCP_OAUTH_INITIAL_SCOPES")
        assert all("Injected" not in problem for problem in config.problems)


class TestLocalPrincipal:
    def test_defaults(self) -> None:
        """Owner "local" with mail.read only."""
        local = load(MAILBOX).local
        assert local is not None
        assert (local.owner, local.scopes) == ("local", ("mail.read",))

    def test_configured_owner_and_scopes_in_canonical_order(self) -> None:
        """Scopes are stored in the order mail.read mail.write mail.send."""
        local = load(
            MAILBOX, ANGELOS_LOCAL_OWNER="owner-b", ANGELOS_LOCAL_SCOPES="mail.send mail.read"
        ).local
        assert local is not None
        assert (local.owner, local.scopes) == ("owner-b", ("mail.read", "mail.send"))

    def test_scopes_are_not_filtered_by_gates(self) -> None:
        """Gates are checked per call, so the principal keeps its scopes."""
        local = load(MAILBOX, ANGELOS_LOCAL_SCOPES="mail.read mail.write mail.send").local
        assert local is not None
        assert local.scopes == ("mail.read", "mail.write", "mail.send")

    @pytest.mark.parametrize(
        ("changes", "variable"),
        [
            ({"ANGELOS_LOCAL_SCOPES": "mail.send"}, "ANGELOS_LOCAL_SCOPES"),
            ({"ANGELOS_LOCAL_SCOPES": "mail.read mail.delete"}, "ANGELOS_LOCAL_SCOPES"),
            ({"ANGELOS_LOCAL_SCOPES": "mail.read mail.read"}, "ANGELOS_LOCAL_SCOPES"),
            ({"ANGELOS_LOCAL_SCOPES": "mail.read  mail.send"}, "ANGELOS_LOCAL_SCOPES"),
            ({"ANGELOS_LOCAL_OWNER": "owner\n"}, "ANGELOS_LOCAL_OWNER"),
            ({"ANGELOS_LOCAL_OWNER": " owner"}, "ANGELOS_LOCAL_OWNER"),
            ({"ANGELOS_LOCAL_OWNER": "x" * 513}, "ANGELOS_LOCAL_OWNER"),
        ],
    )
    def test_rejects(self, changes: dict[str, str | None], variable: str) -> None:
        """A bad owner or scope list leaves no local principal, and says why."""
        config = load(MAILBOX, **changes)
        assert config.local is None
        assert variables(config.problems) == [variable]
        assert config.http_auth_problems == ()
