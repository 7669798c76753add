"""`angelos google-auth`, `outlook-auth` and `microsoft-auth`: the owner's one-time consent,
turned into the refresh token a gmail, outlook or microsoft (Graph) deployment logs in with.

The command listens on a loopback port, prints the provider's sign-in address, and waits for
the browser to come back with a code (checked against a random `state`); it redeems the code
with its PKCE verifier at the pinned token endpoint and prints the refresh token once, on
stdout, with the variable to put it in. Nothing is written to a file or a log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import sys
from collections.abc import Mapping
from typing import Final, TextIO

from aiohttp import web

from providers.oauth2.consent import (
    ConsentClient,
    PkcePair,
    authorization_url,
    google_consent,
    graph_consent,
    microsoft_consent,
    new_pkce,
    new_state,
    redeem_code,
)
from schemas.errors import MailError
from schemas.secret import Secret
from service.config import with_env_file
from service.config.table.variables import read

DEFAULT_PORT: Final = 8401
GRAPH_PORT: Final = 8400  # microsoft-auth: its web redirect URI names the port exactly
DEFAULT_WAIT_S: Final = 600.0
CALLBACK_PATH: Final = "/callback"
_DONE_PAGE: Final = (
    "<!doctype html><meta charset=utf-8><title>angelos</title>"
    "<p>{message} You can close this window and return to the terminal.</p>"
)


class GrantFailed(Exception):
    """The consent did not end in a refresh token; the message says why, without values."""


GRANT_COMMANDS: Final = ("google-auth", "outlook-auth", "microsoft-auth")
_GRAPH_ACCOUNT_HELP: Final = (
    "MICROSOFT_ACCOUNT_ID is the `id` of the mailbox owner in Microsoft Graph (the answer to"
    " GET https://graph.microsoft.com/v1.0/me?$select=id,mail,userPrincipalName); this command"
    " does not call Graph. To read it, sign in as the owner at Graph Explorer"
    " (https://developer.microsoft.com/graph/graph-explorer) and run that request; for a work or"
    " school account it is also the user's Object ID in the Microsoft Entra admin center (Users)."
    " MAIL_USERNAME and MAIL_FROM must be that answer's `mail`.\n\n"
    "A new MICROSOFT_REFRESH_TOKEN starts a new stored generation of refresh tokens; keep"
    " MICROSOFT_TOKEN_ENCRYPTION_KEY unchanged.\n"
)


def add_grant_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `google-auth`, `outlook-auth` and `microsoft-auth` to the `angelos` command."""
    for name, what, port in (
        ("google-auth", "GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET", DEFAULT_PORT),
        (
            "outlook-auth",
            "MICROSOFT_CLIENT_ID, MICROSOFT_TENANT_ID (and MICROSOFT_CLIENT_SECRET)",
            DEFAULT_PORT,
        ),
        (
            "microsoft-auth",
            "MICROSOFT_CLIENT_ID, MICROSOFT_TENANT_ID and MICROSOFT_CLIENT_SECRET",
            GRAPH_PORT,
        ),
    ):
        command = sub.add_parser(
            name,
            help=f"get the refresh token for {name.split('-')[0]} (reads {what})",
            description=__doc__,
        )
        command.add_argument("--port", type=int, default=port, help="loopback port")
        command.add_argument(
            "--wait", type=float, default=DEFAULT_WAIT_S, help="seconds to wait for the browser"
        )
        command.add_argument("--env-file", metavar="PATH", help="read the variables from PATH")


def run_grant(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO) -> int:
    """Run one consent; 0 once the refresh token is printed, 2 on bad settings, 1 otherwise."""
    env, _ = with_env_file(environ, args.env_file)
    problems: list[str] = []
    client = _client(args.command, env, args.port, problems)
    if client is None or not 0 < args.port < 65536:
        for problem in problems or ["--port must be 1..65535"]:
            print(f"angelos {args.command}: {problem}", file=sys.stderr)
        return 2
    try:
        token = asyncio.run(_consent(client, args.wait, out))
    except (GrantFailed, MailError) as failure:
        print(f"angelos {args.command}: {failure}", file=sys.stderr)
        return 1
    out.write(
        f"\nThe refresh token (shown once; keep it secret):\n\n{token.reveal()}\n\n"
        f"Put it in {client.refresh_variable} (a secret manager or your private env file), "
        "then check with `angelos check-config`.\n"
    )
    if args.command == "microsoft-auth":
        out.write("\n" + _GRAPH_ACCOUNT_HELP)
    out.flush()
    return 0


def _client(
    command: str, env: Mapping[str, str], port: int, problems: list[str]
) -> ConsentClient | None:
    login_hint = env.get("MAIL_USERNAME") or None
    if command == "google-auth":
        client_id = _required(env, "GOOGLE_CLIENT_ID", problems)
        secret = _required(env, "GOOGLE_CLIENT_SECRET", problems)
        if client_id is None or secret is None:
            return None
        return google_consent(client_id, Secret(secret), port, login_hint)
    client_id = _required(env, "MICROSOFT_CLIENT_ID", problems)
    tenant = _required(env, "MICROSOFT_TENANT_ID", problems)
    if command == "microsoft-auth":
        # Graph's client is confidential: its secret also goes with every refresh.
        graph_secret = _required(env, "MICROSOFT_CLIENT_SECRET", problems)
        if client_id is None or tenant is None or graph_secret is None or problems:
            return None
        return graph_consent(tenant, client_id, Secret(graph_secret), port, login_hint)
    secret = None
    if env.get("MICROSOFT_CLIENT_SECRET"):
        secret = read(env, "MICROSOFT_CLIENT_SECRET", problems)
    if client_id is None or tenant is None or problems:
        return None
    return microsoft_consent(
        tenant, client_id, None if secret is None else Secret(secret), port, login_hint
    )


def _required(env: Mapping[str, str], name: str, problems: list[str]) -> str | None:
    if not env.get(name):
        problems.append(f"{name}: required")
        return None
    value: str | None = read(env, name, problems)
    return value


async def _consent(client: ConsentClient, wait_s: float, out: TextIO) -> Secret:
    pkce = new_pkce()
    state = new_state()
    arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    runner = web.AppRunner(_callback_app(state, arrived), access_log=None)
    await runner.setup()
    try:
        await _listen(runner, client.port)
        out.write(
            "Open this address in a browser, sign in as the mailbox owner and allow access:\n\n"
            f"{authorization_url(client, pkce, state)}\n\n"
            f"Waiting up to {wait_s:g} s for the browser to return to {client.redirect_uri} …\n"
        )
        out.flush()
        try:
            async with asyncio.timeout(wait_s):
                code = await arrived
        except TimeoutError:
            raise GrantFailed("no answer from the browser in time; run the command again") from None
        return await _redeem(client, code, pkce)
    finally:
        await runner.cleanup()


async def _redeem(client: ConsentClient, code: str, pkce: PkcePair) -> Secret:
    return await redeem_code(client, Secret(code), pkce, timeout_s=30.0)


async def _listen(runner: web.AppRunner, port: int) -> None:
    # The browser may resolve "localhost" to either loopback address; 127.0.0.1 is required.
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
    except OSError:
        raise GrantFailed(f"port {port} on 127.0.0.1 is in use; pick another with --port") from None
    with contextlib.suppress(OSError):  # no IPv6 loopback: browsers fall back to 127.0.0.1
        await web.TCPSite(runner, "::1", port).start()


def _callback_app(state: str, arrived: asyncio.Future[str]) -> web.Application:
    async def callback(request: web.Request) -> web.Response:
        query = request.rel_url.query
        given = query.get("state", "")
        if arrived.done():
            return _page("This sign-in was already handled.", 409)
        if not hmac.compare_digest(given.encode(), state.encode()):
            return _page("This answer does not belong to the running command; it was ignored.", 400)
        if "error" in query or not query.get("code"):
            arrived.set_exception(
                GrantFailed("the provider did not grant access (consent refused or cancelled)")
            )
            return _page("Access was not granted.", 400)
        arrived.set_result(query["code"])
        return _page("Access granted.", 200)

    app = web.Application()
    app.router.add_get(CALLBACK_PATH, callback)
    return app


def _page(message: str, status: int) -> web.Response:
    return web.Response(
        text=_DONE_PAGE.format(message=message),
        status=status,
        content_type="text/html",
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )
