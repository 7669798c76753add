"""The owner binding: a hash of issuer, resource and subject, and nothing else."""

from __future__ import annotations

from service.principal import Principal, owner_binding

ISSUER = "https://login.example.com/"
RESOURCE = "https://mail.example.com/mcp"
VECTOR = "43c6f0f43e1c997e688801bd8e239705a3b4af92979eadd0155fd5038d753efd"


def principal(
    scopes: str, issuer: str = ISSUER, resource: str = RESOURCE, subject: str = "owner-123"
) -> Principal:
    return Principal(issuer, resource, subject, frozenset(scopes.split()))


def test_the_fixture_identity_gives_the_published_vector() -> None:
    assert VECTOR == owner_binding(ISSUER, RESOURCE, "owner-123")


def test_scopes_do_not_change_the_binding() -> None:
    owners = {
        principal(s).owner
        for s in ("mail.read", "mail.send mail.read", "mail.read mail.write mail.send")
    }
    assert {VECTOR} == owners


def test_issuer_spelling_resource_and_subject_case_each_change_it() -> None:
    others = [
        principal("mail.read", issuer="https://login.example.com").owner,
        principal("mail.read", resource="https://mail.example.org/mcp").owner,
        principal("mail.read", subject="Owner-123").owner,
    ]
    assert VECTOR not in others and 3 == len(set(others))


def test_length_prefixes_keep_the_parts_apart() -> None:
    assert owner_binding("ab", "c", "d") != owner_binding("a", "bc", "d")
