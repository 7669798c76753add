"""What the resource server trusts: MCP_OAUTH_ALLOW_PRIVATE_HOSTS, MCP_OAUTH_CA_FILE, and the
URLs derived from MCP_RESOURCE_URL; with their check-config lines.

Acceptance checks covered here (docs/acceptance/auth-config.md): 4, 9, 44, 45 with the switch on,
and R1 for these variables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import HttpAuthConfig, check_config_lines
from support.config_env import EXTERNAL, MAILBOX, assert_rejected, load, variables

# A resource server whose issuer runs on the same machine, as in the tests and self-hosting.
PRIVATE = {
    **EXTERNAL,
    "MCP_RESOURCE_URL": "https://localhost:8443/mcp",
    "MCP_OAUTH_ISSUER": "https://issuer.test:8443/realms/x",
    "MCP_OAUTH_JWKS_URL": "https://issuer.test:8443/realms/x/certs",
    "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "1",
}
# Everything of the public HTTPS rule except the host and port rules still holds with the switch.
STILL_REJECTED_URLS = [
    "http://localhost:8443/mcp",
    "https://user:pass@localhost:8443/mcp",
    "https://localhost:8443/mcp?x=1",
    "https://localhost:8443/mcp?",
    "https://localhost:8443/mcp#part",
    "https://localhost:8443/%2e%2e/mcp",
    "https://localhost:8443/a%2Fb/mcp",
    "https://localhost%3A8443/mcp",
    "https://localhost:8443/a/../mcp",
    "https://localhost:8443/./mcp",
    "https://localhost:8443/a\\b/mcp",
    "https://localhost:8443/mcp\r\n",
    "https://localhost:8443/m\x7fcp",
    "https://localhost:8443/mcp\u00e9",
    "https://localhost:0/mcp",
    "https://localhost:65536/mcp",
    "https://localhost:08443/mcp",
    "https://localhost:/mcp",
    "https://localhost:84a3/mcp",
    "https://:8443/mcp",
    "https://[::1/mcp",
    "https://[::1]x/mcp",
    "https://[127.0.0.1]/mcp",
    "https://[localhost]:8443/mcp",
    "https://::1/mcp",
    "https://127.1:9000/mcp",
    "https://0x7f.0.0.1:9000/mcp",
    "https://127.0.0.01:9000/mcp",
    "https://local_host:8443/mcp",
    "https://localhost.:8443/mcp",
    "https://-localhost:8443/mcp",
    "https://" + "a" * 64 + ":8443/mcp",
    "https:localhost:8443/mcp",
]


def write_bundle(directory: Path) -> Path:
    """A file standing in for a PEM bundle (the loader checks only that it can be read)."""
    bundle = directory / "issuer-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    return bundle


class TestPrivateHostsSwitch:
    def test_switch_and_ca_file_are_off_by_default(self) -> None:
        """Without the two variables the public rule applies and the system CAs alone count."""
        http_auth = load(EXTERNAL).http_auth
        assert http_auth is not None
        assert (http_auth.allow_private_hosts, http_auth.ca_file) == (False, None)

    def test_switch_on_is_kept(self) -> None:
        """MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1 is recorded for the JWKS fetch."""
        http_auth = load(PRIVATE).http_auth
        assert http_auth is not None
        assert http_auth.allow_private_hosts is True

    @pytest.mark.parametrize("value", ["true", "yes", "on", "0", " 1", "1 ", "01", "11"], ids=repr)
    def test_only_exactly_1_switches_it_on(self, value: str) -> None:
        """Like the gates, anything but "1" leaves the public rule in force."""
        config = load(PRIVATE, MCP_OAUTH_ALLOW_PRIVATE_HOSTS=value)
        assert_rejected(config, "MCP_RESOURCE_URL")
        assert_rejected(config, "MCP_OAUTH_ISSUER")
        assert_rejected(config, "MCP_OAUTH_JWKS_URL")

    def test_other_values_are_off_not_problems(self) -> None:
        """A public configuration with MCP_OAUTH_ALLOW_PRIVATE_HOSTS=true is valid, switch off."""
        config = load(EXTERNAL, MCP_OAUTH_ALLOW_PRIVATE_HOSTS="true")
        assert config.problems == ()
        assert config.http_auth is not None
        assert config.http_auth.allow_private_hosts is False

    @pytest.mark.parametrize(
        "url",
        [
            "https://localhost:8443/mcp",
            "https://127.0.0.1:9000/mcp",
            "https://[::1]:9000/mcp",
            "https://[::1]/mcp",
            "https://10.0.0.7/mcp",
            "https://mail:1/mcp",
            "https://mail.local:65535/mcp",
            "https://app.localhost/mcp",
            "https://LOCALHOST:8443/mcp",
        ],
    )
    def test_private_resource_urls_are_accepted(self, url: str) -> None:
        """IP literals, single labels, reserved suffixes and any port 1..65535 are lifted."""
        config = load(PRIVATE, MCP_RESOURCE_URL=url)
        assert config.http_auth_problems == ()
        assert config.http_auth is not None
        assert config.http_auth.resource_url == url

    @pytest.mark.parametrize(
        ("issuer", "jwks"),
        [
            ("https://issuer.test:8443/realms/x", "https://issuer.test:8443/realms/x/certs"),
            ("https://127.0.0.1:9000/realms/x", "https://127.0.0.1:9000/jwks"),
            ("https://[::1]:9000/realms/x", "https://[::1]:9000/jwks"),
            ("https://keycloak:8443/realms/x", "https://KEYCLOAK:8443/certs"),
            ("https://idp.internal", "https://idp.internal:443/keys"),
            ("https://idp.example.com/", "https://idp.example.com/keys"),
        ],
    )
    def test_private_issuers_are_accepted(self, issuer: str, jwks: str) -> None:
        """The issuer and its JWKS URL may be private too, on the same host and port."""
        config = load(PRIVATE, MCP_OAUTH_ISSUER=issuer, MCP_OAUTH_JWKS_URL=jwks)
        assert config.http_auth_problems == ()
        assert config.http_auth is not None
        assert (config.http_auth.issuer, config.http_auth.jwks_url) == (issuer, jwks)

    @pytest.mark.parametrize("url", STILL_REJECTED_URLS, ids=repr)
    @pytest.mark.parametrize(
        "variable", ["MCP_OAUTH_JWKS_URL", "MCP_OAUTH_ISSUER", "MCP_RESOURCE_URL"]
    )
    def test_the_rest_of_the_url_rule_still_holds(self, variable: str, url: str) -> None:
        """https only; no userinfo, query, fragment, %, dot segments, controls; real ports."""
        config = load(PRIVATE, **{variable: url})
        assert_rejected(config, variable)
        assert f"{variable}: path must be exactly /mcp" not in config.problems
        assert all(url not in problem for problem in config.problems)

    @pytest.mark.parametrize(
        "jwks",
        [
            "https://issuer.test:8444/realms/x/certs",
            "https://issuer.test/realms/x/certs",
            "https://issuer.test:443/realms/x/certs",
            "https://other.test:8443/realms/x/certs",
            "https://127.0.0.1:8443/realms/x/certs",
        ],
    )
    def test_jwks_on_another_host_or_port_than_the_issuer_is_rejected(self, jwks: str) -> None:
        """The switch lifts the port rule, never the same-host-and-port relation."""
        config = load(PRIVATE, MCP_OAUTH_JWKS_URL=jwks)
        assert_rejected(config, "MCP_OAUTH_JWKS_URL")
        assert config.http_auth_problems == (
            "MCP_OAUTH_JWKS_URL: must be on the same host and port as MCP_OAUTH_ISSUER",
        )

    def test_ipv6_spellings_of_one_address_are_the_same_host(self) -> None:
        """Hosts compare as addresses: [::1] and [0:0:0:0:0:0:0:1] are one host."""
        config = load(
            PRIVATE,
            MCP_OAUTH_ISSUER="https://[::1]:9000/realms/x",
            MCP_OAUTH_JWKS_URL="https://[0:0:0:0:0:0:0:1]:9000/jwks",
        )
        assert config.http_auth is not None

    @pytest.mark.parametrize("path", ["/api", "/mcp/", "", "/MCP"], ids=repr)
    def test_resource_path_must_still_be_exactly_mcp(self, path: str) -> None:
        """Check 4 holds with the switch on."""
        config = load(PRIVATE, MCP_RESOURCE_URL=f"https://localhost:8443{path}")
        assert_rejected(config, "MCP_RESOURCE_URL")
        assert config.http_auth_problems == ("MCP_RESOURCE_URL: path must be exactly /mcp",)

    @pytest.mark.parametrize("issuer", ["https://localhost:8443/", "https://LocalHost:8443"])
    def test_root_issuer_on_the_resource_host_and_port_is_refused(self, issuer: str) -> None:
        """Check 9 holds with the switch on: same host and effective port as the resource."""
        config = load(
            PRIVATE, MCP_OAUTH_ISSUER=issuer, MCP_OAUTH_JWKS_URL="https://localhost:8443/jwks"
        )
        assert_rejected(config, "MCP_OAUTH_ISSUER")

    def test_root_issuer_on_another_port_of_the_resource_host_is_allowed(self) -> None:
        """Another port is another origin, so it is an external issuer."""
        config = load(
            PRIVATE,
            MCP_OAUTH_ISSUER="https://localhost:9443/",
            MCP_OAUTH_JWKS_URL="https://localhost:9443/jwks",
        )
        assert config.http_auth is not None

    def test_problem_names_the_switch_when_it_would_lift_the_rule(self) -> None:
        """An operator with a private issuer learns which variable lifts the rule."""
        config = load(EXTERNAL, MCP_OAUTH_ISSUER="https://keycloak/realms/x")
        assert config.http_auth_problems[0] == (
            "MCP_OAUTH_ISSUER: host must be a public DNS name containing a dot"
            " (MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1 lifts this, for tests and self-hosted issuers only)"
        )

    def test_problem_does_not_name_the_switch_when_it_would_not_help(self) -> None:
        """http:// stays refused with the switch, so the switch is not suggested."""
        config = load(EXTERNAL, MCP_OAUTH_ISSUER="http://keycloak:8443/realms/x")
        assert config.http_auth_problems[0] == "MCP_OAUTH_ISSUER: must be an https URL"


class TestResourceUrlDerivations:
    @pytest.mark.parametrize(
        ("resource_url", "metadata_url", "authority"),
        [
            ("https://mail.example.com/mcp", "https://mail.example.com", ("mail.example.com", 443)),
            ("https://Mail.Example.COM/mcp", "https://Mail.Example.COM", ("mail.example.com", 443)),
            (
                "HTTPS://mail.example.com:443/mcp",
                "https://mail.example.com",
                ("mail.example.com", 443),
            ),
            ("https://localhost:8443/mcp", "https://localhost:8443", ("localhost", 8443)),
            ("https://127.0.0.1:9000/mcp", "https://127.0.0.1:9000", ("127.0.0.1", 9000)),
            ("https://[::1]:9000/mcp", "https://[::1]:9000", ("::1", 9000)),
            ("https://[0:0::1]:443/mcp", "https://[0:0::1]", ("::1", 443)),
            ("https://[2001:DB8:0:0::1]/mcp", "https://[2001:DB8:0:0::1]", ("2001:db8::1", 443)),
        ],
    )
    def test_metadata_url_and_resource_authority(
        self, resource_url: str, metadata_url: str, authority: tuple[str, int]
    ) -> None:
        """The origin as written, without :443; (host, port) lower-cased, IPv6 compressed."""
        http_auth = load(PRIVATE, MCP_RESOURCE_URL=resource_url).http_auth
        assert http_auth is not None
        assert metadata_url + "/.well-known/oauth-protected-resource" == http_auth.metadata_url
        assert authority == http_auth.resource_authority

    def test_a_hand_built_config_with_an_unusable_resource_url_has_no_metadata_url(self) -> None:
        """A private resource URL without the switch is refused, not turned into a URL."""
        http_auth = HttpAuthConfig(
            resource_url="https://localhost:8443/mcp",
            issuer="https://login.example.com/",
            jwks_url="https://login.example.com/jwks",
            allowed_subjects=("owner-123",),
            initial_scopes=("mail.read",),
        )
        with pytest.raises(ValueError, match=r"^MCP_RESOURCE_URL: port must be absent or 443$"):
            _ = http_auth.metadata_url


class TestOAuthCaFile:
    def test_existing_readable_file_is_kept(self, tmp_path: Path) -> None:
        """MCP_OAUTH_CA_FILE names the extra CA bundle of the JWKS fetch."""
        bundle = write_bundle(tmp_path)
        http_auth = load(EXTERNAL, MCP_OAUTH_CA_FILE=str(bundle)).http_auth
        assert http_auth is not None
        assert str(bundle) == http_auth.ca_file

    @pytest.mark.parametrize("name", ["missing.pem", "", "nul\x00.pem"], ids=repr)
    def test_missing_file_or_directory_is_rejected(self, tmp_path: Path, name: str) -> None:
        """A path that is not a readable file is refused without repeating the path."""
        config = load(EXTERNAL, MCP_OAUTH_CA_FILE=str(tmp_path / name))
        assert_rejected(config, "MCP_OAUTH_CA_FILE")
        problem = "MCP_OAUTH_CA_FILE: must name an existing readable file"
        assert (problem,) == config.http_auth_problems

    def test_mailbox_ca_file_is_not_the_issuer_ca_file(self, tmp_path: Path) -> None:
        """MAIL_TLS_CA_FILE is for IMAP and SMTP only; the JWKS fetch keeps the system CAs."""
        http_auth = load(EXTERNAL, MAIL_TLS_CA_FILE=str(write_bundle(tmp_path))).http_auth
        assert http_auth is not None
        assert http_auth.ca_file is None

    @pytest.mark.parametrize("variable", ["MCP_OAUTH_CA_FILE", "MCP_OAUTH_ALLOW_PRIVATE_HOSTS"])
    def test_either_new_variable_alone_asks_for_the_whole_group(
        self, tmp_path: Path, variable: str
    ) -> None:
        """Like every MCP_* variable, setting one of them means an HTTP resource server is meant."""
        value = str(write_bundle(tmp_path)) if variable == "MCP_OAUTH_CA_FILE" else "1"
        config = load(MAILBOX, **{variable: value})
        assert variables(config.http_auth_problems) == [
            "MCP_RESOURCE_URL",
            "MCP_OAUTH_ISSUER",
            "MCP_OAUTH_JWKS_URL",
            "MCP_ALLOWED_SUBJECTS",
        ]


class TestCheckConfigLines:
    PASSWORD = "pw-Hq7#mZ3!tW"
    PRIVATE_WARNING = (
        "WARNING: MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1: the resource server trusts issuers and signing"
        " keys on private and loopback hosts and on any port; for tests and self-hosted issuers"
        " only"
    )
    CA_WARNING = (
        "WARNING: MCP_OAUTH_CA_FILE is set: signing keys are fetched trusting the CAs in that file"
        " as well as the system CAs"
    )

    def test_both_variables_are_shown_with_a_warning_each(self, tmp_path: Path) -> None:
        """R1: the values, then one WARNING line each before the verdict; no secret anywhere."""
        bundle = write_bundle(tmp_path)
        config = load(PRIVATE, MCP_OAUTH_CA_FILE=str(bundle), MAIL_PASSWORD=self.PASSWORD)
        lines = check_config_lines(config)
        assert f"  MCP_OAUTH_CA_FILE = {bundle}" in lines
        assert "  MCP_OAUTH_ALLOW_PRIVATE_HOSTS = on" in lines
        assert [self.PRIVATE_WARNING, self.CA_WARNING, "No problems found."] == lines[-3:]
        assert all(self.PASSWORD not in line for line in lines)

    def test_private_hosts_alone_warn_once(self) -> None:
        """Only the switch that is on is warned about."""
        lines = check_config_lines(load(PRIVATE))
        assert [self.PRIVATE_WARNING] == [line for line in lines if line.startswith("WARNING")]

    def test_ca_file_alone_warns_once(self, tmp_path: Path) -> None:
        """A CA bundle on a public configuration gets its own warning only."""
        lines = check_config_lines(load(EXTERNAL, MCP_OAUTH_CA_FILE=str(write_bundle(tmp_path))))
        assert [self.CA_WARNING] == [line for line in lines if line.startswith("WARNING")]

    @pytest.mark.parametrize("base", [EXTERNAL, MAILBOX], ids=["external", "no-http-auth"])
    def test_defaults_are_shown_without_warning(self, base: dict[str, str]) -> None:
        """Unset CA file and switch off: nothing to warn about."""
        config = load(base, MCP_OAUTH_ALLOW_PRIVATE_HOSTS=None)
        lines = check_config_lines(config)
        expected_switch = "off" if base is EXTERNAL else "unset"
        assert "  MCP_OAUTH_CA_FILE = unset" in lines
        assert f"  MCP_OAUTH_ALLOW_PRIVATE_HOSTS = {expected_switch}" in lines
        assert not any(line.startswith("WARNING") for line in lines)

    def test_unreadable_ca_file_is_a_problem_without_its_path(self, tmp_path: Path) -> None:
        """R1: the line says invalid; neither it nor the problem repeats the path; no warning."""
        missing = str(tmp_path / "missing-issuer-ca.pem")
        config = load(EXTERNAL, MCP_OAUTH_CA_FILE=missing, MAIL_PASSWORD=self.PASSWORD)
        lines = check_config_lines(config)
        assert "  MCP_OAUTH_CA_FILE = invalid (see Problems)" in lines
        assert "  - MCP_OAUTH_CA_FILE: must name an existing readable file" in lines
        assert not any(line.startswith("WARNING") for line in lines)
        assert all(missing not in line and self.PASSWORD not in line for line in lines)
