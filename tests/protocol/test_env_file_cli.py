"""--env-file and ANGELOS_ENV_FILE as the operator uses them: check-config, ledger, HTTP serve."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.angelos_process import ROOT, angelos_command, clean_env, free_port
from support.services import Services

MAILBOX = {"MAIL_USERNAME": "owner@example.com", "MAIL_PASSWORD": "pw-not-shown-5Tq"}


def write_env(path: Path, values: dict[str, str], mode: int = 0o600) -> str:
    path.write_text("".join(f"{name}={value}\n" for name, value in values.items()))
    path.chmod(mode)
    return str(path)


def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        angelos_command(*args),
        env=clean_env(env or {}),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_check_config_passes_on_a_complete_env_file(tmp_path: Path) -> None:
    path = write_env(tmp_path / "a.env", MAILBOX)
    proc = run("check-config", "--env-file", path)
    assert (0, "No problems found.") == (proc.returncode, proc.stdout.splitlines()[-1])
    assert "pw-not-shown-5Tq" not in proc.stdout


def test_check_config_fails_on_a_missing_env_file_named_by_the_variable(tmp_path: Path) -> None:
    proc = run("check-config", env={"ANGELOS_ENV_FILE": str(tmp_path / "missing.env")})
    assert 1 == proc.returncode
    assert "  - ANGELOS_ENV_FILE: no such file" in proc.stdout.splitlines()


def test_a_dot_env_in_the_working_directory_is_never_read(tmp_path: Path) -> None:
    write_env(tmp_path / ".env", MAILBOX)
    proc = run("check-config", env={"PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert 1 == proc.returncode
    assert "  - MAIL_USERNAME: required" in proc.stdout.splitlines()


def test_http_serve_refuses_to_start_on_a_refused_env_file(tmp_path: Path) -> None:
    path = write_env(tmp_path / "a.env", MAILBOX, 0o644)
    proc = run(
        "serve", "--transport", "http", "--port", str(free_port()),
        "--insecure-local-owner", "me", "--env-file", path,
    )  # fmt: skip
    (line,) = proc.stderr.splitlines()
    assert 2 == proc.returncode
    assert "ANGELOS_ENV_FILE: holds MAIL_PASSWORD" in line and "Fix the env file" in line
    assert "pw-not-shown-5Tq" not in proc.stderr


def test_ledger_refuses_a_refused_env_file_before_opening_any_store(tmp_path: Path) -> None:
    path = tmp_path / "a.env"
    path.write_text("SEND_LEDGER_NAMESPACE=other\n\nexport MAIL_TIMEOUT=30s\n")
    proc = run("ledger", "list", "--status", "unknown", "--env-file", str(path))
    assert 2 == proc.returncode
    assert "angelos ledger: ANGELOS_ENV_FILE: line 3: `export` is not allowed" in proc.stderr


def test_ledger_opens_the_store_the_env_file_names(tmp_path: Path) -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    path = write_env(tmp_path / "a.env", {"ANGELOS_REDIS_URL": closed})
    proc = run("ledger", "list", "--status", "unknown", "--env-file", path)
    assert 3 == proc.returncode, proc.stderr


def test_ledger_lists_the_real_store_named_by_the_env_file(
    services: Services, tmp_path: Path
) -> None:
    settings = {"ANGELOS_REDIS_URL": services.redis_url, "SEND_LEDGER_NAMESPACE": "env-file-cli"}
    path = write_env(tmp_path / "a.env", settings)
    proc = run("ledger", "list", "--status", "unknown", "--env-file", path)
    assert (0, "") == (proc.returncode, proc.stdout)
    assert "0 send(s) with status unknown" in proc.stderr
