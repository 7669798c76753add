"""`angelos google-auth` / `outlook-auth` / `microsoft-auth` as the owner runs them: a real
subprocess listening on loopback, the test as the browser's last hop, and the code redeemed at the
test's token endpoint (reached through the pinned host names by the test tree's launcher,
tests/support/pinned_launch.py).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sys
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from providers.oauth2.profiles import GOOGLE_TOKEN_HOST, MICROSOFT_TOKEN_HOST
from support.angelos_process import ROOT, free_port
from support.services import Services
from support.token_endpoint import Behaviour, TokenEndpoint, token_endpoint

pytestmark = pytest.mark.services

CLIENT_ID = "1234-test.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-consent-secret"
MS_CLIENT_ID = "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"
GRANTED = "1//granted-refresh-token-from-consent"
LAUNCH = ROOT / "tests" / "support" / "pinned_launch.py"
DEADLINE_S = 60.0  # only stops a hung test


@pytest_asyncio.fixture
async def endpoint(services: Services) -> AsyncIterator[TokenEndpoint]:
    async with token_endpoint(services.dir / "tls", services.ca_file) as server:
        server.returned_refresh_token = lambda: GRANTED
        yield server


@dataclass
class Consent:
    """One run of the command: its process, the sign-in address it printed, and its port."""

    proc: asyncio.subprocess.Process
    url: str
    port: int

    @property
    def query(self) -> dict[str, str]:
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.url).query))

    async def browser_returns(self, **params: str) -> int:
        """The browser's last hop: GET the command's loopback callback; the HTTP status."""
        url = f"http://127.0.0.1:{self.port}/callback?{urllib.parse.urlencode(params)}"
        async with (
            aiohttp.ClientSession(trust_env=False) as http,
            http.get(url, allow_redirects=False) as answer,
        ):
            return answer.status

    async def finish(self) -> tuple[int, str, str]:
        async with asyncio.timeout(DEADLINE_S):
            out, err = await self.proc.communicate()
        assert self.proc.returncode is not None
        return self.proc.returncode, out.decode(), err.decode()


async def start(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint, command: str, env: dict[str, str]
) -> Consent:
    plan = tmp_path / "routes.json"
    routes = [
        [host, 443, "127.0.0.1", endpoint.port]
        for host in (GOOGLE_TOKEN_HOST, MICROSOFT_TOKEN_HOST)
    ]
    plan.write_text(json.dumps({"ca_file": str(services.ca_file), "routes": routes}))
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(LAUNCH),
        str(plan),
        "--",
        command,
        "--port",
        str(port),
        "--wait",
        "30",
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(DEADLINE_S):
        while line := (await proc.stdout.readline()).decode():
            if line.startswith("https://"):
                break
    assert line.startswith("https://"), "the command printed no sign-in address"
    # The command is listening before it prints the address.
    return Consent(proc, line.strip(), port)


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


GOOGLE_ENV = {
    "GOOGLE_CLIENT_ID": CLIENT_ID,
    "GOOGLE_CLIENT_SECRET": CLIENT_SECRET,
    "MAIL_USERNAME": "owner@gmail.test",
}


async def test_google_consent_prints_the_refresh_token_once(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint
) -> None:
    consent = await start(tmp_path, services, endpoint, "google-auth", GOOGLE_ENV)
    query = consent.query
    assert consent.url.startswith("https://accounts.google.com/o/oauth2/v2/auth?")
    assert query["client_id"] == CLIENT_ID and query["response_type"] == "code"
    assert query["scope"] == "https://mail.google.com/"
    assert query["redirect_uri"] == f"http://127.0.0.1:{consent.port}/callback"
    assert (query["access_type"], query["prompt"]) == ("offline", "consent")
    assert query["code_challenge_method"] == "S256" and query["login_hint"] == "owner@gmail.test"
    # An answer with another state is ignored; the real one is taken.
    assert await consent.browser_returns(code="forged", state="not-the-state") == 400
    assert await consent.browser_returns(code="the-code", state=query["state"]) == 200
    code, out, err = await consent.finish()
    assert code == 0, err
    assert out.count(GRANTED) == 1 and "GOOGLE_REFRESH_TOKEN" in out
    assert GRANTED not in err and CLIENT_SECRET not in out + err
    [request] = endpoint.requests
    form = {name: values[0] for name, values in request.form.items()}
    assert request.path == "/token"
    assert form["grant_type"] == "authorization_code" and form["code"] == "the-code"
    assert (form["client_id"], form["client_secret"]) == (CLIENT_ID, CLIENT_SECRET)
    assert form["redirect_uri"] == query["redirect_uri"]
    assert s256(form["code_verifier"]) == query["code_challenge"]
    assert form["code_verifier"] not in out + err


async def test_outlook_consent_uses_the_tenant_and_no_secret(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint
) -> None:
    env = {"MICROSOFT_CLIENT_ID": MS_CLIENT_ID, "MICROSOFT_TENANT_ID": "consumers"}
    consent = await start(tmp_path, services, endpoint, "outlook-auth", env)
    query = consent.query
    assert consent.url.startswith(
        "https://login.microsoftonline.com/consumers/oauth2/v2.0/authorize?"
    )
    assert query["redirect_uri"] == f"http://localhost:{consent.port}/callback"
    assert query["scope"].split() == [
        "https://outlook.office.com/IMAP.AccessAsUser.All",
        "https://outlook.office.com/SMTP.Send",
        "offline_access",
    ]
    assert await consent.browser_returns(code="ms-code", state=query["state"]) == 200
    code, out, err = await consent.finish()
    assert code == 0, err
    assert out.count(GRANTED) == 1 and "MICROSOFT_REFRESH_TOKEN" in out
    [request] = endpoint.requests
    assert request.path == "/consumers/oauth2/v2.0/token"
    assert "client_secret" not in request.form
    assert request.form["scope"] == [query["scope"]]


async def test_a_refused_consent_prints_no_token(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint
) -> None:
    consent = await start(tmp_path, services, endpoint, "google-auth", GOOGLE_ENV)
    status = await consent.browser_returns(error="access_denied", state=consent.query["state"])
    assert status == 400
    code, out, err = await consent.finish()
    assert code == 1 and "did not grant access" in err
    assert GRANTED not in out and endpoint.requests == []


async def test_a_refused_code_fails_closed(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint
) -> None:
    endpoint.behaviour = Behaviour.REVOKED
    consent = await start(tmp_path, services, endpoint, "google-auth", GOOGLE_ENV)
    assert await consent.browser_returns(code="stale", state=consent.query["state"]) == 200
    code, out, err = await consent.finish()
    assert code == 1 and "refused the code" in err
    assert GRANTED not in out + err


async def test_an_answer_without_a_refresh_token_is_refused(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint
) -> None:
    endpoint.returned_refresh_token = None
    consent = await start(tmp_path, services, endpoint, "google-auth", GOOGLE_ENV)
    assert await consent.browser_returns(code="c", state=consent.query["state"]) == 200
    code, _, err = await consent.finish()
    assert code == 1 and "no usable refresh token" in err


def test_missing_client_settings_are_named(tmp_path: Path) -> None:
    from service.cli import main

    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    assert main(["google-auth", "--env-file", str(env_file)]) == 2


MS_TENANT = "8d2f3c1a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
MS_SECRET = "graph-consent-secret"
GRAPH_ENV = {
    "MICROSOFT_CLIENT_ID": MS_CLIENT_ID,
    "MICROSOFT_TENANT_ID": MS_TENANT,
    "MICROSOFT_CLIENT_SECRET": MS_SECRET,
    "MAIL_USERNAME": "owner@contoso.example",
}


async def test_microsoft_consent_asks_for_graph_and_says_where_the_account_id_is(
    tmp_path: Path, services: Services, endpoint: TokenEndpoint
) -> None:
    consent = await start(tmp_path, services, endpoint, "microsoft-auth", GRAPH_ENV)
    query = consent.query
    assert consent.url.startswith(
        f"https://login.microsoftonline.com/{MS_TENANT}/oauth2/v2.0/authorize?"
    )
    assert query["redirect_uri"] == f"http://127.0.0.1:{consent.port}/callback"
    assert query["scope"].split() == [
        "https://graph.microsoft.com/User.Read",
        "https://graph.microsoft.com/Mail.ReadWrite",
        "https://graph.microsoft.com/Mail.Send",
        "offline_access",
    ]
    assert query["code_challenge_method"] == "S256"
    assert query["login_hint"] == "owner@contoso.example"
    assert await consent.browser_returns(code="graph-code", state=query["state"]) == 200
    code, out, err = await consent.finish()
    assert code == 0, err
    assert out.count(GRANTED) == 1 and "MICROSOFT_REFRESH_TOKEN" in out
    assert "MICROSOFT_ACCOUNT_ID is the `id`" in out and "/v1.0/me" in out
    assert MS_SECRET not in out + err and GRANTED not in err
    [request] = endpoint.requests
    form = {name: values[0] for name, values in request.form.items()}
    assert request.path == f"/{MS_TENANT}/oauth2/v2.0/token"
    assert (form["grant_type"], form["code"]) == ("authorization_code", "graph-code")
    assert (form["client_id"], form["client_secret"]) == (MS_CLIENT_ID, MS_SECRET)
    assert (form["redirect_uri"], form["scope"]) == (query["redirect_uri"], query["scope"])
    assert s256(form["code_verifier"]) == query["code_challenge"]


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"MICROSOFT_CLIENT_SECRET": ""}, "MICROSOFT_CLIENT_SECRET: required"),
        ({"MICROSOFT_TENANT_ID": "common"}, "MICROSOFT_TENANT_ID: must be a tenant UUID"),
        ({"MICROSOFT_CLIENT_ID": "client"}, "MICROSOFT_CLIENT_ID: must be a UUID"),
    ],
)
def test_microsoft_auth_refuses_incomplete_settings_before_listening(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, str], problem: str
) -> None:
    from service.cli import main

    env_file = tmp_path / "graph.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in (GRAPH_ENV | changes).items() if v))
    env_file.chmod(0o600)
    assert main(["microsoft-auth", "--env-file", str(env_file)]) == 2
    err = capsys.readouterr().err
    assert problem in err and MS_SECRET not in err


def test_microsoft_auth_listens_on_port_8400_by_default() -> None:
    import argparse

    from service.commands.provider_grant import add_grant_commands

    parser = argparse.ArgumentParser()
    add_grant_commands(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["microsoft-auth"]).port == 8400
    assert parser.parse_args(["outlook-auth"]).port == 8401
