"""`angelos oauth …`: make the secrets first-party mode needs, for the operator's secret manager.

Nothing here reads or writes configuration: the server never generates its key or token
itself, so these commands print fresh ones and say which lines are secret (docs/configuration.md).
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from service.auth.server.bootstrap import new_bootstrap_token
from service.auth.server.signing import new_signing_key, public_pem
from service.config.signing_keys import load_signing_key


def add_oauth_commands(parser: argparse.ArgumentParser) -> None:
    """Add the `oauth` subcommands to the `angelos oauth` parser."""
    sub = parser.add_subparsers(dest="oauth_command", required=True)
    sub.add_parser("signing-key", help="print a new P-256 signing key (secret) and a key ID")
    sub.add_parser(
        "bootstrap-token", help="print a one-time enrollment token (secret) and its hash"
    )


def run_oauth(args: argparse.Namespace, out: TextIO) -> int:
    """Run one `angelos oauth` command, writing to out; returns the exit status."""
    if args.oauth_command == "signing-key":
        print_signing_key(out)
    else:
        print_bootstrap_token(out)
    return 0


def print_signing_key(out: TextIO) -> None:
    """Print a fresh key, its suggested kid, and its public half for a later rotation."""
    pem, kid = new_signing_key()
    public = public_pem(load_signing_key(pem))
    out.write(
        "# SECRET: the PEM block below is ANGELOS_OAUTH_SIGNING_KEY_PEM. Store it, with its line\n"
        "# breaks, in your platform's secret manager only; never in a file, chat or repository.\n"
        f"{pem}"
        "# Not secret: the key ID to set beside it (a new one with every new key):\n"
        f"ANGELOS_OAUTH_SIGNING_KEY_ID={kid}\n"
        "# Not secret: the public key, for ANGELOS_OAUTH_VERIFICATION_KEYS_JSON when rotating\n"
        "# (publish it there before switching to this key, keep it there after switching away):\n"
        f"{json.dumps({kid: public})}\n"
    )


def print_bootstrap_token(out: TextIO) -> None:
    """Print a fresh enrollment token and the hash line the server needs."""
    token, digest = new_bootstrap_token()
    out.write(
        "# SECRET, shown once: the enrollment token. Paste it into the sign-in page to enroll the\n"
        "# owner's first passkey; keep it nowhere else.\n"
        f"{token}\n"
        "# Not secret: set this in the server's environment; remove it after enrollment:\n"
        f"ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH={digest}\n"
    )
