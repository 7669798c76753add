"""A minimal passkey relying party over HTTPS on loopback, checked with py_webauthn.

Its page runs one same-origin script under `script-src 'self'` that registers a passkey and
signs in with it, posting what the browser returns; the server keeps every verification
outcome (or the refusal) for the test to read.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import webauthn
from aiohttp import web
from webauthn.authentication.verify_authentication_response import VerifiedAuthentication
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialCreationOptions,
    PublicKeyCredentialDescriptor,
    PublicKeyCredentialRequestOptions,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)
from webauthn.registration.verify_registration_response import VerifiedRegistration

from support.angelos_process import free_port

SESSION_COOKIE = "test_session"  # set by a successful sign-in
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Passkey test</title>
<script src="/app.js" defer></script></head>
<body><h1>Passkey test</h1>
<label>Name <input id="name" autocomplete="username webauthn"></label>
<button id="register">Create a passkey</button>
<button id="signin">Sign in with the passkey</button>
<p id="status"></p></body></html>
"""

SCRIPT = """"use strict";
const status = document.getElementById("status");
async function call(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify(body ?? {}),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error);
  return data;
}
async function register() {
  const options = await call("/register/options", {name: document.getElementById("name").value});
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
  const credential = await navigator.credentials.create({publicKey});
  await call("/register", credential.toJSON());
}
async function signIn() {
  const options = await call("/signin/options");
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
  const credential = await navigator.credentials.get({publicKey});
  await call("/signin", credential.toJSON());
}
function wire(id, action, done) {
  document.getElementById(id).addEventListener("click", async () => {
    status.textContent = "working";
    try {
      await action();
      status.textContent = done;
    } catch (error) {
      status.textContent = `failed: ${error.name}: ${error.message}`;
    }
  });
}
wire("register", register, "registered");
wire("signin", signIn, "signed in");
"""


@dataclass
class PasskeySite:
    """The relying party's settings and what it verified."""

    port: int
    host: str = "localhost"  # the host name the browser is sent to
    rp_id: str = "localhost"
    # What the sign-in page asks of the authenticator; the server requires UV regardless.
    signin_asks: UserVerificationRequirement = UserVerificationRequirement.REQUIRED
    challenges: dict[str, bytes] = field(default_factory=dict)
    user_names: list[str] = field(default_factory=list)
    registrations: list[VerifiedRegistration] = field(default_factory=list)
    sign_ins: list[VerifiedAuthentication] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        """The page's origin, as the browser reports it in clientDataJSON."""
        return f"https://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The page with the two buttons."""
        return f"{self.origin}/"


def _routes(site: PasskeySite) -> web.RouteTableDef:
    routes = web.RouteTableDef()
    headers = {"Content-Security-Policy": CSP, "Cache-Control": "no-store"}

    def options_response(
        options: PublicKeyCredentialCreationOptions | PublicKeyCredentialRequestOptions,
        ceremony: str,
    ) -> web.Response:
        body = webauthn.options_to_json(options)
        site.challenges[ceremony] = webauthn.base64url_to_bytes(json.loads(body)["challenge"])
        return web.Response(text=body, content_type="application/json", headers=headers)

    def refused(reason: str) -> web.Response:
        site.refusals.append(reason)
        return web.json_response({"error": reason}, status=400, headers=headers)

    @routes.get("/")
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html", headers=headers)

    @routes.get("/app.js")
    async def script(request: web.Request) -> web.Response:
        return web.Response(text=SCRIPT, content_type="text/javascript", headers=headers)

    @routes.post("/register/options")
    async def register_options(request: web.Request) -> web.Response:
        name = str((await request.json())["name"])
        site.user_names.append(name)
        options = webauthn.generate_registration_options(
            rp_id=site.rp_id,
            rp_name="angelos test",
            user_name=name,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
        )
        return options_response(options, "register")

    @routes.post("/register")
    async def register(request: web.Request) -> web.Response:
        try:
            verified = webauthn.verify_registration_response(
                credential=await request.text(),
                expected_challenge=site.challenges.pop("register"),
                expected_rp_id=site.rp_id,
                expected_origin=site.origin,
                require_user_verification=True,
            )
        except Exception as exc:  # py_webauthn raises several types; all of them refuse
            return refused(f"{type(exc).__name__}: {exc}")
        site.registrations.append(verified)
        return web.json_response({"ok": True}, headers=headers)

    @routes.post("/signin/options")
    async def signin_options(request: web.Request) -> web.Response:
        options = webauthn.generate_authentication_options(
            rp_id=site.rp_id,
            allow_credentials=[
                PublicKeyCredentialDescriptor(id=r.credential_id) for r in site.registrations
            ],
            user_verification=site.signin_asks,
        )
        return options_response(options, "signin")

    @routes.post("/signin")
    async def signin(request: web.Request) -> web.Response:
        registration = site.registrations[-1]
        try:
            verified = webauthn.verify_authentication_response(
                credential=await request.text(),
                expected_challenge=site.challenges.pop("signin"),
                expected_rp_id=site.rp_id,
                expected_origin=site.origin,
                credential_public_key=registration.credential_public_key,
                credential_current_sign_count=registration.sign_count,
                require_user_verification=True,
            )
        except Exception as exc:  # as above
            return refused(f"{type(exc).__name__}: {exc}")
        site.sign_ins.append(verified)
        response = web.json_response({"ok": True}, headers=headers)
        response.set_cookie(
            SESSION_COOKIE, "signed-in", secure=True, httponly=True, samesite="Lax", path="/"
        )
        return response

    return routes


@contextlib.asynccontextmanager
async def passkey_site(
    tls_dir: Path, *, host: str = "localhost", rp_id: str = "localhost"
) -> AsyncIterator[PasskeySite]:
    """Serve a PasskeySite on a free 127.0.0.1 port with the test CA's localhost certificate."""
    site = PasskeySite(port=free_port(), host=host, rp_id=rp_id)
    app = web.Application()
    app.add_routes(_routes(site))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", site.port, ssl_context=context).start()
    try:
        yield site
    finally:
        await runner.cleanup()
