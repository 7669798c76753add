"""The Microsoft Graph refresh grant as pure values: its endpoint, form scope, tenants, the scope
rule of its answers, and the single-flight key of the rotating token cache."""

from __future__ import annotations

import json

import pytest

from providers.oauth2.cache import registry_key, rotating_registry_key
from providers.oauth2.profiles import (
    GRAPH_RECOVERY,
    GRAPH_SCOPES,
    RefreshGrant,
    graph_grant,
    microsoft_grant,
)
from providers.oauth2.refresh import AnswerRefused, check_token_answer
from schemas.secret import Secret

TENANT = "8d2f3c1a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
CLIENT = "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"
GRAPH = graph_grant(TENANT, CLIENT, Secret("client-secret"), Secret("refresh-secret"))
URL_FORM = " ".join(GRAPH_SCOPES)
SHORT_FORM = "User.Read Mail.ReadWrite Mail.Send"


def answer(**members: object) -> bytes:
    body: dict[str, object] = {"access_token": "EwB.a-b_c", "token_type": "Bearer"}
    body.update(expires_in=3599, **members)
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


def rule_of(body: bytes, grant: RefreshGrant = GRAPH) -> str:
    try:
        check_token_answer(body, grant)
    except AnswerRefused as refusal:
        return refusal.rule
    raise AssertionError("accepted")


class TestTheGrant:
    def test_posts_to_the_tenant_naming_the_three_graph_scopes(self) -> None:
        assert f"https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token" == GRAPH.token_url
        assert (
            "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.ReadWrite"
            " https://graph.microsoft.com/Mail.Send"
        ) == GRAPH.form_scope
        assert (GRAPH.rotates_refresh_token, GRAPH.provider) == (True, "Microsoft")

    def test_recovery_names_the_command_and_the_variable(self) -> None:
        assert GRAPH_RECOVERY == GRAPH.recovery
        assert "angelos microsoft-auth" in GRAPH.recovery
        assert "MICROSOFT_REFRESH_TOKEN" in GRAPH.recovery

    def test_consumers_is_a_tenant(self) -> None:
        grant = graph_grant("consumers", CLIENT, Secret("s"), Secret("r"))
        assert "/consumers/oauth2/v2.0/token" == grant.token_path

    @pytest.mark.parametrize(
        "tenant",
        ["common", "organizations", "Consumers", "contoso.onmicrosoft.com", "", TENANT + "0"],
    )
    def test_other_tenants_are_refused(self, tenant: str) -> None:
        with pytest.raises(ValueError):
            graph_grant(tenant, CLIENT, Secret("s"), Secret("r"))

    def test_repr_shows_no_secret(self) -> None:
        assert "client-secret" not in repr(GRAPH) and "refresh-secret" not in repr(GRAPH)


class TestTheScopeOfAnAnswer:
    @pytest.mark.parametrize(
        "scope",
        [
            URL_FORM,
            SHORT_FORM,
            "Mail.Send openid https://graph.microsoft.com/User.Read profile Mail.ReadWrite email",
            "user.read MAIL.READWRITE https://GRAPH.microsoft.com/mail.send",  # any case
            f"{SHORT_FORM} offline_access",
        ],
    )
    def test_each_scope_in_url_or_short_form_is_enough(self, scope: str) -> None:
        assert "EwB.a-b_c" == check_token_answer(answer(scope=scope), GRAPH).access_token.reveal()

    @pytest.mark.parametrize(
        "scope",
        [
            "User.Read Mail.ReadWrite",
            "User.Read Mail.Send",
            "Mail.ReadWrite Mail.Send",
            "User.Read Mail.Read Mail.Send",  # Mail.Read is less than Mail.ReadWrite
            "https://outlook.office.com/User.Read Mail.ReadWrite Mail.Send",  # another resource
            "User.Read  Mail.ReadWrite\tMail.Send",  # a tab is not a separator
            "User.Read Mail.ReadWrite Mail.Sénd",
            "",
        ],
    )
    def test_a_missing_scope_is_refused(self, scope: str) -> None:
        assert "scope" == rule_of(answer(scope=scope))

    @pytest.mark.parametrize("scope", [..., None, 3, ["User.Read", "Mail.ReadWrite", "Mail.Send"]])
    def test_an_answer_without_a_scope_string_is_refused(self, scope: object) -> None:
        assert "scope" == rule_of(answer(scope=scope))

    def test_outlook_keeps_its_exact_rule(self) -> None:
        outlook = microsoft_grant("consumers", CLIENT, None, Secret("r"))
        # The short form is Graph's alone; an Outlook answer without a scope is still accepted.
        assert "scope" == rule_of(answer(scope="IMAP.AccessAsUser.All SMTP.Send"), outlook)
        assert check_token_answer(answer(), outlook).lifetime_s == 3599

    def test_a_rotated_refresh_token_is_kept(self) -> None:
        rotated = check_token_answer(answer(scope=URL_FORM, refresh_token="M.C5_BAY.new"), GRAPH)
        assert Secret("M.C5_BAY.new") == rotated.refresh_token


class TestTheSingleFlightKey:
    def key(self, **changes: str) -> bytes:
        parts = {
            "tenant": TENANT,
            "client": CLIENT,
            "secret": "s",
            "refresh": "r",
            "account": "a",
            "sender": "owner@example.com",
            "key": "0f" * 32,
        } | changes
        grant = graph_grant(
            parts["tenant"], parts["client"], Secret(parts["secret"]), Secret(parts["refresh"])
        )
        binding = (parts["account"], parts["sender"], Secret(parts["key"]))
        return rotating_registry_key(grant, binding)

    def test_changes_with_each_part_of_the_identity(self) -> None:
        keys = {
            self.key(),
            self.key(tenant="consumers"),
            self.key(client="1b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"),
            self.key(secret="s2"),
            self.key(refresh="r2"),
            self.key(account="a2"),
            self.key(sender="other@example.com"),
            self.key(key="1f" * 32),
            self.key(account="ao", sender="wner@example.com"),  # the parts never run together
        }
        assert 9 == len(keys)
        assert self.key() == self.key()

    def test_never_meets_the_key_of_a_plain_source(self) -> None:
        assert rotating_registry_key(GRAPH, ("u",)) != registry_key(GRAPH, "u")
