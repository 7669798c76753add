"""The environment exported by scripts/test-services, as one frozen value."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

# Every variable scripts/test-services exports (the product ones, then the test-only ones).
# The mailbox's own (a test configuring another provider leaves these out).
MAILBOX_VARS = (
    "MAIL_PROVIDER",
    "MAIL_USERNAME",
    "MAIL_PASSWORD",
    "MAIL_FROM",
    "IMAP_HOST",
    "IMAP_PORT",
    "SMTP_HOST",
    "SMTP_PORT",
    "SMTP_TLS_MODE",
    "MAIL_TLS_CA_FILE",
    "MAIL_ALLOW_PRIVATE_HOSTS",
)
PRODUCT_VARS = (
    "ANGELOS_REDIS_URL",
    *MAILBOX_VARS,
    "ANGELOS_DATA_DIR",  # the witness and journal of every server a test starts stay in the run
)
TEST_VARS = (
    "MAILTEST_DIR",
    "MAILTEST_USER2",
    "MAILTEST_PASSWORD2",
    "MAILTEST_LMTP_PORT",
    "MAILTEST_SMTP_SPOOL",
    "MAILTEST_DOVECOT_LOG",
    "MAILTEST_DOVECOT_CONF",
    "MAILTEST_REDIS_PORT",
    "MAILTEST_REDIS_DIR",
    "MAILTEST_REDIS_CONF",
    "MAILTEST_REDIS_PIDFILE",
    "MAILTEST_SMTP_PIDFILE",
)
# The XOAUTH2 rig beside them (Gmail-shaped Dovecot, XOAUTH2 SMTP sink, signing key). Read
# only when all are present, so an environment written before the rig existed still works.
XOAUTH2_VARS = (
    "MAILTEST_GMAIL_IMAP_PORT",
    "MAILTEST_GMAIL_USER",
    "MAILTEST_GMAIL_PASSWORD",
    "MAILTEST_GMAIL_DOVECOT_LOG",
    "MAILTEST_GMAIL_DOVECOT_CONF",
    "MAILTEST_XOAUTH2_SMTP_PORT",
    "MAILTEST_XOAUTH2_SMTP_STARTTLS_PORT",
    "MAILTEST_XOAUTH2_SMTP_SPOOL",
    "MAILTEST_XOAUTH2_KEY",
    "MAILTEST_XOAUTH2_KID",
    "MAILTEST_XOAUTH2_ISSUER",
)
SKIP_REASON = (
    "needs the real Redis/Dovecot/SMTP peers: run under "
    "`scripts/test-services run -- .venv/bin/python -m pytest` (MAILTEST_DIR is not set)"
)


@dataclass(frozen=True)
class XOAuth2Rig:
    """The Gmail-shaped mailbox and XOAUTH2 SMTP sink, and the key their tokens are signed by."""

    imap_port: int  # the Gmail-shaped Dovecot, implicit TLS, on localhost
    user: str  # its one user, a bare address: the tokens' `sub`
    password: str  # rig-only PLAIN password (fixture loading, the sink's Sent filing)
    dovecot_log: Path
    dovecot_conf: Path
    smtp_port: int  # the XOAUTH2 sink, implicit TLS
    smtp_starttls_port: int  # the same sink, STARTTLS
    smtp_spool: Path
    key_file: Path  # PEM private key (EC P-256) that signs access tokens
    kid: str
    issuer: str


@dataclass(frozen=True)
class Services:
    """Where the throwaway peers listen and how to log in to them."""

    dir: Path
    redis_url: str
    mail_provider: str
    username: str
    password: str
    mail_from: str
    imap_host: str
    imap_port: int
    smtp_host: str
    smtp_port: int
    smtp_tls_mode: str
    ca_file: Path
    allow_private_hosts: str
    user2: str
    password2: str
    lmtp_port: int
    smtp_spool: Path
    dovecot_log: Path
    dovecot_conf: Path
    redis_port: int
    redis_dir: Path
    redis_conf: Path
    redis_pidfile: Path
    smtp_pidfile: Path
    env: Mapping[str, str]
    xoauth2: XOAuth2Rig | None = None  # None: started by a scripts/test-services without it
    # The user whose mailbox backs the Graph double; "" when started without that user.
    graph_user: str = ""
    graph_password: str = ""
    cluster_nodes: tuple[str, ...] = ()  # the shared Redis Cluster's nodes (host:port)

    @property
    def cluster_url(self) -> str:
        """The shared Redis Cluster as ANGELOS_REDIS_URL names one (seeded by its first node)."""
        if not self.cluster_nodes:
            raise RuntimeError("scripts/test-services started no Redis Cluster")
        return f"redis+cluster://{self.cluster_nodes[0]}/0"

    @property
    def product_env(self) -> dict[str, str]:
        """Only the variables angelos itself reads (for starting it as a subprocess)."""
        return {k: self.env[k] for k in PRODUCT_VARS}

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the per-run test CA (and nothing else)."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    def credentials(self, user: str = "alice") -> tuple[str, str]:
        """(login, password) for "alice" (the configured mailbox) or "bob" (the second user)."""
        if user == "alice":
            return self.username, self.password
        if user == "bob":
            return self.user2, self.password2
        raise ValueError(f"unknown test user {user!r}")


def services_from_env(environ: Mapping[str, str] | None = None) -> Services | None:
    """The Services described by the environment, or None outside scripts/test-services."""
    e = os.environ if environ is None else environ
    if not e.get("MAILTEST_DIR"):
        return None
    missing = [k for k in PRODUCT_VARS + TEST_VARS if not e.get(k)]
    if missing:
        raise RuntimeError(f"MAILTEST_DIR is set but these are missing: {', '.join(missing)}")
    return Services(
        dir=Path(e["MAILTEST_DIR"]),
        redis_url=e["ANGELOS_REDIS_URL"],
        mail_provider=e["MAIL_PROVIDER"],
        username=e["MAIL_USERNAME"],
        password=e["MAIL_PASSWORD"],
        mail_from=e["MAIL_FROM"],
        imap_host=e["IMAP_HOST"],
        imap_port=int(e["IMAP_PORT"]),
        smtp_host=e["SMTP_HOST"],
        smtp_port=int(e["SMTP_PORT"]),
        smtp_tls_mode=e["SMTP_TLS_MODE"],
        ca_file=Path(e["MAIL_TLS_CA_FILE"]),
        allow_private_hosts=e["MAIL_ALLOW_PRIVATE_HOSTS"],
        user2=e["MAILTEST_USER2"],
        password2=e["MAILTEST_PASSWORD2"],
        lmtp_port=int(e["MAILTEST_LMTP_PORT"]),
        smtp_spool=Path(e["MAILTEST_SMTP_SPOOL"]),
        dovecot_log=Path(e["MAILTEST_DOVECOT_LOG"]),
        dovecot_conf=Path(e["MAILTEST_DOVECOT_CONF"]),
        redis_port=int(e["MAILTEST_REDIS_PORT"]),
        redis_dir=Path(e["MAILTEST_REDIS_DIR"]),
        redis_conf=Path(e["MAILTEST_REDIS_CONF"]),
        redis_pidfile=Path(e["MAILTEST_REDIS_PIDFILE"]),
        smtp_pidfile=Path(e["MAILTEST_SMTP_PIDFILE"]),
        env={k: e[k] for k in PRODUCT_VARS + TEST_VARS},
        xoauth2=xoauth2_rig_from_env(e),
        graph_user=e.get("MAILTEST_GRAPH_USER", ""),
        graph_password=e.get("MAILTEST_GRAPH_PASSWORD", ""),
        cluster_nodes=tuple(e.get("MAILTEST_CLUSTER_NODES", "").split()),
    )


def xoauth2_rig_from_env(e: Mapping[str, str]) -> XOAuth2Rig | None:
    """The XOAUTH2 rig described by the environment, or None when it is not there."""
    if not all(e.get(k) for k in XOAUTH2_VARS):
        return None
    return XOAuth2Rig(
        imap_port=int(e["MAILTEST_GMAIL_IMAP_PORT"]),
        user=e["MAILTEST_GMAIL_USER"],
        password=e["MAILTEST_GMAIL_PASSWORD"],
        dovecot_log=Path(e["MAILTEST_GMAIL_DOVECOT_LOG"]),
        dovecot_conf=Path(e["MAILTEST_GMAIL_DOVECOT_CONF"]),
        smtp_port=int(e["MAILTEST_XOAUTH2_SMTP_PORT"]),
        smtp_starttls_port=int(e["MAILTEST_XOAUTH2_SMTP_STARTTLS_PORT"]),
        smtp_spool=Path(e["MAILTEST_XOAUTH2_SMTP_SPOOL"]),
        key_file=Path(e["MAILTEST_XOAUTH2_KEY"]),
        kid=e["MAILTEST_XOAUTH2_KID"],
        issuer=e["MAILTEST_XOAUTH2_ISSUER"],
    )


@pytest.fixture(scope="session")
def services() -> Services:
    """The running peers; skips (with the reason shown by -ra) outside scripts/test-services."""
    found = services_from_env()
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


@pytest.fixture
def rig(services: Services) -> XOAuth2Rig:
    """The XOAUTH2 rig of this run; skips when scripts/test-services started without it."""
    if services.xoauth2 is None:
        pytest.skip("this scripts/test-services run has no XOAUTH2 rig")
    return services.xoauth2
