"""First-party mode (ANGELOS_OAUTH_*): the identity relations, clients, keys and their problems."""

from __future__ import annotations

import json
import time

import pytest

from service.auth.server.signing import Signer
from service.config import CHATGPT_CLIENT_ID, Config, check_config_lines
from service.config._model import Client
from service.config._urls import redirect_uri_problem
from support.config_env import MAILBOX, load
from support.oauth_keys import (
    encrypted_pkcs8,
    p256,
    p384_pkcs8,
    pkcs8,
    public_pem,
    scalar_hex,
    sec1,
    secret_fragments,
)

KEY = p256()
PEM = pkcs8(KEY)
RETIRING = p256()
HASH = "5f" * 32
CLAUDE: dict[str, object] = {
    "client_id": "angelos-claude",
    "client_name": "Claude",
    "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
}
FIRST_PARTY = {
    **MAILBOX,
    "MAIL_FROM": "owner@example.com",
    "ANGELOS_OAUTH_ENABLED": "1",
    "MCP_OAUTH_ISSUER": "https://mail.example.com",
    "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
    "MCP_OAUTH_JWKS_URL": "https://mail.example.com/oauth/jwks.json",
    "MCP_ALLOWED_SUBJECTS": "owner",
    "ANGELOS_OAUTH_SIGNING_KEY_PEM": PEM,
    "ANGELOS_OAUTH_SIGNING_KEY_ID": "k-2025",
    "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": json.dumps({"k-2024": public_pem(RETIRING)}),
    "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps([CLAUDE]),
    "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": HASH,
}
LOCAL = {
    **FIRST_PARTY,
    "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "1",
    "MCP_OAUTH_ISSUER": "https://localhost:8443",
    "MCP_RESOURCE_URL": "https://localhost:8443/mcp",
    "MCP_OAUTH_JWKS_URL": "https://localhost:8443/oauth/jwks.json",
}
CLIENTS = "ANGELOS_OAUTH_CLIENTS_JSON"
KEYS = "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON"


def clients(*entries: dict[str, object]) -> str:
    return json.dumps(list(entries))


def client(**changes: object) -> dict[str, object]:
    return {**CLAUDE, **changes}


def refused(config: Config) -> tuple[str, ...]:
    """The first-party problems, after checking the mode is off and nothing else got through."""
    assert config.first_party is None
    assert config.http_auth is None
    assert set(config.first_party_problems) <= set(config.http_auth_problems)
    return config.first_party_problems


class TestGoodConfiguration:
    def test_a_good_environment_yields_the_first_party_configuration(self) -> None:
        first_party = load(FIRST_PARTY).first_party
        assert first_party is not None
        assert (
            "https://mail.example.com",
            "https://mail.example.com/mcp",
            "https://mail.example.com/oauth/jwks.json",
            "owner",
            "k-2025",
            ["k-2024"],
            (Client("angelos-claude", "Claude", ("https://claude.ai/api/mcp/auth_callback",)),),
            False,
            "owner@example.com",
            False,
        ) == (
            first_party.issuer,
            first_party.resource,
            first_party.jwks_url,
            first_party.owner,
            first_party.signing_kid,
            [key.kid for key in first_party.verification_keys],
            first_party.clients,
            first_party.cimd_enabled,
            first_party.mail_from,
            first_party.allow_private_hosts,
        )

    def test_the_signing_key_and_bootstrap_hash_are_the_configured_ones(self) -> None:
        first_party = load(FIRST_PARTY).first_party
        assert first_party is not None
        assert scalar_hex(KEY) == scalar_hex(first_party.signing_key)
        assert HASH == (first_party.bootstrap_hash and first_party.bootstrap_hash.reveal())

    def test_a_good_environment_has_no_problem_and_a_resource_server(self) -> None:
        config = load(FIRST_PARTY)
        assert ((), ()) == (config.problems, config.first_party_problems)
        assert config.http_auth is not None and config.first_party is not None
        assert config.first_party.issuer == config.http_auth.issuer

    def test_the_signer_publishes_the_active_then_the_retiring_key(self) -> None:
        first_party = load(FIRST_PARTY).first_party
        assert first_party is not None
        document = json.loads(Signer.of(first_party).jwks_document())
        assert ["k-2025", "k-2024"] == [entry["kid"] for entry in document["keys"]]

    def test_a_sec1_key_and_a_padded_kid_are_accepted(self) -> None:
        config = load(
            FIRST_PARTY, ANGELOS_OAUTH_SIGNING_KEY_PEM=sec1(KEY), ANGELOS_OAUTH_SIGNING_KEY_ID=" k "
        )
        assert config.first_party is not None
        assert "k" == config.first_party.signing_kid

    def test_the_optional_settings_may_be_absent(self) -> None:
        config = load(
            FIRST_PARTY,
            ANGELOS_OAUTH_VERIFICATION_KEYS_JSON=None,
            ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH=None,
        )
        assert config.first_party is not None
        assert ((), None) == (
            config.first_party.verification_keys,
            config.first_party.bootstrap_hash,
        )

    def test_the_chatgpt_switch_stands_in_for_the_client_list(self) -> None:
        config = load(
            FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=None, ANGELOS_OAUTH_CLIENT_METADATA_ENABLED="1"
        )
        assert config.first_party is not None
        assert ((), True) == (config.first_party.clients, config.first_party.cimd_enabled)

    def test_unknown_client_members_are_ignored(self) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=clients(client(logo_uri="x")))
        assert config.first_party is not None
        assert ("angelos-claude",) == tuple(c.client_id for c in config.first_party.clients)

    def test_the_private_hosts_switch_lets_the_issuer_be_a_loopback_name_with_a_port(self) -> None:
        first_party = load(LOCAL).first_party
        assert first_party is not None
        assert ("https://localhost:8443", "https://localhost:8443/mcp", True) == (
            first_party.issuer,
            first_party.resource,
            first_party.allow_private_hosts,
        )

    def test_first_party_mode_off_has_no_configuration_and_no_problems(self) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_ENABLED=None)
        assert (None, ()) == (config.first_party, config.first_party_problems)
        # The same settings as an external issuer: a root issuer on the MCP host is refused.
        assert config.http_auth is None and "first-party mode" in config.problems[0]

    def test_only_the_exact_value_1_enables_it(self) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_ENABLED="true")
        assert (None, False) == (config.first_party, config.first_party_enabled)


ISSUER_RELATIONS = [
    (
        {"MCP_OAUTH_JWKS_URL": "https://mail.example.com/jwks.json"},
        "MCP_OAUTH_JWKS_URL: first-party mode needs exactly MCP_OAUTH_ISSUER + /oauth/jwks.json",
    ),
    (
        {"MCP_RESOURCE_URL": "https://api.example.com/mcp"},
        "MCP_RESOURCE_URL: first-party mode needs exactly MCP_OAUTH_ISSUER + /mcp",
    ),
    (
        {"MCP_ALLOWED_SUBJECTS": "owner,other"},
        "MCP_ALLOWED_SUBJECTS: first-party mode needs exactly one owner subject: no comma, no"
        " surrounding whitespace, at most 512 bytes",
    ),
    (
        {"MCP_ALLOWED_SUBJECTS": " owner"},
        "MCP_ALLOWED_SUBJECTS: first-party mode needs exactly one owner subject: no comma, no"
        " surrounding whitespace, at most 512 bytes",
    ),
    (
        {"MAIL_FROM": None},
        "MAIL_FROM: first-party mode needs it set explicitly (consent shows it)",
    ),
    (
        {"ANGELOS_REDIS_URL": "off"},
        "ANGELOS_REDIS_URL: first-party mode needs a store; off is not allowed",
    ),
]

MALFORMED_ISSUERS = [
    ("https://mail.example.com/", "a bare origin: no path, not even a trailing slash"),
    ("https://mail.example.com/auth", "a bare origin: no path, not even a trailing slash"),
    ("https://Mail.example.com", "the scheme and host in lower case"),
    ("HTTPS://mail.example.com", "the scheme and host in lower case"),
    ("https://mail.example.com:443", "exactly https://<host>, with no port"),
]


class TestIdentityRelations:
    @pytest.mark.parametrize(("changes", "problem"), ISSUER_RELATIONS)
    def test_a_broken_relation_is_one_problem_line(
        self, changes: dict[str, str | None], problem: str
    ) -> None:
        assert (problem,) == refused(load(FIRST_PARTY, **changes))

    @pytest.mark.parametrize(("issuer", "rule"), MALFORMED_ISSUERS)
    def test_an_issuer_that_is_not_a_bare_lower_case_origin_is_refused(
        self, issuer: str, rule: str
    ) -> None:
        config = load(FIRST_PARTY, MCP_OAUTH_ISSUER=issuer)
        assert (f"MCP_OAUTH_ISSUER: first-party mode needs {rule}",) == refused(config)

    def test_an_issuer_port_without_the_private_hosts_switch_is_the_url_rules_problem(
        self,
    ) -> None:
        config = load(
            FIRST_PARTY,
            MCP_OAUTH_ISSUER="https://mail.example.com:8443",
            MCP_RESOURCE_URL="https://mail.example.com:8443/mcp",
            MCP_OAUTH_JWKS_URL="https://mail.example.com:8443/oauth/jwks.json",
        )
        assert config.first_party is None
        assert (
            "MCP_OAUTH_ISSUER: port must be absent or 443 (MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1 lifts"
            " this, for tests and self-hosted issuers only)"
        ) in config.problems

    def test_with_the_private_hosts_switch_a_written_443_is_still_refused(self) -> None:
        config = load(LOCAL, MCP_OAUTH_ISSUER="https://localhost:443")
        assert (
            "MCP_OAUTH_ISSUER: first-party mode needs exactly https://<host>, with a port other"
            " than 443 as :<port>",
        ) == refused(config)

    def test_with_the_private_hosts_switch_the_relations_stay_exact(self) -> None:
        config = load(LOCAL, MCP_RESOURCE_URL="https://localhost/mcp")
        assert (
            "MCP_RESOURCE_URL: first-party mode needs exactly MCP_OAUTH_ISSUER + /mcp",
        ) == refused(config)

    def test_a_root_issuer_on_the_resource_host_is_no_problem_in_first_party_mode(self) -> None:
        assert not any(
            "root issuer" in problem for problem in load(FIRST_PARTY, MAIL_FROM=None).problems
        )

    def test_an_absent_resource_server_group_is_reported_in_first_party_mode(self) -> None:
        env = {name: value for name, value in FIRST_PARTY.items() if not name.startswith("MCP_")}
        config = load(env)
        assert config.first_party is None
        assert "MCP_RESOURCE_URL: required" in config.http_auth_problems

    def test_an_invalid_store_url_leaves_first_party_mode_off_without_another_line(self) -> None:
        config = load(FIRST_PARTY, ANGELOS_REDIS_URL="redis://db.example.com")
        assert ((), None) == (config.first_party_problems, config.first_party)
        assert any(problem.startswith("ANGELOS_REDIS_URL:") for problem in config.problems)

    def test_a_broken_first_party_mode_never_falls_back_to_external_verification(self) -> None:
        assert None is load(FIRST_PARTY, MAIL_FROM=None).http_auth


class TestSigningKeys:
    @pytest.mark.parametrize(
        ("pem", "problem"),
        [
            (
                None,
                "ANGELOS_OAUTH_SIGNING_KEY_PEM: required in first-party mode; make one with"
                " `angelos oauth signing-key` and keep it in the secret manager",
            ),
            (
                encrypted_pkcs8(KEY),
                "ANGELOS_OAUTH_SIGNING_KEY_PEM: is encrypted; store the key unencrypted in the"
                " secret manager",
            ),
            (p384_pkcs8(), "ANGELOS_OAUTH_SIGNING_KEY_PEM: must be on the P-256 curve"),
            (
                public_pem(KEY),
                "ANGELOS_OAUTH_SIGNING_KEY_PEM: must be a PRIVATE KEY or EC PRIVATE KEY block",
            ),
        ],
    )
    def test_a_missing_or_unusable_signing_key_is_refused(
        self, pem: str | None, problem: str
    ) -> None:
        assert (problem,) == refused(load(FIRST_PARTY, ANGELOS_OAUTH_SIGNING_KEY_PEM=pem))

    @pytest.mark.parametrize(
        ("kid", "problem"),
        [
            (None, "required in first-party mode (a new one with each key)"),
            ("  ", "required in first-party mode (a new one with each key)"),
            ("k" * 129, "must be 1-128 bytes without control characters"),
            ("k\x7f1", "must be 1-128 bytes without control characters"),
        ],
    )
    def test_a_missing_or_overlong_signing_kid_is_refused(
        self, kid: str | None, problem: str
    ) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_SIGNING_KEY_ID=kid)
        assert (f"ANGELOS_OAUTH_SIGNING_KEY_ID: {problem}",) == refused(config)

    def test_more_than_four_verification_keys_are_refused(self) -> None:
        document = json.dumps({f"old-{n}": public_pem(p256()) for n in range(5)})
        config = load(FIRST_PARTY, ANGELOS_OAUTH_VERIFICATION_KEYS_JSON=document)
        assert (f"{KEYS}: must hold at most 4 keys",) == refused(config)

    def test_four_verification_keys_are_accepted_and_sorted_by_kid(self) -> None:
        document = json.dumps({kid: public_pem(p256()) for kid in ("d", "b", "a", "c")})
        first_party = load(FIRST_PARTY, ANGELOS_OAUTH_VERIFICATION_KEYS_JSON=document).first_party
        assert first_party is not None
        assert ["a", "b", "c", "d"] == [key.kid for key in first_party.verification_keys]

    def test_a_verification_kid_equal_to_the_active_kid_is_refused(self) -> None:
        document = json.dumps({"k-2025": public_pem(RETIRING)})
        config = load(FIRST_PARTY, ANGELOS_OAUTH_VERIFICATION_KEYS_JSON=document)
        assert (f"{KEYS}: key 1: kid must differ from ANGELOS_OAUTH_SIGNING_KEY_ID",) == refused(
            config
        )

    @pytest.mark.parametrize(
        ("document", "problem"),
        [
            (json.dumps({"old": pkcs8(RETIRING)}), "key 1: must be a PUBLIC KEY block"),
            (
                json.dumps({"old": public_pem(p256()), "p384": p384_pkcs8()}),
                "key 2: must be a PUBLIC KEY block",
            ),
            (json.dumps({"old": ""}), "key 1: must be a PUBLIC KEY PEM string"),
            (json.dumps({"old": 1}), "key 1: must be a PUBLIC KEY PEM string"),
            (
                json.dumps({"": public_pem(RETIRING)}),
                "key 1: kid must be 1-128 bytes without control characters",
            ),
            (json.dumps({" old": public_pem(RETIRING)}), "key 1: kid must not be padded"),
            (json.dumps([public_pem(RETIRING)]), "must be a JSON object"),
            ('{"a":"x","a":"y"}', "is not strict JSON (duplicate-member)"),
            ("{" + " " * 32768 + "}", "must be at most 32768 bytes"),
        ],
    )
    def test_a_verification_key_set_outside_the_rules_is_refused(
        self, document: str, problem: str
    ) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_VERIFICATION_KEYS_JSON=document)
        assert (f"{KEYS}: {problem}",) == refused(config)

    def test_an_uppercase_bootstrap_hash_is_refused(self) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH=HASH.upper())
        assert (
            "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH: must be 64 lower-case hex characters, the line"
            " `angelos oauth bootstrap-token` prints",
        ) == refused(config)

    @pytest.mark.parametrize("value", ["5f" * 31, "5f" * 33, "g" * 64, " " + "5f" * 32])
    def test_a_bootstrap_hash_of_another_shape_is_refused(self, value: str) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH=value)
        assert ["ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH"] == [
            problem.split(":", 1)[0] for problem in refused(config)
        ]


class TestRenamedSwitch:
    @pytest.mark.parametrize("value", ["1", "0"])
    def test_the_old_chatgpt_switch_is_a_problem_naming_its_new_name(self, value: str) -> None:
        """An upgrade that still sets the old switch fails closed and says what to set."""
        config = load(FIRST_PARTY, ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED=value)
        (problem,) = refused(config)
        assert problem.startswith("ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED: renamed")
        assert "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=1" in problem

    def test_outside_first_party_mode_the_old_switch_changes_nothing(self) -> None:
        config = load(
            FIRST_PARTY, ANGELOS_OAUTH_ENABLED=None, ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED="1"
        )
        assert (None, ()) == (config.first_party, config.first_party_problems)


class TestClients:
    @pytest.mark.parametrize("document", [None, "[]"])
    def test_no_clients_while_the_chatgpt_switch_is_off_is_refused(
        self, document: str | None
    ) -> None:
        config = load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        assert (
            f"{CLIENTS}: at least one client is needed unless"
            " ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=1 or ANGELOS_OAUTH_REGISTRATION_ENABLED=1",
        ) == refused(config)

    def test_no_clients_with_registration_on_is_allowed(self) -> None:
        config = load(
            FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=None, ANGELOS_OAUTH_REGISTRATION_ENABLED="1"
        )
        assert config.first_party is not None
        assert (True, ()) == (config.first_party.registration_enabled, config.first_party.clients)

    def test_a_repeated_client_id_is_refused(self) -> None:
        document = clients(CLAUDE, client(client_name="Claude again"))
        assert (f"{CLIENTS}: client 2: client_id repeats client 1",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    def test_a_client_id_repeated_after_trimming_is_refused(self) -> None:
        document = clients(CLAUDE, client(client_id=" angelos-claude"))
        assert (f"{CLIENTS}: client 2: client_id repeats client 1",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    def test_the_chatgpt_url_as_a_client_id_is_refused(self) -> None:
        document = clients(client(client_id=CHATGPT_CLIENT_ID))
        assert (
            f"{CLIENTS}: client 1: client_id must not be the ChatGPT client; set"
            " ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=1 for it instead",
        ) == refused(load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document))

    def test_a_case_fold_alias_of_a_member_name_is_refused(self) -> None:
        document = '[{"client_id":"a","CLIENT_ID":"b","client_name":"A","redirect_uris":[]}]'
        assert (f"{CLIENTS}: is not strict JSON (case-fold-duplicate-member)",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    @pytest.mark.parametrize(
        ("uri", "rule"),
        [
            ("https://claude.ai/cb#frag", "must not have a fragment"),
            ("http://claude.ai/cb", "must be an https:// URL"),
            ("https://203.0.113.7/cb", "host must not be an IP literal"),
            (
                "https://claude.ai/cb?state=x",
                "query must not hold code, error, error_description, state or iss",
            ),
        ],
    )
    def test_a_redirect_uri_breaking_the_rule_is_refused(self, uri: str, rule: str) -> None:
        document = clients(client(redirect_uris=["https://claude.ai/ok", uri]))
        assert (f"{CLIENTS}: client 1: redirect URI 2 {rule}",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    def test_the_private_hosts_switch_does_not_lift_the_redirect_uri_rule(self) -> None:
        document = clients(client(redirect_uris=["https://localhost:8443/cb"]))
        assert (f"{CLIENTS}: client 1: redirect URI 1 port must be absent or 443",) == refused(
            load(LOCAL, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    @pytest.mark.parametrize(
        ("entry", "problem"),
        [
            ("x", "client 1: must be an object"),
            (
                client(client_id=""),
                "client 1: client_id must be a string of 1-512 bytes without control characters",
            ),
            (
                client(client_id=1),
                "client 1: client_id must be a string of 1-512 bytes without control characters",
            ),
            (
                client(client_id="x" * 513),
                "client 1: client_id must be a string of 1-512 bytes without control characters",
            ),
            (
                client(client_name="n" * 129),
                "client 1: client_name must be a string of 1-128 bytes without control characters",
            ),
            (
                client(client_name=" "),
                "client 1: client_name must be a string of 1-128 bytes without control characters",
            ),
            (client(redirect_uris=[]), "client 1: redirect_uris must be a list of 1-8 URI strings"),
            (
                client(redirect_uris=[f"https://claude.ai/{n}" for n in range(9)]),
                "client 1: redirect_uris must be a list of 1-8 URI strings",
            ),
            (
                client(redirect_uris="https://claude.ai/cb"),
                "client 1: redirect_uris must be a list of 1-8 URI strings",
            ),
            (
                client(redirect_uris=["https://claude.ai/a", "https://claude.ai/a"]),
                "client 1: redirect URI 2 repeats URI 1",
            ),
        ],
    )
    def test_a_client_entry_outside_the_rules_is_refused(self, entry: object, problem: str) -> None:
        document = json.dumps([entry])
        assert (f"{CLIENTS}: {problem}",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    def test_seventeen_clients_are_refused(self) -> None:
        document = clients(*(client(client_id=f"c{n}") for n in range(17)))
        assert (f"{CLIENTS}: must list at most 16 clients",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    def test_sixteen_clients_with_eight_uris_each_are_accepted(self) -> None:
        uris = [f"https://app.example.com/cb/{n}" for n in range(8)]
        document = clients(*(client(client_id=f"c{n}", redirect_uris=uris) for n in range(16)))
        first_party = load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document).first_party
        assert first_party is not None
        assert 16 == len(first_party.clients)

    @pytest.mark.parametrize(
        ("document", "problem"),
        [
            ("[" + " " * 32768 + "]", "must be at most 32768 bytes"),
            ("[" * 33 + "]" * 33, "is not strict JSON (depth)"),
            ('[{"a":1,"a":2}]', "is not strict JSON (duplicate-member)"),
            ("[] x", "is not strict JSON (trailing-data)"),
            (json.dumps(CLAUDE), "must be a JSON array"),
        ],
    )
    def test_a_client_document_outside_the_json_rules_is_refused(
        self, document: str, problem: str
    ) -> None:
        assert (f"{CLIENTS}: {problem}",) == refused(
            load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        )

    def test_a_client_document_at_the_size_limit_is_checked_within_a_second(self) -> None:
        """A loaded machine still checks the largest document, every URI near 2048 characters."""
        path = "/".join(["segment"] * 240)
        entries = [
            client(client_id=f"c{n}", redirect_uris=[f"https://app.example.com/{path}"])
            for n in range(16)
        ]
        entries[-1] = client(
            client_id="last", redirect_uris=[f"https://app.example.com/{path}?state=1"]
        )
        document = clients(*entries)
        document = document[:-1] + " " * (32768 - len(document)) + "]"
        started = time.perf_counter()
        config = load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=document)
        elapsed = time.perf_counter() - started
        assert 32768 == len(document.encode())
        assert (
            f"{CLIENTS}: client 16: redirect URI 1 query must not hold code, error,"
            " error_description, state or iss",
        ) == config.first_party_problems
        assert elapsed < 1.0


ACCEPTED_REDIRECTS = [
    "https://claude.ai/api/mcp/auth_callback",
    "https://chatgpt.com/connector_platform_oauth_redirect",
    "https://app.example.com:443/cb",
    "https://app.example.com/cb?tenant=a&mode=b",
    "https://app.example.com",
    "https://app.example.com?x=1",
]
REFUSED_REDIRECTS = [
    ("", "must be 1-2048 characters"),
    ("https://app.example.com/" + "x" * 2025, "must be 1-2048 characters"),
    ("https://app.example.com/a b", "must be printable ASCII without whitespace or backslashes"),
    ("https://app.example.com/a\\b", "must be printable ASCII without whitespace or backslashes"),
    ("https://app.example.com/\u00e9", "must be printable ASCII without whitespace or backslashes"),
    ("HTTPS://app.example.com/cb", "must be an https:// URL"),
    ("https:app.example.com/cb", "must be an https:// URL"),
    ("http://127.0.0.1:8080/cb", "must be an https:// URL"),
    ("https://app.example.com/cb#", "must not have a fragment"),
    ("https://app.example.com/%2e%2e/cb", "must not contain percent-encoding"),
    ("https://app.example.com/cb?%73tate=1", "must not contain percent-encoding"),
    ("https://user@app.example.com/cb", "must not contain userinfo"),
    ("https://app.example.com:8443/cb", "port must be absent or 443"),
    ("https://app.example.com:/cb", "port must be absent or 443"),
    ("https://[2001:db8::1]/cb", "host must not be an IP literal"),
    ("https://localhost/cb", "host must be a public DNS name containing a dot"),
    (
        "https://app.localhost/cb",
        "host must not end in .localhost, .local, .internal, .invalid, .test or .onion",
    ),
    ("https://App.example.com/cb", "host must be lower-case"),
    ("https://app_1.example.com/cb", "host labels must be 1-63 of a-z, 0-9 and inner hyphens"),
    ("https://app.example.com./cb", "host labels must be 1-63 of a-z, 0-9 and inner hyphens"),
    ("https://app.example.com/a/../cb", "path must not contain '.' or '..' segments"),
    ("https://app.example.com/./cb", "path must not contain '.' or '..' segments"),
    ("https://app.example.com/cb?", "must not end in a bare '?'"),
    (
        "https://app.example.com/cb?code=1",
        "query must not hold code, error, error_description, state or iss",
    ),
    (
        "https://app.example.com/cb?a=1&iss",
        "query must not hold code, error, error_description, state or iss",
    ),
    (
        "https://app.example.com/cb?error_description=",
        "query must not hold code, error, error_description, state or iss",
    ),
]


class TestRedirectUriRule:
    @pytest.mark.parametrize("uri", ACCEPTED_REDIRECTS)
    def test_an_https_uri_on_a_public_name_is_accepted(self, uri: str) -> None:
        assert None is redirect_uri_problem(uri)

    @pytest.mark.parametrize(("uri", "rule"), REFUSED_REDIRECTS)
    def test_a_uri_breaking_one_rule_names_that_rule(self, uri: str, rule: str) -> None:
        assert rule == redirect_uri_problem(uri)

    def test_a_uri_of_2048_characters_is_accepted(self) -> None:
        uri = "https://app.example.com/" + "x" * (2048 - 24)
        assert (2048, None) == (len(uri), redirect_uri_problem(uri))


BAD_ENVIRONMENTS = [
    {"ANGELOS_OAUTH_SIGNING_KEY_PEM": PEM.replace("\n", "\\n")},
    {"ANGELOS_OAUTH_SIGNING_KEY_PEM": PEM + PEM},
    {"ANGELOS_OAUTH_SIGNING_KEY_PEM": "-----BEGIN PRIVATE KEY-----\n" + PEM},
    {"ANGELOS_OAUTH_SIGNING_KEY_PEM": PEM[:-40] + "\n-----END PRIVATE KEY-----\n"},
    {"ANGELOS_OAUTH_SIGNING_KEY_PEM": encrypted_pkcs8(KEY)},
    {"ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": json.dumps({"x": PEM})},
    {"ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": json.dumps({PEM: public_pem(RETIRING)})},
    {"ANGELOS_OAUTH_CLIENTS_JSON": json.dumps([client(client_id=PEM)])},
    {"ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": HASH.upper()},
    {"ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": HASH + "0"},
    {"ANGELOS_OAUTH_SIGNING_KEY_ID": PEM},
]
MATERIAL = [*secret_fragments(PEM), scalar_hex(KEY), HASH, HASH.upper()]


def leaks(text: str) -> list[str]:
    return [fragment for fragment in MATERIAL if fragment in text]


class TestNoLeaks:
    @pytest.mark.parametrize("changes", BAD_ENVIRONMENTS)
    def test_no_problem_line_or_repr_holds_key_material_or_the_hash(
        self, changes: dict[str, str]
    ) -> None:
        config = load(FIRST_PARTY, **changes)
        assert config.first_party_problems
        assert [] == leaks(repr(config))
        assert [] == leaks("\n".join(check_config_lines(config)))

    def test_a_good_configuration_shows_neither_the_key_nor_the_hash(self) -> None:
        config = load(FIRST_PARTY)
        assert config.first_party is not None
        reprs = [repr(config), repr(config.first_party), repr(Signer.of(config.first_party))]
        shown = "\n".join([*reprs, *check_config_lines(config)])
        assert [] == leaks(shown)

    def test_check_config_shows_secrets_as_set_and_the_rest_by_value(self) -> None:
        lines = check_config_lines(load(FIRST_PARTY))
        pairs = (line.strip().split(" = ", 1) for line in lines if " = " in line)
        values = {name: value for name, value in pairs if name.startswith("ANGELOS_OAUTH_")}
        assert {
            "ANGELOS_OAUTH_ENABLED": "on",
            "ANGELOS_OAUTH_SIGNING_KEY_PEM": "set",
            "ANGELOS_OAUTH_SIGNING_KEY_ID": "k-2025",
            "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": "k-2024",
            "ANGELOS_OAUTH_CLIENTS_JSON": "angelos-claude",
            "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED": "off",
            "ANGELOS_OAUTH_REGISTRATION_ENABLED": "off",
            "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": "set",
            "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED": "unset",  # the renamed switch (refused group)
        } == values

    def test_one_bad_client_entry_marks_only_the_client_list_invalid(self) -> None:
        bad = clients(CLAUDE, client(client_id="other", redirect_uris=["http://example.com/cb"]))
        config = load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=bad)
        lines = check_config_lines(config)
        pairs = (line.strip().split(" = ", 1) for line in lines if " = " in line)
        values = {
            name: value
            for name, value in pairs
            if name.startswith(("ANGELOS_OAUTH_", "MCP_", "ANGELOS_TRUSTED_"))
        }
        assert config.first_party is None and config.http_auth is None  # still fails closed
        assert {
            "ANGELOS_OAUTH_ENABLED": "on",
            "ANGELOS_OAUTH_SIGNING_KEY_PEM": "set",
            "ANGELOS_OAUTH_SIGNING_KEY_ID": "k-2025",
            "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": "k-2024",
            "ANGELOS_OAUTH_CLIENTS_JSON": "invalid (see Problems)",
            "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED": "off",
            "ANGELOS_OAUTH_REGISTRATION_ENABLED": "off",
            "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": "set",
            "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED": "unset",
            "ANGELOS_TRUSTED_PROXIES": "none",
            "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
            "MCP_OAUTH_ISSUER": "https://mail.example.com",
            "MCP_OAUTH_JWKS_URL": "https://mail.example.com/oauth/jwks.json",
            "MCP_ALLOWED_SUBJECTS": "owner",
            "MCP_OAUTH_INITIAL_SCOPES": "mail.read",
            "MCP_OAUTH_CA_FILE": "unset",
            "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "off",
        } == values
        assert [] == [line for line in lines if "not resolved" in line]
        assert [] == leaks("\n".join(lines))


def test_a_native_client_registers_loopback_and_private_use_callbacks() -> None:
    uris = ["http://127.0.0.1/oauth/callback", "cursor://anysphere.cursor-retrieval/oauth/callback"]
    config = load(
        FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=clients(client(redirect_uris=uris, native=True))
    )
    assert config.first_party is not None
    [native] = config.first_party.clients
    assert (True, tuple(uris)) == (native.native, native.redirect_uris)


def test_a_client_not_native_may_not_register_a_loopback_callback() -> None:
    uris = ["http://127.0.0.1/oauth/callback"]
    config = load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=clients(client(redirect_uris=uris)))
    assert (f"{CLIENTS}: client 1: redirect URI 1 must be an https:// URL",) == refused(config)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            client(native=True, redirect_uris=["http://127.0.0.1:1/cb", "http://127.0.0.1:2/cb"]),
            "redirect URI 2 repeats URI 1",
        ),
        (client(native=True, redirect_uris=["http://evil.example/cb"]), "redirect URI 1 an http"),
        (client(native="yes"), "native must be true or false"),
    ],
    ids=["loopback-twice", "http-elsewhere", "native-not-boolean"],
)
def test_native_clients_off_the_rules_are_refused(entry: dict[str, object], problem: str) -> None:
    [found] = refused(load(FIRST_PARTY, ANGELOS_OAUTH_CLIENTS_JSON=clients(entry)))
    assert found.startswith(f"{CLIENTS}: client 1: ") and problem in found
