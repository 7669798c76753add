"""Our token checks against PyJWT as an oracle: whatever we accept, PyJWT accepts the same way.

PyJWT is the lenient side here (it takes duplicate members, `jku`, a fractional `exp`), so the
property runs one way only: every token we accept must decode under PyJWT's strict options to
the same subject, scopes and expiry.
"""

from __future__ import annotations

import time
from typing import Any

import jwt as pyjwt
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from service.auth.resource.jwt import parse_token
from support.tokens import (
    ABSENT,
    ACCEPTED,
    ISSUER,
    RESOURCE,
    SCOPE,
    SUBJECT,
    Minter,
    SigningKey,
    outcome,
)

REQUIRED = ["exp", "iss", "aud", "sub"]
SCOPE_WORDS = st.sampled_from(["mail.read", "mail.write", "mail.send"]) | st.from_regex(
    r"[!#-\[\]-~]{1,12}", fullmatch=True
)
OTHER_AUDIENCES = st.lists(st.text(min_size=1, max_size=24), max_size=31)


def pyjwt_claims(token: str, key: SigningKey, audience_is_string: bool) -> dict[str, Any]:
    """Decode with PyJWT under its strict options, or raise PyJWT's error."""
    options: Any = {"strict_aud": audience_is_string, "require": REQUIRED}
    decoded: dict[str, Any] = pyjwt.decode(
        token,
        key.jwk.public_key,
        algorithms=[key.alg],
        audience=RESOURCE,
        issuer=ISSUER,
        options=options,
    )
    return decoded


@st.composite
def audiences(draw: st.DrawFn) -> str | list[str]:
    if draw(st.booleans()):
        return RESOURCE
    others = draw(OTHER_AUDIENCES)
    return [*others[: (at := draw(st.integers(0, len(others))))], RESOURCE, *others[at:]]


@st.composite
def valid_claims(draw: st.DrawFn, now: int) -> dict[str, Any]:
    """Draw valid claims; times are drawn as offsets, so the draws never depend on the clock."""
    absent_or = st.just(ABSENT).__or__
    past = st.integers(0, 10**9).map(lambda age: now - age)
    return {
        "aud": draw(audiences()),
        "exp": now + draw(st.integers(60, 10**8)),
        "nbf": draw(absent_or(past)),
        "iat": draw(absent_or(past)),
        "scope": draw(absent_or(st.lists(SCOPE_WORDS, max_size=6).map(" ".join))),
        "jti": draw(absent_or(st.text(max_size=16))),
        "token_use": draw(st.sampled_from([ABSENT, "access"])),
    }


def same_claims(token: str, minter: Minter, key: SigningKey) -> None:
    ours = parse_token(token, minter.rules, minter.now).claims
    theirs = pyjwt_claims(token, key, ours.audience_is_string)
    assert (ours.subject, ours.scopes, ours.expires) == (
        theirs["sub"],
        tuple(theirs.get("scope", "").split()),
        theirs["exp"],
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), alg=st.sampled_from(["RS256", "ES256"]))
def test_pyjwt_accepts_every_valid_token_we_accept_with_the_same_claims(
    data: st.DataObject, alg: str
) -> None:
    minter = Minter(now=int(time.time()))
    key = minter.rsa if alg == "RS256" else minter.ec
    typ = data.draw(st.sampled_from(["JWT", "at+jwt", "application/at+jwt", ABSENT]))
    token = minter.token(key, header={"typ": typ}, claims=data.draw(valid_claims(minter.now)))
    assert ACCEPTED == outcome(token, minter)
    same_claims(token, minter, key)


MIXED: dict[str, st.SearchStrategy[Any]] = {
    "iss": st.sampled_from([ISSUER, ISSUER.rstrip("/"), ABSENT, None]),
    "aud": st.sampled_from([RESOURCE, [RESOURCE, "x"], "x", [RESOURCE, 1], [], [""], ABSENT]),
    "sub": st.sampled_from([SUBJECT, f" {SUBJECT}", "other", 123, ABSENT]),
    "exp": st.sampled_from(["future", "past", "float", "string", None, ABSENT]),
    "nbf": st.sampled_from(["past", "future", "float", None, ABSENT]),
    "iat": st.sampled_from(["past", "future", "float", -1, ABSENT]),
    "scope": st.sampled_from([SCOPE, "", ["mail.read"], "mail.read\tmail.send", ABSENT]),
    "token_use": st.sampled_from([ABSENT, "access", "id", 1]),
}
TIMES = {"future": 3600, "past": -100, "float": 3600.5}


def timed(name: str, value: Any, now: int) -> Any:
    """Turn a drawn time label into a value relative to now; other claims pass through."""
    if name not in ("exp", "nbf", "iat") or not isinstance(value, str):
        return value
    return str(now + 3600) if value == "string" else now + TIMES[value]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), alg=st.sampled_from(["RS256", "ES256"]))
def test_pyjwt_accepts_whatever_we_accept_when_claims_change(data: st.DataObject, alg: str) -> None:
    minter = Minter(now=int(time.time()))
    key = minter.rsa if alg == "RS256" else minter.ec
    spoiled = data.draw(st.sets(st.sampled_from(sorted(MIXED)), max_size=2), label="changed")
    claims = {name: timed(name, data.draw(MIXED[name], label=name), minter.now) for name in spoiled}
    token = minter.raw(minter.header(key), minter.claims(**claims), key)
    result = outcome(token, minter)
    event(f"ours: {result}")
    if result == ACCEPTED:
        same_claims(token, minter, key)
