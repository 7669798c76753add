"""The `angelos` command: serve, check-config, demo, ledger, oauth and the provider grants
(google-auth, outlook-auth, microsoft-auth)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

import structlog

from service.commands.oauth_keys import add_oauth_commands, run_oauth
from service.commands.provider_grant import GRANT_COMMANDS, add_grant_commands, run_grant
from service.config import (
    Config,
    check_config_lines,
    ledger_problems,
    load_config,
    with_env_file,
)
from service.ledger_cli import ENV_FILE_HELP, add_ledger_commands, run_ledger
from service.logging import configure_logging

log = structlog.get_logger("angelos")
# The CPU pool's threads share the interpreter lock with the event loop; the loop takes it
# back after every socket call, waiting up to this long each time (5 ms by default).
SERVE_SWITCH_INTERVAL_S = 0.001


def startup_problems(config: Config) -> list[str]:
    """Return the problems that stop a local server (HTTP auth settings are not needed there)."""
    problems = [p for p in config.problems if p not in config.http_auth_problems]
    if config.mail is None and not problems:
        problems.append("mailbox configuration is missing")
    return problems


def cannot_start(problems: Sequence[str]) -> str:
    """One line that says what is wrong and where to fix it, without any value."""
    found = "; ".join(problems)
    if any(problem.startswith("ANGELOS_ENV_FILE:") for problem in problems):
        fix = (
            "Fix the env file named by --env-file or ANGELOS_ENV_FILE"
            " (format: docs/configuration.md), then restart the server."
        )
    else:
        fix = (
            'Set or correct these variables in the "env" block of this server in your MCP client\'s'
            " configuration, or in a private env file passed with --env-file"
            " (docs/deployment.md); `angelos check-config` shows every variable."
        )
    return f"angelos cannot start: {found}. {fix}"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the chosen command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="angelos", description="MCP server for one mailbox")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve MCP over stdio or HTTP")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="HTTP port (default: $PORT or 8080)")
    serve.add_argument(
        "--insecure-local-owner",
        metavar="NAME",
        help="serve HTTP without authentication on loopback only, as owner NAME",
    )
    serve.add_argument("--env-file", metavar="PATH", help=ENV_FILE_HELP)
    check = sub.add_parser("check-config", help="print every variable's effective value")
    check.add_argument("--env-file", metavar="PATH", help=ENV_FILE_HELP)
    check.add_argument(
        "--ledger-only",
        action="store_true",
        help="only what `angelos ledger` reads: an auditor's pre-flight, no mailbox needed",
    )
    demo = sub.add_parser("demo", help="walk through the mailbox with a real MCP client")
    demo.add_argument("--json", action="store_true", help="the raw results, one per line")
    add_ledger_commands(
        sub.add_parser("ledger", help="audit, export, replay and recover the ledger")
    )
    add_oauth_commands(sub.add_parser("oauth", help="make first-party OAuth keys and tokens"))
    add_grant_commands(sub)
    args = parser.parse_args(argv)
    if args.command == "oauth":
        return run_oauth(args, sys.stdout)
    if args.command in GRANT_COMMANDS:
        return run_grant(args, os.environ, sys.stdout)
    env, env_file = with_env_file(os.environ, getattr(args, "env_file", None))
    config = load_config(env, env_file)
    if args.command == "check-config":
        for line in check_config_lines(config, ledger_only=args.ledger_only):
            print(line)
        if args.ledger_only:
            return 1 if ledger_problems(config) else 0
        # Resource-server problems count too: a group set at all is meant to work.
        return 1 if startup_problems(config) or config.http_auth_problems else 0
    if args.command == "ledger":
        configure_logging("warning")
        return run_ledger(args, config)
    configure_logging()
    sys.setswitchinterval(SERVE_SWITCH_INTERVAL_S)
    if args.command == "demo":
        from service.commands.demo import run_demo

        return asyncio.run(run_demo(as_json=args.json, sending=config.demo_send))
    if args.transport == "stdio":
        return serve_stdio(config)
    if config.env_file is not None and config.env_file.problems:
        log.error(cannot_start(config.env_file.problems))
        return 2
    return serve_http(config, args.host, args.port or config.port, args.insecure_local_owner)


def serve_stdio(config: Config) -> int:
    """Serve one MCP client on stdin/stdout; on bad configuration, tell the client why."""
    problems = startup_problems(config)
    if problems or config.local is None:
        from service.transports.stdio_refusal import refuse_stdio

        line = cannot_start(problems or ["ANGELOS_LOCAL_SCOPES/ANGELOS_LOCAL_OWNER are invalid"])
        log.error(line)
        asyncio.run(refuse_stdio(line, tuple(problems)))
        return 2
    from service.transports.stdio import run_stdio

    asyncio.run(run_stdio(config, config.local))
    return 0


def serve_http(config: Config, host: str, port: int, owner: str | None) -> int:
    """Serve stateless HTTP with bearer authentication, or as a loopback owner without it.

    Without a valid resource-server configuration the server still starts and answers 503 on
    /mcp, so a deployment platform's health checks see why (`configured: false`).
    """
    from service.transports.host_policy import is_loopback
    from service.transports.serve_http import run_http

    if owner is not None and not is_loopback(host):
        print("angelos: --insecure-local-owner serves only on a loopback address", file=sys.stderr)
        return 2
    if not 0 < port < 65536:  # Host and Origin checks need the real port
        print("angelos: --port must be 1..65535", file=sys.stderr)
        return 2
    for problem in config.http_auth_problems if owner is None else ():
        log.error("resource server configuration problem", problem=problem)
    return asyncio.run(run_http(config, host, port, owner))


if __name__ == "__main__":
    raise SystemExit(main())
