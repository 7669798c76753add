"""`angelos oauth signing-key` and `bootstrap-token`: fresh secrets the configuration accepts."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest

from service.cli import main
from service.config.signing_keys import load_signing_key, load_verification_key
from service.wire.b64url import decode_b64url
from support.config_env import MAILBOX, load

PEM_BLOCK = re.compile(r"-----BEGIN PRIVATE KEY-----\n.*?-----END PRIVATE KEY-----\n", re.DOTALL)
FIRST_PARTY = {
    **MAILBOX,
    "MAIL_FROM": "owner@example.com",
    "ANGELOS_OAUTH_ENABLED": "1",
    "MCP_OAUTH_ISSUER": "https://mail.example.com",
    "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
    "MCP_OAUTH_JWKS_URL": "https://mail.example.com/oauth/jwks.json",
    "MCP_ALLOWED_SUBJECTS": "owner",
    "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps(
        [{"client_id": "c", "client_name": "C", "redirect_uris": ["https://app.example.com/cb"]}]
    ),
}


def run(capsys: pytest.CaptureFixture[str], command: str) -> str:
    assert 0 == main(["oauth", command])
    captured = capsys.readouterr()
    assert "" == captured.err
    return captured.out


def setting(output: str, name: str) -> str:
    (value,) = re.findall(rf"^{name}=(.*)$", output, re.MULTILINE)
    return value


def test_the_signing_key_and_its_id_configure_first_party_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = run(capsys, "signing-key")
    (pem,) = PEM_BLOCK.findall(output)
    kid = setting(output, "ANGELOS_OAUTH_SIGNING_KEY_ID")
    config = load(FIRST_PARTY, ANGELOS_OAUTH_SIGNING_KEY_PEM=pem, ANGELOS_OAUTH_SIGNING_KEY_ID=kid)
    assert config.first_party is not None
    assert (kid, ()) == (config.first_party.signing_kid, config.first_party_problems)


def test_the_key_block_is_announced_as_secret_and_the_id_as_not_secret(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = run(capsys, "signing-key").splitlines()
    begin = lines.index("-----BEGIN PRIVATE KEY-----")
    kid_line = next(i for i, line in enumerate(lines) if line.startswith("ANGELOS_OAUTH_SIGNING"))
    assert lines[0].startswith("# SECRET: the PEM block below is ANGELOS_OAUTH_SIGNING_KEY_PEM")
    assert lines[kid_line - 1].startswith("# Not secret:")
    assert begin < kid_line


def test_the_printed_public_key_is_the_signing_keys_public_half(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = run(capsys, "signing-key")
    (pem,) = PEM_BLOCK.findall(output)
    kid = setting(output, "ANGELOS_OAUTH_SIGNING_KEY_ID")
    document = json.loads(output.strip().splitlines()[-1])
    assert [kid] == list(document)
    public = load_verification_key(document[kid])
    assert load_signing_key(pem).public_key().public_numbers() == public.public_numbers()


def test_each_run_prints_a_new_key(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = run(capsys, "signing-key"), run(capsys, "signing-key")
    assert PEM_BLOCK.findall(first) != PEM_BLOCK.findall(second)


def test_the_bootstrap_token_is_unpadded_base64url_of_32_bytes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = run(capsys, "bootstrap-token")
    token = next(line for line in output.splitlines() if not line.startswith("#"))
    decoded = decode_b64url(token)
    assert (43, 32) == (len(token), decoded and len(decoded))


def test_the_hash_line_is_the_sha256_of_the_token_text_and_the_loader_takes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = run(capsys, "bootstrap-token")
    token = next(line for line in output.splitlines() if not line.startswith("#"))
    digest = setting(output, "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH")
    assert hashlib.sha256(token.encode()).hexdigest() == digest
    assert [] == [
        problem
        for problem in load(FIRST_PARTY, ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH=digest).problems
        if problem.startswith("ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH")
    ]


def test_the_token_is_announced_as_secret_and_the_hash_as_not_secret(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = run(capsys, "bootstrap-token").splitlines()
    token_at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    hash_at = next(i for i, line in enumerate(lines) if line.startswith("ANGELOS_OAUTH_"))
    assert lines[0].startswith("# SECRET, shown once: the enrollment token")
    assert lines[hash_at - 1].startswith("# Not secret:")
    assert token_at < hash_at


def test_each_run_prints_a_new_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "bootstrap-token") != run(capsys, "bootstrap-token")


def test_the_commands_run_from_the_command_line_without_any_configuration() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "oauth", "bootstrap-token"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert (0, "") == (done.returncode, done.stderr)
    assert "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH=" in done.stdout
