"""The token endpoint's answer checked as a pure function, the usable-until arithmetic, the
grants' shapes, and the registry key of the per-process token cache."""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec
import pytest

from providers.oauth2.cache import registry_key, tokens_for
from providers.oauth2.profiles import (
    GOOGLE_MAIL_SCOPE,
    OUTLOOK_IMAP_SCOPE,
    OUTLOOK_SMTP_SCOPE,
    RefreshGrant,
    google_grant,
    microsoft_grant,
)
from providers.oauth2.refresh import (
    MAX_BODY_BYTES,
    MAX_LIFETIME_S,
    MAX_TOKEN_BYTES,
    AnswerRefused,
    TokenAnswer,
    check_token_answer,
    is_pinned_token_url,
    post_form,
    usable_until,
)
from schemas.secret import Secret
from support.linear import LINEAR_BOUND, growth

GOOGLE = google_grant("client", Secret("client-secret"), Secret("refresh-secret"))
MICROSOFT = microsoft_grant("common", "client", None, Secret("refresh-secret"))
BOTH_OUTLOOK_SCOPES = f"{OUTLOOK_IMAP_SCOPE} {OUTLOOK_SMTP_SCOPE}"


def answer(**members: object) -> bytes:
    """A good answer with `members` changed (a value of ... removes the member)."""
    body: dict[str, object] = {"access_token": "ya29.a0-b_c~d+e/f==", "token_type": "Bearer"}
    body["expires_in"] = 3599
    body.update(members)
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


def rule_of(body: bytes, grant: RefreshGrant = GOOGLE) -> str:
    try:
        check_token_answer(body, grant)
    except AnswerRefused as refusal:
        return refusal.rule
    raise AssertionError("accepted")


class TestAGoodAnswer:
    def test_gives_the_token_and_its_lifetime(self) -> None:
        expected = TokenAnswer(Secret("ya29.a0-b_c~d+e/f=="), 3599, None)
        assert expected == check_token_answer(answer(), GOOGLE)

    def test_may_carry_members_nobody_asked_for(self) -> None:
        body = answer(id_token="x.y.z", refresh_token_expires_in=604800, nested={"a": [1]})
        assert 3599 == check_token_answer(body, GOOGLE).lifetime_s

    def test_names_bearer_in_any_case(self) -> None:
        for token_type in ("bearer", "BEARER", "BeArEr"):
            assert 3599 == check_token_answer(answer(token_type=token_type), GOOGLE).lifetime_s

    def test_may_leave_out_the_scope_or_name_more_than_needed(self) -> None:
        check_token_answer(answer(scope=...), GOOGLE)
        check_token_answer(answer(scope=f"openid {GOOGLE_MAIL_SCOPE} email"), GOOGLE)
        check_token_answer(answer(scope=f"{BOTH_OUTLOOK_SCOPES} User.Read"), MICROSOFT)

    def test_may_hold_an_access_token_of_16_kib(self) -> None:
        check_token_answer(answer(access_token="a" * MAX_TOKEN_BYTES), GOOGLE)


class TestARefusedAnswer:
    @pytest.mark.parametrize(
        ("body", "rule"),
        [
            (b'{"access_token": "a", "access_token": "b"}', "duplicate-member"),
            (answer() + b" {}", "trailing-data"),
            (answer() + b"x", "trailing-data"),
            (b"[]", "not-object"),
            (b"", "syntax"),
            (b"\xff{}", "utf-8"),
        ],
    )
    def test_that_is_not_one_strict_json_object(self, body: bytes, rule: str) -> None:
        assert rule == rule_of(body)

    def test_over_64_kib(self) -> None:
        body = answer(padding="p" * MAX_BODY_BYTES)
        assert "too-large" == rule_of(body)

    @pytest.mark.parametrize("error", ["invalid_grant", "invalid_client", "unauthorized_client"])
    def test_naming_a_refused_grant(self, error: str) -> None:
        assert "grant-refused" == rule_of(answer(error=error))

    @pytest.mark.parametrize("error", ["invalid_request", "temporarily_unavailable", 7, None])
    def test_naming_any_other_error(self, error: object) -> None:
        assert "error" == rule_of(answer(error=error))

    @pytest.mark.parametrize(
        "token",
        [..., None, 17, "", "two words", "a=b", "é", "a\n", "a" * (MAX_TOKEN_BYTES + 1)],
    )
    def test_without_a_bearer_access_token(self, token: object) -> None:
        assert "access_token" == rule_of(answer(access_token=token))

    @pytest.mark.parametrize(
        "token_type", [..., None, "mac", "Bearer ", "\uff22\uff25\uff21\uff32\uff25\uff32", "N_A"]
    )
    def test_with_another_token_type(self, token_type: object) -> None:
        assert "token_type" == rule_of(answer(token_type=token_type))

    def test_with_a_fractional_lifetime(self) -> None:
        body = answer().replace(b'"expires_in": 3599', b'"expires_in": 3599.0')
        assert "expires_in" == rule_of(body)

    @pytest.mark.parametrize("lifetime", [..., 0, -1, "3600", True, None, [3600]])
    def test_without_a_positive_integer_lifetime(self, lifetime: object) -> None:
        assert "expires_in" == rule_of(answer(expires_in=lifetime))

    @pytest.mark.parametrize(
        ("scope", "grant"),
        [
            ("openid email", GOOGLE),
            ("https://mail.google.com", GOOGLE),  # no trailing slash: another scope
            ([GOOGLE_MAIL_SCOPE], GOOGLE),
            (OUTLOOK_IMAP_SCOPE, MICROSOFT),
            (f"{OUTLOOK_SMTP_SCOPE} offline_access", MICROSOFT),
        ],
    )
    def test_whose_scope_lacks_a_required_one(self, scope: object, grant: RefreshGrant) -> None:
        assert "scope" == rule_of(answer(scope=scope), grant)

    def test_never_holds_the_answer_in_its_message(self) -> None:
        with pytest.raises(AnswerRefused) as caught:
            check_token_answer(answer(access_token="secret value"), GOOGLE)
        assert ("access_token", None) == (str(caught.value), caught.value.__context__)


class TestARotatedRefreshToken:
    def test_is_kept_for_a_grant_that_rotates(self) -> None:
        body = answer(scope=BOTH_OUTLOOK_SCOPES, refresh_token="M.C5_BAY.0-next!")
        assert Secret("M.C5_BAY.0-next!") == check_token_answer(body, MICROSOFT).refresh_token

    def test_is_ignored_for_google_even_when_malformed(self) -> None:
        assert None is check_token_answer(answer(refresh_token="1//new"), GOOGLE).refresh_token
        assert None is check_token_answer(answer(refresh_token=[1]), GOOGLE).refresh_token

    @pytest.mark.parametrize("token", ["", "with space", 5, "x" * (MAX_TOKEN_BYTES + 1)])
    def test_that_is_malformed_refuses_the_answer(self, token: object) -> None:
        body = answer(scope=BOTH_OUTLOOK_SCOPES, refresh_token=token)
        assert "refresh_token" == rule_of(body, MICROSOFT)


class TestUsableUntil:
    @pytest.mark.parametrize(
        ("lifetime", "usable_for"),
        [(3600, 3570.0), (300, 270.0), (299, 269.1), (100, 90.0), (10, 9.0), (1, 0.9)],
    )
    def test_is_the_lifetime_less_30_s_or_a_tenth_whichever_is_smaller(
        self, lifetime: int, usable_for: float
    ) -> None:
        assert usable_for == pytest.approx(usable_until(500.0, lifetime) - 500.0)

    def test_a_lifetime_beyond_a_day_counts_as_a_day(self) -> None:
        assert 1000.0 + MAX_LIFETIME_S - 30 == usable_until(1000.0, 10**400)


class TestGrants:
    def test_google_posts_to_its_pinned_endpoint_without_a_scope(self) -> None:
        assert "https://oauth2.googleapis.com/token" == GOOGLE.token_url
        assert (None, (GOOGLE_MAIL_SCOPE,), False) == (
            GOOGLE.form_scope,
            GOOGLE.required_scopes,
            GOOGLE.rotates_refresh_token,
        )

    def test_microsoft_posts_to_its_tenant_and_names_its_scopes(self) -> None:
        grant = microsoft_grant("contoso.onmicrosoft.com", "client", None, Secret("r"))
        assert (
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
            == grant.token_url
        )
        assert f"{BOTH_OUTLOOK_SCOPES} offline_access" == grant.form_scope
        assert grant.rotates_refresh_token

    @pytest.mark.parametrize(
        "tenant", ["", "..", "../x", "a/b", "a?b", "a#b", "-a", "a-", "a b", "x" * 254]
    )
    def test_a_tenant_that_could_bend_the_url_is_refused(self, tenant: str) -> None:
        with pytest.raises(ValueError):
            microsoft_grant(tenant, "client", None, Secret("r"))

    def test_no_grant_names_a_host_outside_the_pinned_ones(self) -> None:
        with pytest.raises(ValueError):
            msgspec.structs.replace(GOOGLE, token_host="oauth2.example.com")
        with pytest.raises(ValueError):
            msgspec.structs.replace(GOOGLE, token_path="/../elsewhere")

    def test_neither_repr_nor_encoding_shows_a_secret(self) -> None:
        assert "client-secret" not in repr(GOOGLE)
        assert "refresh-secret" not in repr(GOOGLE)
        with pytest.raises(TypeError):
            msgspec.json.encode(GOOGLE)


class TestPinnedTokenUrls:
    def test_are_https_on_a_pinned_host_at_port_443(self) -> None:
        assert is_pinned_token_url(GOOGLE.token_url)
        assert is_pinned_token_url(MICROSOFT.token_url)

    @pytest.mark.parametrize(
        "url",
        [
            "http://oauth2.googleapis.com/token",
            "https://oauth2.googleapis.com:8443/token",
            "https://oauth2.googleapis.com:443/token",
            "https://user@oauth2.googleapis.com/token",
            "https://oauth2.googleapis.com.example.com/token",
            "https://OAUTH2.googleapis.com/token",
            "https://oauth2.googleapis.com/token?x=1",
            "https://oauth2.googleapis.com/token#x",
            "https://oauth2.googleapis.com",
            "https://[::1/token",
        ],
    )
    def test_refuse_anything_else(self, url: str) -> None:
        assert not is_pinned_token_url(url)

    async def test_a_post_elsewhere_is_refused_before_any_connection(self) -> None:
        with pytest.raises(ValueError):
            await post_form("Google", "https://example.com/token", b"a=b", timeout_s=1.0)


class TestTheRegistry:
    def test_one_source_per_grant_and_login(self) -> None:
        grant = google_grant("registry", Secret("s"), Secret("r"))
        same = google_grant("registry", Secret("s"), Secret("r"))
        assert tokens_for(grant, "a@example.com", 5.0) is tokens_for(same, "a@example.com", 5.0)
        assert tokens_for(grant, "a@example.com", 5.0) is not tokens_for(grant, "b@example", 5.0)

    def test_the_key_changes_with_each_part(self) -> None:
        def key(client: str, secret: str | None, refresh: str, user: str) -> bytes:
            grant = microsoft_grant(
                "common", client, None if secret is None else Secret(secret), Secret(refresh)
            )
            return registry_key(grant, user)

        keys = {
            key("c", "s", "r", "u"),
            key("c2", "s", "r", "u"),
            key("c", "s2", "r", "u"),
            key("c", None, "r", "u"),
            key("c", "s", "r2", "u"),
            key("c", "s", "r", "u2"),
            key("c", "s", "ru", ""),  # the parts never run together
        }
        assert 7 == len(keys)
        assert key("c", "s", "r", "u") == key("c", "s", "r", "u")


# Answers of about `size` bytes that make the check do the most work per byte.
LINEAR_SHAPES: dict[str, Callable[[int], bytes]] = {
    "many extra members": lambda size: answer(
        **{f"m{i}": 0 for i in range(max(1, (size - 100) // 12))}
    ),
    "a long scope": lambda size: answer(scope="s " * ((size - 120) // 2) + GOOGLE_MAIL_SCOPE),
    "a long token and padding": lambda size: answer(
        access_token="a" * (size // 4 - 2) + "==", padding="p" * (size * 3 // 4 - 150)
    ),
}


@pytest.mark.parametrize("shape", LINEAR_SHAPES)
def test_checking_an_answer_is_linear_up_to_64_kib(shape: str) -> None:
    build = LINEAR_SHAPES[shape]
    assert len(build(MAX_BODY_BYTES)) <= MAX_BODY_BYTES

    def check(body: bytes) -> object:
        try:
            return check_token_answer(body, GOOGLE)
        except AnswerRefused as refusal:
            return refusal.rule

    ratio = growth(check, build, MAX_BODY_BYTES)
    assert ratio < LINEAR_BOUND, f"CPU grew {ratio:.1f}x from limit/4 to the limit"
