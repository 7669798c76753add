"""The MCP boundary over stdio, through mcp's own Client, in both protocol eras."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import tty
from pathlib import Path
from typing import Any, ClassVar

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from support.angelos_process import ROOT, angelos_command, clean_env

ERAS = ["legacy", "2026-07-28"]


def stdio_target(env: dict[str, str]) -> StdioServerParameters:
    command = angelos_command("serve", "--transport", "stdio")
    return StdioServerParameters(command=command[0], args=command[1:], env=clean_env(env), cwd=ROOT)


@pytest.fixture(scope="module")
def env(services: Any) -> dict[str, str]:
    return dict(services.product_env)


class TestStdioSession:
    @pytest.mark.parametrize("mode", ERAS)
    async def test_discovery_lists_six_tools_in_either_era(
        self, env: dict[str, str], mode: str
    ) -> None:
        async with Client(stdio_target(env), mode=mode) as client:
            tools = (await client.list_tools()).tools
        assert [
            "mail_create",
            "mail_delete_permanently",
            "mail_modify",
            "mail_prepare",
            "mail_query",
            "mail_send_confirmed",
        ] == [t.name for t in tools]

    @pytest.mark.parametrize("mode", ERAS)
    async def test_capabilities_come_from_the_real_dovecot(
        self, env: dict[str, str], mode: str
    ) -> None:
        async with Client(stdio_target(env), mode=mode) as client:
            result = await client.call_tool("mail_query", {"action": "capabilities"})
        assert result.is_error is False
        body = result.structured_content
        assert body is not None
        assert json.loads(result.content[0].text) == body
        assert body["server"]["move"] and body["server"]["uid_expunge"]
        assert ["Trash"] == body["server"]["special_folders"]["trash"]
        assert body["mailbox_writes_enabled"] is False
        assert body["send_enabled"] is False

    async def test_folders_list_the_exact_unicode_names(self, env: dict[str, str]) -> None:
        async with Client(stdio_target(env)) as client:
            result = await client.call_tool("mail_query", {"action": "folders"})
        assert result.structured_content is not None
        names = {f["name"] for f in result.structured_content["folders"]}
        assert {"INBOX", "Drafts", "Sent", "Trash", "Archive"} <= names
        assert "Projets/Café Été 2026" in names

    async def test_malformed_call_is_an_application_error_with_recovery(
        self, env: dict[str, str]
    ) -> None:
        async with Client(stdio_target(env)) as client:
            result = await client.call_tool("mail_query", {"action": "folders", "detail": "full"})
        body = result.structured_content
        assert result.is_error is True and body is not None
        assert "invalid_arguments" == body["error_code"]
        assert body["retry_safe"] is True
        assert {"transport_retry_safe": True, "action": "correct_input"} == body["retry"]
        assert body["outcome"] is None
        assert json.loads(result.content[0].text) == body

    async def test_write_tool_without_write_scope_is_insufficient_scope(
        self, env: dict[str, str]
    ) -> None:
        async with Client(stdio_target(env)) as client:
            result = await client.call_tool("mail_create", {"action": "folder", "name": "Nope"})
        body = result.structured_content
        assert result.is_error is True and body is not None
        assert "insufficient_scope" == body["error_code"]
        assert "mail.write" == body["required_scope"]
        assert json.loads(result.content[0].text) == body
        assert "mail.write is not in ANGELOS_LOCAL_SCOPES" in body["error"]

    async def test_scoped_but_disabled_writes_are_deployment_disabled(
        self, env: dict[str, str]
    ) -> None:
        scoped = {**env, "ANGELOS_LOCAL_SCOPES": "mail.read mail.write"}
        async with Client(stdio_target(scoped)) as client:
            result = await client.call_tool("mail_create", {"action": "folder", "name": "Nope"})
        body = result.structured_content
        assert body is not None and "deployment_disabled" == body["error_code"]
        assert "disabled by the server operator" in body["error"]
        assert result.meta is None or "mcp/www_authenticate" not in result.meta


class TestStdinKinds:
    """Pipes are served on the event loop; a regular file falls back to the SDK's reader."""

    REQUESTS: ClassVar[list[dict[str, Any]]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "file", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "mail_query", "arguments": {"action": "folders", "bogus": 1}}},
    ]  # fmt: skip

    def test_requests_read_from_a_regular_file_are_answered(
        self, env: dict[str, str], tmp_path: Any
    ) -> None:
        # At EOF the SDK stops serving, so only the handshake's answer is certain here.
        requests = tmp_path / "requests.jsonl"
        requests.write_text(json.dumps(self.REQUESTS[0]) + "\n")
        with requests.open("rb") as stdin:
            proc = subprocess.run(
                angelos_command("serve", "--transport", "stdio"),
                env=clean_env(env), cwd=ROOT, stdin=stdin, capture_output=True, timeout=60,
            )  # fmt: skip
        assert 0 == proc.returncode, proc.stderr.decode()[-2000:]
        (answer,) = map(json.loads, proc.stdout.splitlines())
        assert 1 == answer["id"] and "angelos" == answer["result"]["serverInfo"]["name"]

    def test_an_unparseable_line_in_a_pipe_gets_a_parse_error_and_serving_goes_on(
        self, env: dict[str, str]
    ) -> None:
        lines = [json.dumps(r) for r in self.REQUESTS]
        lines.insert(2, "not json at all")
        proc = subprocess.Popen(
            angelos_command("serve", "--transport", "stdio"),
            env=clean_env(env), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("\n".join(lines).encode() + b"\n")
            proc.stdin.flush()
            answers: dict[int | None, Any] = {}
            while len(answers) < 4:
                message = json.loads(proc.stdout.readline())
                answers[message["id"]] = message
            proc.stdin.close()
            assert 0 == proc.wait(timeout=30)
        finally:
            proc.kill()
        assert {"code": -32700, "message": "Parse error"} == answers[None]["error"]
        assert 6 == len(answers[2]["result"]["tools"])
        assert answers[3]["result"]["isError"] is True

    def test_a_terminal_on_stdin_is_served_and_left_blocking(self, env: dict[str, str]) -> None:
        # Non-blocking mode belongs to the terminal, shared with the user's shell: never set it.
        main, terminal = pty.openpty()
        tty.setraw(terminal)  # no echo, no line editing: the request reaches stdin as sent
        proc = subprocess.Popen(
            angelos_command("serve", "--transport", "stdio"),
            env=clean_env(env), cwd=ROOT, stdin=terminal, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            os.write(main, json.dumps(self.REQUESTS[0]).encode() + b"\n")
            answer = json.loads(proc.stdout.readline())
            assert 1 == answer["id"] and "angelos" == answer["result"]["serverInfo"]["name"]
            assert 0 == fcntl.fcntl(terminal, fcntl.F_GETFL) & os.O_NONBLOCK
        finally:
            proc.kill()
            proc.wait(timeout=30)
            os.close(main)
            os.close(terminal)


BAD = {
    "MAIL_PROVIDER": "custom",
    "MAIL_USERNAME": "a@example.test",
    "MAIL_PASSWORD": "pw-not-shown",
    "IMAP_HOST": "127.0.0.1",
}
BAD_PROBLEMS = [
    "IMAP_HOST: must be a DNS host name, not an IP literal",
    "SMTP_HOST: required for MAIL_PROVIDER=custom",
]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip


def bare_target(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """What an MCP client starts: the SDK passes only HOME, LOGNAME, PATH, SHELL, TERM, USER."""
    command = angelos_command("serve", "--transport", "stdio", *args)
    return StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=ROOT)


async def refusal_of(target: StdioServerParameters, mode: str) -> MCPError:
    """The error a client gets from a server that cannot start, on its first request."""
    errors: list[MCPError] = []
    try:
        async with Client(target, mode=mode) as client:
            await client.list_tools()
    except* MCPError as group:
        errors.extend(leaves(group))
    assert 1 == len(errors), "the server answered"
    return errors[0]


def leaves(group: BaseExceptionGroup[MCPError]) -> list[MCPError]:
    found: list[MCPError] = []
    for error in group.exceptions:
        found.extend(leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return found


class TestStdioStartup:
    @pytest.mark.parametrize("mode", ERAS)
    async def test_a_client_of_either_era_is_told_what_to_fix(self, mode: str) -> None:
        error = await refusal_of(bare_target(env=BAD), mode)
        assert -32603 == error.error.code
        assert {"problems": BAD_PROBLEMS} == error.error.data
        message = error.error.message
        expected = "angelos cannot start: " + "; ".join(BAD_PROBLEMS) + ". Set or correct these"
        assert message.startswith(expected)
        assert "--env-file" in message and "pw-not-shown" not in message

    async def test_a_client_that_passes_no_environment_is_told_the_missing_variables(
        self,
    ) -> None:
        error = await refusal_of(bare_target(), "legacy")
        missing = ["MAIL_USERNAME: required", "MAIL_PASSWORD: required for password login"]
        assert {"problems": missing} == error.error.data

    def test_stderr_gets_one_actionable_line_and_the_server_exits_after_initialize(
        self,
    ) -> None:
        proc = subprocess.Popen(
            angelos_command("serve", "--transport", "stdio"),
            env=clean_env(BAD), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdin is not None
        try:
            lines = [{"jsonrpc": "2.0", "method": "notifications/initialized"}, INITIALIZE]
            proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            proc.stdin.flush()  # and left open: the answer to initialize ends the process
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        (answer,) = map(json.loads, out.splitlines())
        (line,) = map(json.loads, err.splitlines())
        assert (2, 1, -32603) == (proc.returncode, answer["id"], answer["error"]["code"])
        assert "error" == line["level"]
        assert line["event"] == answer["error"]["message"]
        assert "pw-not-shown" not in err.decode()

    def test_without_a_client_it_exits_at_once_with_nothing_on_stdout(self) -> None:
        proc = subprocess.run(
            angelos_command("serve", "--transport", "stdio"),
            env=clean_env(BAD),
            cwd=ROOT,
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        err = proc.stderr.decode()
        assert 2 == proc.returncode
        assert 1 == len(err.splitlines()) and "IMAP_HOST" in err and "SMTP_HOST" in err
        assert "pw-not-shown" not in err
        assert b"" == proc.stdout

    def test_check_config_reports_the_same_problems_and_fails(self) -> None:
        proc = subprocess.run(
            angelos_command("check-config"),
            env=clean_env(BAD),
            cwd=ROOT,
            capture_output=True,
            timeout=30,
        )
        out = proc.stdout.decode()
        assert 0 != proc.returncode
        assert "IMAP_HOST" in out and "pw-not-shown" not in out


class TestEnvFile:
    @pytest.mark.parametrize("mode", ERAS)
    async def test_a_client_that_passes_no_environment_is_served_from_the_env_file(
        self, env: dict[str, str], mode: str, tmp_path: Path
    ) -> None:
        path = tmp_path / "angelos.env"
        path.write_text("".join(f"{name}={value}\n" for name, value in env.items()))
        path.chmod(0o600)
        async with Client(bare_target("--env-file", str(path)), mode=mode) as client:
            result = await client.call_tool("mail_query", {"action": "folders"})
        assert result.structured_content is not None
        assert "INBOX" in {f["name"] for f in result.structured_content["folders"]}

    async def test_a_readable_env_file_with_the_password_is_refused_to_the_client(
        self, env: dict[str, str], tmp_path: Path
    ) -> None:
        path = tmp_path / "angelos.env"
        path.write_text("".join(f"{name}={value}\n" for name, value in env.items()))
        path.chmod(0o644)
        error = await refusal_of(bare_target(env={"ANGELOS_ENV_FILE": str(path)}), "2026-07-28")
        problems = error.error.data["problems"]
        assert problems[0].startswith("ANGELOS_ENV_FILE: holds MAIL_PASSWORD")
        assert "Fix the env file" in error.error.message
        assert env["MAIL_PASSWORD"] not in error.error.message
