"""The typed rules write the rule text the docs show and the problem check-config prints."""

from __future__ import annotations

from service.config.table.rules import Choice, Duration, Int, Switch, Token
from service.config.table.variables import BY_NAME, read


def test_a_rule_renders_its_text_from_the_data_it_checks() -> None:
    assert "1-32" == Int(1, 32).text
    assert "an integer >= 1000" == Int(1000).text
    assert "10-300 (1-300 in test mode)" == Int(10, 300, test_low=1).text
    assert (
        "a duration such as `30s`, `2m` or `1m30s`, from 1 s to 2 min"
        == Duration(1_000, 120_000).text
    )
    assert "`tls` or `starttls`" == Choice(("tls", "starttls")).text
    assert "unset or `provider_managed`" == Choice(("provider_managed",)).text
    assert "`1` is on" == Switch().text


def test_a_rule_reports_in_the_words_of_its_text() -> None:
    assert (None, "must be an integer 1..32") == Int(1, 32).parse("33")
    assert (5, None) == Int(10, 300, test_low=1).parse("5", test_mode=True)
    assert (None, "must be between 1s and 2m") == Duration(1_000, 120_000).parse("3m")
    assert (90_000, None) == Duration(1_000, 120_000).parse("1m30s")
    assert (None, "must be tls or starttls") == Choice(("tls", "starttls")).parse("TLS")
    assert (None, "must be 1-256 characters without whitespace or controls") == Token(256).parse(
        "a b"
    )


def test_read_gives_the_unset_value_the_parsed_value_or_a_problem() -> None:
    problems: list[str] = []
    assert BY_NAME["SMTP_MAX_CONNECTIONS"].unset == read({}, "SMTP_MAX_CONNECTIONS", problems)
    assert 8 == read({"SMTP_MAX_CONNECTIONS": "8"}, "SMTP_MAX_CONNECTIONS", problems)
    assert read({"SMTP_MAX_CONNECTIONS": "0"}, "SMTP_MAX_CONNECTIONS", problems) is None
    assert ["SMTP_MAX_CONNECTIONS: must be an integer 1..32"] == problems
