"""Dynamic client registration (RFC 7591): the metadata rules, without a server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.auth.server.registration import (
    RegistrationRefused,
    SelfRegistered,
    check_registration,
    is_registered_id,
    new_client_id,
    uri_kinds,
)

INSPECTOR = "http://127.0.0.1:6276/oauth/callback"
FASTMCP = "http://localhost:53123/callback"
CLIENT_ID = new_client_id()


def register(document: Any, content_type: str = "application/json") -> SelfRegistered:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return check_registration(body, content_type, CLIENT_ID, 1_700_000_000)


def refused(document: Any, content_type: str = "application/json") -> RegistrationRefused:
    with pytest.raises(RegistrationRefused) as caught:
        register(document, content_type)
    return caught.value


def good(**members: Any) -> dict[str, Any]:
    return {"client_name": "MCP Inspector", "redirect_uris": [INSPECTOR], **members}


def test_inspector_and_fastmcp_shaped_registrations_are_accepted() -> None:
    inspector = register(
        good(
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope="mail.read",
            application_type="native",  # unknown members are ignored (RFC 7591 §2)
        )
    )
    assert inspector.redirect_uris == (INSPECTOR,)
    assert inspector.grant_types == ("authorization_code", "refresh_token")
    fastmcp = register({"client_name": "FastMCP Client", "redirect_uris": [FASTMCP]})
    assert fastmcp.grant_types == ("authorization_code",)
    answer = fastmcp.answer()
    assert answer["client_id"] == CLIENT_ID and answer["client_id_issued_at"] == 1_700_000_000
    assert answer["token_endpoint_auth_method"] == "none" and "client_secret" not in answer
    assert answer["redirect_uris"] == [FASTMCP] and answer["response_types"] == ["code"]


def test_https_and_private_use_callbacks_register_and_are_logged_by_kind() -> None:
    client = register(good(redirect_uris=["https://app.example/cb", "cursor://x/cb", FASTMCP]))
    assert uri_kinds(client) == "https loopback private-use"


def test_the_client_id_is_the_servers() -> None:
    assert is_registered_id(CLIENT_ID) and CLIENT_ID != new_client_id()
    assert not is_registered_id("reg-short") and not is_registered_id("angelos-claude")
    assert register(good(client_id="mine")).client_id == CLIENT_ID  # a sent one is ignored


@pytest.mark.parametrize(
    ("members", "rule"),
    [
        ({"redirect_uris": None}, "redirect_uris"),
        ({"redirect_uris": []}, "redirect_uris"),
        ({"redirect_uris": INSPECTOR}, "redirect_uris"),
        ({"redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(9)]}, "redirect_uris"),
        (
            {"redirect_uris": [INSPECTOR, "http://127.0.0.1:9/oauth/callback"]},
            "redirect_uris_repeated",
        ),
        ({"redirect_uris": ["http://example.com/cb"]}, "redirect_uri_rule"),
        ({"redirect_uris": ["http://127.0.0.1:6276/cb#x"]}, "redirect_uri_rule"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "redirect_uri_rule"),
        ({"redirect_uris": ["myapp:/cb"]}, "redirect_uri_rule"),
        ({"redirect_uris": ["http://127.0.0.1/cb?code=1"]}, "redirect_uri_rule"),
    ],
)
def test_redirect_uris_follow_the_native_rules(members: dict[str, Any], rule: str) -> None:
    document = good(**members)
    if members.get("redirect_uris") is None:
        del document["redirect_uris"]
    problem = refused(document)
    assert (problem.error, problem.rule) == ("invalid_redirect_uri", rule)
    assert "example.com" not in problem.description  # the rule, never the value


@pytest.mark.parametrize(
    ("members", "rule"),
    [
        ({"client_name": None}, "client_name"),
        ({"client_name": ""}, "client_name"),
        ({"client_name": "x" * 129}, "client_name"),
        ({"client_name": "Bad\u0007name"}, "client_name"),
        ({"client_name": 7}, "client_name"),
        ({"client_secret": "s"}, "client_secret"),
        ({"client_secret_expires_at": 0}, "client_secret"),
        ({"token_endpoint_auth_method": "client_secret_post"}, "auth_method"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "auth_method"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "auth_method"),
        ({"grant_types": ["refresh_token"]}, "grant_types"),
        ({"grant_types": ["authorization_code", "client_credentials"]}, "grant_types"),
        ({"grant_types": ["authorization_code", "authorization_code"]}, "grant_types"),
        ({"grant_types": "authorization_code"}, "grant_types"),
        ({"response_types": ["token"]}, "response_types"),
        ({"response_types": ["code", "id_token"]}, "response_types"),
        ({"response_types": []}, "response_types"),
    ],
)
def test_metadata_rules(members: dict[str, Any], rule: str) -> None:
    document = good(**members)
    if "client_name" in members and members["client_name"] is None:
        del document["client_name"]
    problem = refused(document)
    assert (problem.error, problem.rule) == ("invalid_client_metadata", rule)


def test_the_body_is_one_strict_json_object_of_at_most_16_kib() -> None:
    assert refused(good(), "text/plain").rule == "media_type"
    assert refused(b'{"client_name": "a", "CLIENT_NAME": "b"}').rule == "strict_json"
    assert refused(b"[]").rule == "strict_json"
    assert refused(b"{").rule == "strict_json"
    padded = good(padding="x" * 16384)
    assert refused(padded).rule == "body_too_large"
    assert register(good(), "application/json; charset=utf-8").client_name == "MCP Inspector"
