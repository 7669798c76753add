"""The env file: strict NAME=value parsing, private files for secrets, the environment wins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.config import check_config_lines, load_config, with_env_file
from service.config._env_file import MAX_ENV_FILE_BYTES, parse_env_text, read_env_file
from service.config.table.variables import VARIABLES

PASSWORD = "pw-Hq7#x$HOME 'z'"
MARKER = "zq9leakq9z"  # lower-case: never part of a name a problem may echo
FILE_NAMES = [v.name for v in VARIABLES if v.in_env_file]
MAILBOX = (
    "MAIL_PROVIDER=custom\n"
    "MAIL_USERNAME=owner@example.com\n"
    f"MAIL_PASSWORD={PASSWORD}\n"
    "IMAP_HOST=imap.example.com\n"
    "SMTP_HOST=smtp.example.com\n"
)


def env_file(directory: Path, text: str, mode: int = 0o600) -> str:
    path = directory / "angelos.env"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return str(path)


class TestFormat:
    def test_assignments_comments_and_blank_lines(self) -> None:
        text = "# the mailbox\n\nMAIL_USERNAME=owner@example.com\n   # indented comment\n\t\n"
        assert ({"MAIL_USERNAME": "owner@example.com"}, ()) == parse_env_text(text)

    def test_values_are_taken_as_written(self) -> None:
        text = f"MAIL_PASSWORD={PASSWORD}\nANGELOS_LOCAL_SCOPES=mail.read mail.send\n"
        values, problems = parse_env_text(text)
        assert ((), PASSWORD, "mail.read mail.send") == (
            problems,
            values["MAIL_PASSWORD"],
            values["ANGELOS_LOCAL_SCOPES"],
        )

    def test_a_hash_after_the_equals_sign_is_part_of_the_value(self) -> None:
        assert {"MAIL_PASSWORD": "a #b"} == parse_env_text("MAIL_PASSWORD=a #b")[0]

    @pytest.mark.parametrize(
        ("line", "value"),
        [("MAIL_PASSWORD=' two spaces '", " two spaces "), ('MAIL_PASSWORD="it\'s"', "it's")],
    )
    def test_one_pair_of_quotes_is_removed(self, line: str, value: str) -> None:
        assert ({"MAIL_PASSWORD": value}, ()) == parse_env_text(line)

    def test_an_empty_value_is_kept_and_means_unset(self) -> None:
        values, _ = parse_env_text("MAIL_FROM=\n")
        env = {"MAIL_USERNAME": "owner@example.com", "MAIL_PASSWORD": "x", **values}
        mail = load_config(env).mail
        assert {"MAIL_FROM": ""} == values
        assert mail is not None and "owner@example.com" == mail.from_addr

    @pytest.mark.parametrize(
        ("line", "reason"),
        [
            (f"export MAIL_PASSWORD={MARKER}", "`export` is not allowed"),
            (f"MAIL_PASSWORD = {MARKER}", "no spaces around ="),
            (f"  MAIL_PASSWORD={MARKER}", "starts with whitespace"),
            (f"mail_password={MARKER}", "is not NAME=value"),
            (MARKER, "is not NAME=value"),
            (f"MAIL_PASSWROD={MARKER}", "MAIL_PASSWROD is not a variable angelos reads"),
            (f"HOME=/{MARKER}", "HOME cannot be set in an env file"),
            (f"ANGELOS_ENV_FILE=/{MARKER}", "ANGELOS_ENV_FILE cannot be set in an env file"),
            (f"MAIL_PASSWORD='{MARKER}", "opens a ' quote that does not close"),
            (f'MAIL_PASSWORD="{MARKER}"x', 'opens a " quote that does not close'),
            (f"MAIL_PASSWORD='{MARKER}'{MARKER}'", "opens a ' quote that does not close"),
            (f"MAIL_PASSWORD={MARKER} ", "has surrounding whitespace"),
            (f"MAIL_PASSWORD={MARKER}\tx", "holds a control character"),
            (f"MAIL_PASSWORD='{MARKER}\x1b'", "holds a control character"),
            (f"MAIL_PASSWORD={MARKER}\r", "carriage return"),
        ],
    )
    def test_each_refusal_names_the_line_and_never_the_value(self, line: str, reason: str) -> None:
        _, problems = parse_env_text(f"# first\n{line}\n")
        (problem,) = problems
        assert problem.startswith("ANGELOS_ENV_FILE: line 2: ") and reason in problem
        assert MARKER not in problem and PASSWORD not in problem

    def test_a_byte_order_mark_is_refused(self) -> None:
        _, problems = parse_env_text(f"\ufeffMAIL_PASSWORD={MARKER}\n")
        (problem,) = problems
        assert "ANGELOS_ENV_FILE: line 1: starts with a byte-order mark; save as plain UTF-8" == (
            problem
        )

    def test_windows_line_endings_are_one_problem_at_the_first_carriage_return(self) -> None:
        _, problems = parse_env_text(f"# comment\nMAIL_PASSWORD={MARKER}\r\nMAIL_FROM=a@b.c\r\n")
        reason = "holds a carriage return; save it with Unix line endings"
        assert (f"ANGELOS_ENV_FILE: line 2: {reason}",) == problems

    def test_a_name_set_twice_names_both_lines(self) -> None:
        _, problems = parse_env_text("MAIL_FROM=a@example.com\n\nMAIL_FROM=b@example.com\n")
        assert ("ANGELOS_ENV_FILE: line 3: MAIL_FROM repeats line 1",) == problems

    def test_every_refused_line_is_reported(self) -> None:
        _, problems = parse_env_text("export A=1\nMAIL_FROM=ok@example.com\nb=2\n")
        assert ["line 1", "line 3"] == [p.split(": ")[1] for p in problems]


NAMES = st.sampled_from(FILE_NAMES)
# Printable values without surrounding blanks and without a leading quote: written bare.
BARE = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=30
).filter(lambda v: v == v.strip(" \t") and v[0] not in "'\"")


@settings(max_examples=300, deadline=None, database=None)
@given(assignments=st.dictionaries(NAMES, BARE, max_size=12), quoted=st.booleans())
def test_written_assignments_parse_back_to_the_same_values(
    assignments: dict[str, str], quoted: bool
) -> None:
    def line(name: str, value: str) -> str:
        quote = "'" if "'" not in value else '"'
        if quoted and quote not in value:
            return f"{name}={quote}{value}{quote}"
        return f"{name}={value}"

    text = "\n".join(line(name, value) for name, value in assignments.items())
    assert (assignments, ()) == parse_env_text(text)


@settings(max_examples=300, deadline=None, database=None)
@given(lines=st.lists(st.text(max_size=40), max_size=8))
def test_arbitrary_text_never_raises_and_problems_never_quote_a_value(lines: list[str]) -> None:
    _, problems = parse_env_text("\n".join(f"{line}{MARKER}" for line in lines))
    assert all(MARKER not in problem for problem in problems)


class TestReading:
    def test_a_private_file_with_a_password_is_read(self, tmp_path: Path) -> None:
        values, problems = read_env_file(env_file(tmp_path, MAILBOX, 0o600))
        assert ((), PASSWORD) == (problems, values["MAIL_PASSWORD"])

    def test_a_read_only_private_file_is_read(self, tmp_path: Path) -> None:
        assert () == read_env_file(env_file(tmp_path, MAILBOX, 0o400))[1]

    @pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
    def test_a_file_others_may_read_or_write_is_refused_when_it_holds_a_secret(
        self, tmp_path: Path, mode: int
    ) -> None:
        values, problems = read_env_file(env_file(tmp_path, MAILBOX, mode))
        assert {} == values
        assert (
            "ANGELOS_ENV_FILE: holds MAIL_PASSWORD, so it must be yours and private"
            " (chmod 600 it; mode 0600 or 0400)",
        ) == problems

    def test_a_readable_file_without_secrets_is_read(self, tmp_path: Path) -> None:
        path = env_file(tmp_path, "MAIL_USERNAME=owner@example.com\n", 0o644)
        assert ({"MAIL_USERNAME": "owner@example.com"}, ()) == read_env_file(path)

    @pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
    def test_a_file_of_another_user_is_refused_when_it_holds_a_secret(self, tmp_path: Path) -> None:
        path = env_file(tmp_path, MAILBOX, 0o600)
        os.chown(path, 65534, 65534)
        assert "holds MAIL_PASSWORD" in read_env_file(path)[1][0]

    @pytest.mark.parametrize(
        ("make", "problem"),
        [
            (lambda d: str(d / "missing.env"), "ANGELOS_ENV_FILE: no such file"),
            (lambda d: str(d), "ANGELOS_ENV_FILE: must be a regular file"),
            (lambda d: "~/angelos.env", "ANGELOS_ENV_FILE: ~ is not expanded here"),
        ],
    )
    def test_paths_that_name_no_readable_file_are_refused(
        self, tmp_path: Path, make: object, problem: str
    ) -> None:
        path = make(tmp_path)  # type: ignore[operator]
        values, problems = read_env_file(path)
        assert {} == values and problems[0].startswith(problem)

    def test_a_fifo_is_refused_without_blocking(self, tmp_path: Path) -> None:
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        assert ("ANGELOS_ENV_FILE: must be a regular file",) == read_env_file(str(fifo))[1]

    def test_a_file_at_the_size_limit_is_read_and_one_byte_more_is_refused(
        self, tmp_path: Path
    ) -> None:
        head = "MAIL_USERNAME=owner@example.com\n"
        text = head + "#" * (MAX_ENV_FILE_BYTES - len(head) - 1) + "\n"
        assert () == read_env_file(env_file(tmp_path, text, 0o644))[1]
        assert ("ANGELOS_ENV_FILE: must be at most 64 KiB",) == read_env_file(
            env_file(tmp_path, text + "#", 0o644)
        )[1]

    def test_invalid_utf8_names_its_line(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.env"
        path.write_bytes(b"MAIL_USERNAME=a@example.com\nMAIL_FROM=\xff@example.com\n")
        assert ("ANGELOS_ENV_FILE: line 2: is not valid UTF-8",) == read_env_file(str(path))[1]


class TestMerging:
    def test_the_real_environment_wins_over_the_file(self, tmp_path: Path) -> None:
        path = env_file(tmp_path, "MAIL_USERNAME=file@example.com\nMAIL_FROM=f@example.com\n")
        env, info = with_env_file({"MAIL_USERNAME": "env@example.com", "MAIL_FROM": ""}, path)
        assert ("env@example.com", "f@example.com") == (env["MAIL_USERNAME"], env["MAIL_FROM"])
        assert info is not None and ("MAIL_FROM",) == info.names

    def test_the_flag_wins_over_the_variable(self, tmp_path: Path) -> None:
        flag = env_file(tmp_path, "MAIL_USERNAME=flag@example.com\n")
        env, info = with_env_file({"ANGELOS_ENV_FILE": str(tmp_path / "other.env")}, flag)
        assert info is not None and (flag, ()) == (info.path, info.problems)
        assert "flag@example.com" == env["MAIL_USERNAME"]

    def test_the_variable_names_the_file_when_there_is_no_flag(self, tmp_path: Path) -> None:
        path = env_file(tmp_path, "MAIL_USERNAME=var@example.com\n")
        env, _ = with_env_file({"ANGELOS_ENV_FILE": path})
        assert "var@example.com" == env["MAIL_USERNAME"]

    def test_no_file_is_read_unless_one_is_named(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / ".env").write_text("MAIL_USERNAME=found@example.com\n")
        (tmp_path / "angelos.env").write_text("MAIL_USERNAME=found@example.com\n")
        monkeypatch.chdir(tmp_path)
        assert ({"HOME": str(tmp_path)}, None) == with_env_file({"HOME": str(tmp_path)})

    def test_a_refused_file_contributes_nothing_and_its_problems_come_first(
        self, tmp_path: Path
    ) -> None:
        path = env_file(tmp_path, MAILBOX + "export MAIL_FROM=x@example.com\n")
        env, info = with_env_file({"HOME": "/home/owner"}, path)
        config = load_config(env, info)
        assert {"HOME": "/home/owner"} == env
        assert "ANGELOS_ENV_FILE: line 6: `export` is not allowed" in config.problems[0]
        assert "MAIL_USERNAME: required" in config.problems

    def test_check_config_marks_values_from_the_file_and_never_shows_the_password(
        self, tmp_path: Path
    ) -> None:
        config = load_config(*with_env_file({"HOME": "/home/owner"}, env_file(tmp_path, MAILBOX)))
        lines = check_config_lines(config)
        assert "  MAIL_PASSWORD = set  (from the env file)" in lines
        assert "  MAIL_AUTH_MODE = password" in lines
        assert lines[-1] == "No problems found."
        text = "\n".join(lines) + repr(config)
        assert PASSWORD not in text
