"""The frozen configuration Structs; credentials are held as Secret so no repr shows them."""

from __future__ import annotations

import ipaddress
from typing import Any

import msgspec

from providers.smtp.settings import TlsMode
from schemas.scopes import Scope
from schemas.secret import Secret
from schemas.send_policy import NO_POLICY, SendPolicy
from service.config._urls import HttpsUrl, parse_public_https_url
from service.config.signing_keys import VerificationKey


class Gates(msgspec.Struct, frozen=True):
    """Operator switches; each is on only for the exact value "1"."""

    writes: bool
    send: bool
    delete: bool


class OAuthLogin(msgspec.Struct, frozen=True):
    """The refresh grant a mailbox logs in with: XOAUTH2 (gmail, outlook) or Graph (microsoft)."""

    issuer: str  # "google" or "microsoft"
    client_id: str
    client_secret: Secret | None
    refresh_token: Secret
    tenant: str | None = None  # microsoft: a tenant UUID or "consumers"


class GraphAccount(msgspec.Struct, frozen=True):
    """What a Microsoft Graph mailbox adds to its grant: whose mailbox, and the token store key."""

    account_id: str  # MICROSOFT_ACCOUNT_ID: the `id` of Graph's /me
    # MICROSOFT_TOKEN_ENCRYPTION_KEY as 64 lower-case hex characters (32 bytes, AES-256-GCM)
    token_key: Secret


class MailConfig(msgspec.Struct, frozen=True):
    """The one configured mailbox (IMAP + SMTP, or Microsoft Graph) after validation."""

    provider: str
    auth_mode: str
    username: str
    password: Secret | None
    from_addr: str
    aliases: tuple[str, ...]
    imap_host: str
    imap_port: int
    smtp_host: str
    smtp_port: int
    smtp_tls_mode: TlsMode
    smtp_max_connections: int
    timeout_s: float
    tls_ca_file: str | None
    allow_private_hosts: bool
    gmail_imap: bool
    smtp_stores_sent: bool
    oauth: OAuthLogin | None = None  # set for google_oauth2, microsoft_oauth2, microsoft_graph
    graph: GraphAccount | None = None  # set for microsoft (microsoft_graph) only


class StoreConfig(msgspec.Struct, frozen=True):
    """The send-ledger store and every ledger tuning variable (docs/configuration.md)."""

    mode: str  # "embedded" | "redis" | "off"
    url: Secret | None
    data_dir: str
    home: str | None  # the HOME that places data_dir when nothing else does
    xdg_data_home: str | None  # XDG_DATA_HOME when usable (absolute), else None
    namespace: str
    hmac_key: Secret | None
    retention_s: int
    fsync_provider_managed: bool
    assume_noeviction: bool
    waitaof_replicas: int
    wait_replicas: int
    fsync_timeout_ms: int
    tool_deadline_s: int
    smtp_data_termination_timeout_s: int
    dispatch_deadline_s: int
    outcome_persist_window_s: int
    sent_filing_timeout_s: int
    recovery_grace_s: int
    recovery_interval_s: int
    dispatcher_lease_ms: int
    dispatcher_lease_refresh_ms: int
    annotation_cap: int
    test_mode: bool  # ANGELOS_ALLOW_FAULT_INJECTION=1 and ANGELOS_ENV=test
    test_prepare_ttl_ms: int | None
    archive_dir: str | None = None
    audit_signing_key: Secret | None = None  # the signer key text; parsed where it signs
    archive_checkpoint_s: int = 300
    archive_segment_bytes: int = 67_108_864


class HttpAuthConfig(msgspec.Struct, frozen=True):
    """External-issuer resource-server settings (the MCP_* variables)."""

    resource_url: str
    issuer: str
    jwks_url: str
    allowed_subjects: tuple[str, ...]
    initial_scopes: tuple[Scope, ...]
    ca_file: str | None = None  # extra trusted CAs for the JWKS fetch
    allow_private_hosts: bool = False  # the URLs may name loopback/private hosts and any port

    @property
    def metadata_url(self) -> str:
        """The Protected Resource Metadata URL: the resource URL's origin, as written."""
        return self._resource().origin + "/.well-known/oauth-protected-resource"

    @property
    def resource_authority(self) -> tuple[str, int]:
        """(lower-case host, effective port) of the resource URL; IPv6 unbracketed, compressed."""
        resource = self._resource()
        return resource.host, resource.port

    def _resource(self) -> HttpsUrl:
        resource, rule = parse_public_https_url(
            self.resource_url, allow_private_hosts=self.allow_private_hosts
        )
        if resource is None:  # only a hand-built config can get here; the loader refuses it
            raise ValueError(f"MCP_RESOURCE_URL: {rule}")
        return resource


class Client(msgspec.Struct, frozen=True):
    """A predefined public client: PKCE S256, no secret, only these redirect URIs (https exact;
    a native one may also have loopback URIs, any port, and private-use scheme URIs)."""

    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    native: bool = False


class FirstPartyConfig(msgspec.Struct, frozen=True):
    """The first-party authorization server (ANGELOS_OAUTH_*), with its identity relations met."""

    issuer: str  # https://<lower-case host>, a port only with MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1
    resource: str  # issuer + /mcp
    jwks_url: str  # issuer + /oauth/jwks.json
    owner: str  # the one allowed subject
    signing_key: Any  # cryptography's EllipticCurvePrivateKey (P-256); its repr is opaque
    signing_kid: str
    verification_keys: tuple[VerificationKey, ...]  # retiring public keys, sorted by kid
    clients: tuple[Client, ...]
    cimd_enabled: bool  # clients by their metadata document (ChatGPT's pinned one among them)
    bootstrap_hash: Secret | None  # lower-case hex SHA-256 of the enrollment token
    mail_from: str  # shown on the consent page
    allow_private_hosts: bool = False
    # ANGELOS_TRUSTED_PROXIES: whose X-Forwarded-For names an anonymous visitor's source
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    ca_file: str | None = None  # MCP_OAUTH_CA_FILE: extra CAs for client metadata documents
    registration_enabled: bool = False  # ANGELOS_OAUTH_REGISTRATION_ENABLED (RFC 7591)


class LocalPrincipal(msgspec.Struct, frozen=True):
    """The principal of the stdio transport: ANGELOS_LOCAL_OWNER with ANGELOS_LOCAL_SCOPES."""

    owner: str
    scopes: tuple[Scope, ...]


class EnvFileInfo(msgspec.Struct, frozen=True):
    """What an explicitly named env file contributed: never its values."""

    path: str
    names: tuple[str, ...]  # variables taken from the file (the environment left them unset)
    problems: tuple[str, ...]  # non-empty: the file was refused and none of it was used


class Config(msgspec.Struct, frozen=True):
    """Everything read from the environment, with every problem found on the way."""

    mail: MailConfig | None
    store: StoreConfig | None
    gates: Gates
    http_auth: HttpAuthConfig | None
    local: LocalPrincipal | None
    port: int
    problems: tuple[str, ...]
    http_auth_problems: tuple[str, ...]
    store_problems: tuple[str, ...] = ()  # the part of `problems` about the ledger store
    env_file: EnvFileInfo | None = None
    # The mailbox as far as it resolved, for check-config only; `mail` is None when invalid.
    mail_shown: MailConfig | None = None
    demo_send: bool = False  # ANGELOS_DEMO_SEND, read by `angelos demo`
    # The owner's send policy (ANGELOS_SEND_APPROVAL, MAIL_SEND_*); when one of them is refused
    # the send gate is off, so a send never runs under less than the owner asked for.
    send_policy: SendPolicy = NO_POLICY
    first_party_enabled: bool = False  # ANGELOS_OAUTH_ENABLED=1
    # In that mode, the issuer when it is a bare https origin (None: every request is refused).
    first_party_origin: str | None = None
    first_party: FirstPartyConfig | None = None  # set when enabled and everything it needs is valid
    first_party_problems: tuple[str, ...] = ()  # the part of `http_auth_problems` about it
    # For check-config only, when a broken first-party mode left `http_auth` None: the resource
    # server as it resolved, and each ANGELOS_OAUTH_* value that resolved by its own rules.
    http_auth_shown: HttpAuthConfig | None = None
    first_party_shown: tuple[tuple[str, Any], ...] = ()
