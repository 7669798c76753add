"""The OAuth test peer (oidc-provider from scripts/test-services) issues what the auth tests assume.

Tokens come from the real issuer over TLS through tests/support/oidc.py; signatures are checked
with PyJWT against the JWKS the issuer publishes.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from typing import Any

import aiohttp
import jwt
import pytest

from support.oidc import (
    REDIRECT_URI,
    OAuthError,
    OidcPeer,
    authorize_without_browser,
    issue_token,
    peer_from_env,
    pkce_pair,
    refresh_token,
    register_public_client,
    server_metadata,
)
from support.services import Services

pytestmark = pytest.mark.services

RESOURCE = "https://localhost:8443/mcp"
PRIVATE_MEMBERS = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"}


@pytest.fixture
def peer(services: Services) -> OidcPeer:
    """The issuer of this run (`services` skips outside scripts/test-services)."""
    return peer_from_env()


async def get_json(peer: OidcPeer, url: str) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=peer.ssl_context())) as http,
        http.get(url) as response,
    ):
        assert 200 == response.status
        body: dict[str, Any] = json.loads(await response.read())
        return body


async def verified_claims(peer: OidcPeer, token: str, audience: str) -> dict[str, Any]:
    """The claims of an ES256 token whose signature checks against the issuer's published JWKS."""
    keys = jwt.PyJWKSet.from_dict(await get_json(peer, peer.jwks_url))
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    claims: dict[str, Any] = jwt.decode(
        token, key=key, algorithms=["ES256"], audience=audience, issuer=peer.issuer
    )
    return claims


def authorization_url(meta: dict[str, Any], client_id: str, **overrides: str) -> str:
    _, challenge = pkce_pair()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": "mail.read",
        "state": "s1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
    } | overrides
    query = {k: v for k, v in query.items() if v}
    return f"{meta['authorization_endpoint']}?{urllib.parse.urlencode(query)}"


def redirect_query(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


class TestDiscovery:
    async def test_the_metadata_names_the_exported_issuer_and_jwks_url(
        self, peer: OidcPeer
    ) -> None:
        meta = await server_metadata(peer)
        assert (peer.issuer, peer.jwks_url) == (meta["issuer"], meta["jwks_uri"])

    async def test_the_openid_configuration_names_the_same_issuer(self, peer: OidcPeer) -> None:
        meta = await get_json(peer, f"{peer.issuer}/.well-known/openid-configuration")
        assert peer.issuer == meta["issuer"]

    async def test_the_issuer_is_localhost_with_a_port_and_no_trailing_slash(
        self, peer: OidcPeer
    ) -> None:
        parts = urllib.parse.urlsplit(peer.issuer)
        assert ("https", "localhost", "") == (parts.scheme, parts.hostname, parts.path)
        assert parts.port is not None

    async def test_public_clients_with_s256_only_may_register(self, peer: OidcPeer) -> None:
        meta = await server_metadata(peer)
        assert ["S256"] == meta["code_challenge_methods_supported"]
        assert "none" in meta["token_endpoint_auth_methods_supported"]
        assert meta["registration_endpoint"].startswith(peer.issuer + "/")
        assert meta["authorization_response_iss_parameter_supported"] is True

    async def test_a_client_without_the_test_ca_refuses_the_certificate(
        self, peer: OidcPeer
    ) -> None:
        connector = aiohttp.TCPConnector(ssl=ssl.create_default_context())
        async with aiohttp.ClientSession(connector=connector) as http:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                async with http.get(peer.jwks_url):
                    pass


class TestJwks:
    async def test_the_published_keys_have_no_private_members(self, peer: OidcPeer) -> None:
        keys = (await get_json(peer, peer.jwks_url))["keys"]
        assert keys
        assert [set()] * len(keys) == [PRIVATE_MEMBERS & key.keys() for key in keys]

    async def test_one_es256_signing_key_on_p256_is_published(self, peer: OidcPeer) -> None:
        keys = (await get_json(peer, peer.jwks_url))["keys"]
        es256 = [(k["kty"], k["crv"], k["use"]) for k in keys if k.get("alg") == "ES256"]
        assert [("EC", "P-256", "sig")] == es256

    async def test_key_ids_are_unique(self, peer: OidcPeer) -> None:
        kids = [key["kid"] for key in (await get_json(peer, peer.jwks_url))["keys"]]
        assert len(kids) == len(set(kids))


class TestAccessToken:
    async def test_the_header_is_es256_at_jwt_with_a_published_kid(self, peer: OidcPeer) -> None:
        token = (await issue_token("alice", RESOURCE, peer=peer))["access_token"]
        header = jwt.get_unverified_header(token)
        kids = {key["kid"] for key in (await get_json(peer, peer.jwks_url))["keys"]}
        assert ("ES256", "at+jwt", True) == (header["alg"], header["typ"], header["kid"] in kids)

    async def test_the_claims_name_issuer_resource_subject_scope_and_client(
        self, peer: OidcPeer
    ) -> None:
        response = await issue_token("alice", RESOURCE, peer=peer)
        claims = await verified_claims(peer, response["access_token"], RESOURCE)
        expected = {
            "iss": peer.issuer,
            "aud": RESOURCE,
            "sub": "alice",
            "scope": "mail.read mail.write mail.send",
            "client_id": response["client_id"],
            "lifetime": 300,
        }
        actual = {k: claims[k] for k in expected if k != "lifetime"}
        actual["lifetime"] = claims["exp"] - claims["iat"]
        assert expected == actual
        assert isinstance(claims["jti"], str) and claims["jti"]

    async def test_the_token_response_is_a_bearer_for_300_seconds(self, peer: OidcPeer) -> None:
        response = await issue_token("alice", RESOURCE, "mail.read", peer=peer)
        expected = ("Bearer", 300, "mail.read")
        assert expected == (response["token_type"], response["expires_in"], response["scope"])

    async def test_two_subjects_get_two_different_subs(self, peer: OidcPeer) -> None:
        first = (await issue_token("alice", RESOURCE, peer=peer))["access_token"]
        second = (await issue_token("mallory", RESOURCE, peer=peer))["access_token"]
        subs = [(await verified_claims(peer, t, RESOURCE))["sub"] for t in (first, second)]
        assert ["alice", "mallory"] == subs

    async def test_a_127_0_0_1_resource_becomes_the_audience(self, peer: OidcPeer) -> None:
        resource = "https://127.0.0.1:61234/mcp"
        token = (await issue_token("alice", resource, peer=peer))["access_token"]
        assert resource == (await verified_claims(peer, token, resource))["aud"]

    @pytest.mark.parametrize(
        "resource",
        [
            "https://example.com/mcp",
            "http://localhost:8443/mcp",
            "https://localhost:8443/other",
            "https://localhost:8443/mcp/",
            "https://localhost/mcp",
            "https://127.0.0.2:8443/mcp",
            "https://localhost:70000/mcp",
        ],
    )
    async def test_a_resource_of_another_form_is_invalid_target(
        self, peer: OidcPeer, resource: str
    ) -> None:
        with pytest.raises(OAuthError) as refused:
            await issue_token("alice", resource, peer=peer)
        assert "invalid_target" == refused.value.error


class TestRefresh:
    async def test_a_refresh_rotates_the_refresh_token_and_keeps_the_grant(
        self, peer: OidcPeer
    ) -> None:
        first = await issue_token("alice", RESOURCE, peer=peer)
        second = await refresh_token(
            first["refresh_token"], first["client_id"], RESOURCE, peer=peer
        )
        old = await verified_claims(peer, first["access_token"], RESOURCE)
        new = await verified_claims(peer, second["access_token"], RESOURCE)
        assert second["refresh_token"] != first["refresh_token"]
        assert (old["sub"], old["aud"], old["scope"]) == (new["sub"], new["aud"], new["scope"])
        assert old["jti"] != new["jti"]

    async def test_a_spent_refresh_token_is_invalid_grant(self, peer: OidcPeer) -> None:
        first = await issue_token("alice", RESOURCE, peer=peer)
        await refresh_token(first["refresh_token"], first["client_id"], RESOURCE, peer=peer)
        with pytest.raises(OAuthError) as refused:
            await refresh_token(first["refresh_token"], first["client_id"], RESOURCE, peer=peer)
        assert ("invalid_grant", 400) == (refused.value.error, refused.value.status)

    async def test_reusing_a_spent_refresh_token_revokes_its_successor(
        self, peer: OidcPeer
    ) -> None:
        first = await issue_token("alice", RESOURCE, peer=peer)
        second = await refresh_token(first["refresh_token"], first["client_id"], peer=peer)
        with pytest.raises(OAuthError):
            await refresh_token(first["refresh_token"], first["client_id"], peer=peer)
        with pytest.raises(OAuthError) as refused:
            await refresh_token(second["refresh_token"], first["client_id"], peer=peer)
        assert "invalid_grant" == refused.value.error


class TestAuthorization:
    async def test_the_redirect_carries_code_state_and_issuer(self, peer: OidcPeer) -> None:
        meta = await server_metadata(peer)
        client_id = await register_public_client(peer)
        final = await authorize_without_browser(
            authorization_url(meta, client_id), "alice", peer=peer
        )
        query = redirect_query(final)
        assert final.startswith(REDIRECT_URI + "?")
        assert ("s1", peer.issuer, True) == (query["state"], query["iss"], bool(query["code"]))

    async def test_a_request_without_pkce_is_refused(self, peer: OidcPeer) -> None:
        meta = await server_metadata(peer)
        client_id = await register_public_client(peer)
        url = authorization_url(meta, client_id, code_challenge="", code_challenge_method="")
        final = await authorize_without_browser(url, "alice", peer=peer)
        assert "invalid_request" == redirect_query(final)["error"]

    async def test_a_wrong_code_verifier_is_invalid_grant(self, peer: OidcPeer) -> None:
        meta = await server_metadata(peer)
        client_id = await register_public_client(peer)
        final = await authorize_without_browser(
            authorization_url(meta, client_id), "alice", peer=peer
        )
        form = {
            "grant_type": "authorization_code",
            "code": redirect_query(final)["code"],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": pkce_pair()[0],
            "resource": RESOURCE,
        }
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=peer.ssl_context())) as http,
            http.post(meta["token_endpoint"], data=form) as response,
        ):
            assert (400, "invalid_grant") == (response.status, (await response.json())["error"])
