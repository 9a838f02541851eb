#!/usr/bin/env python3
"""Interop check (issue 37): seed 000's own JSON examples, verbatim but for their
placeholders, through the official MCP Python SDK client against the real binary.

Each example is first validated against the tool's advertised inputSchema (JSON Schema
2020-12, as a strict host would), then called; every structuredContent is validated against
the advertised outputSchema. Covered: Execution list/get/explain/read/observe/wait, the flat
native prompt and receipt wait (a fake Codex TUI, `tests/fake/fake-agent`, receives the
prompt exactly once), and the flat Herdr read (`tests/fake/herdr`, configured through
WINX_HERDR_CONFIG for this run only).

Driven by `tests/it/interop.rs` (same environment rules as sdk_client.py); the last stdout line
is one JSON object {"ok", "checks", "failures", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from sdk_client import Checks, run_checks, server_env

REQUEST_TIMEOUT_S = 40.0
FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake")

# Seed 000's examples, as the seed writes them.
SEED_LIST = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"action": {"type": "list", "limit": 20}
}"""
SEED_READ = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"action": {
"type": "read",
"execution_id": "<execution-id>",
"source": "output",
"page_bytes": 16384
}
}"""
SEED_OBSERVE = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"action": {
"type": "observe",
"items": [
{"execution_id": "<build-id>", "page_bytes": 2048},
{"execution_id": "<test-id>", "source": "output", "page_bytes": 4096},
{"execution_id": "<test-id>", "source": "screen", "page_bytes": 2048}
],
"timeout_seconds": 5
}
}"""
SEED_WAIT = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"action": {
"type": "wait",
"execution_ids": ["<execution-one>", "<execution-two>"],
"after": "<cursor-from-prior-list-or-wait>",
"timeout_seconds": 10
}
}"""
SEED_PROMPT = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"backend": "native",
"action": "prompt",
"target": "<execution-id>",
"prompt_id": "review-round-1",
"text": "Review the current changes and report any correctness defects.",
"recognizer": "auto",
"timeout_seconds": 10
}"""
SEED_RECEIPT_WAIT = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"action": "wait",
"target": "<execution-id>",
"prompt_id": "review-round-1",
"timeout_seconds": 5
}"""
SEED_HERDR_READ = """{
"thread_id": "<initialized-thread>",
"workspace_root": "/canonical/workspace",
"backend": "herdr",
"action": "read",
"target": "writer",
"lines": 100
}"""


def seed(example: str, pair: dict[str, str], **ids: str) -> dict[str, Any]:
    text = (example.replace("<initialized-thread>", pair["thread_id"])
            .replace("/absolute/initialized/workspace", pair["workspace_root"])
            .replace("/canonical/workspace", pair["workspace_root"]))
    for name, value in ids.items():
        text = text.replace(f"<{name.replace('_', '-')}>", value)
    return json.loads(text)


class Tools:
    """The advertised schemas, and calls checked against them."""

    def __init__(self, client: Client, listed: Any, c: Checks) -> None:
        self.client = client
        self.c = c
        self.inputs = {t.name: Draft202012Validator(t.input_schema) for t in listed.tools}
        self.outputs = {t.name: Draft202012Validator(t.output_schema) for t in listed.tools
                        if t.output_schema}

    async def call(self, tool: str, args: dict[str, Any], what: str) -> dict[str, Any]:
        errors = [e.message for e in self.inputs[tool].iter_errors(args)]
        self.c.check(not errors, f"{what}: the inputSchema accepts it", errors)
        r = await self.client.call_tool(tool, args)
        sc = r.structured_content or {}
        errors = [e.message for e in self.outputs[tool].iter_errors(sc)]
        self.c.check(not errors, f"{what}: structuredContent matches outputSchema", errors)
        return sc


def herdr_setup(tmp: str, workspace: str) -> str:
    """A private Herdr configuration naming the fake, and the fake's world."""
    sock = os.path.join(tmp, "sock")
    with open(sock, "w", encoding="utf-8") as f:
        json.dump({"agents": [{"pane_id": "w1:p1", "terminal_id": "term_1", "agent": "claude",
                               "agent_status": "idle",
                               "screen": "first line\nsecond line\nlast line\n"}]}, f)
    cfg = os.path.join(tmp, "herdr.json")
    fd = os.open(cfg, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"executable": os.path.realpath(os.path.join(FAKES, "herdr")),
                   "socket_path": sock, "deadline_ms": 5000,
                   "bindings": [{"principal_key": "local", "workspace_root": workspace,
                                 "targets": {"writer": "w1:p1"}}]}, f)
    return cfg


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    workspace = os.path.realpath(args.workspace)
    with tempfile.TemporaryDirectory() as tmp:
        env = server_env()
        env["WINX_HERDR_CONFIG"] = herdr_setup(tmp, workspace)
        params = StdioServerParameters(command=args.server, args=["serve"], env=env)
        async with Client(params, mode=args.mode, read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
            t = Tools(client, await client.list_tools(), c)
            await scenario(t, c, workspace, os.path.join(tmp, "codex.log"), report)


async def scenario(t: Tools, c: Checks, workspace: str, log: str, report: dict[str, Any]) -> None:
    sc = await t.call("Initialize", {"type": "first_call", "workspace_root": workspace}, "init")
    pair = {"thread_id": sc["data"]["thread_id"], "workspace_root": sc["data"]["workspace_root"]}
    sc = await t.call("BashCommand", {**pair, "action_json": {"command": "printf 'built\\n'"}},
                      "build")
    build = sc["data"]["state"]["execution_id"]
    sc = await t.call("BashCommand", {**pair, "action_json": {
        "command": f"python3 {os.path.join(FAKES, 'fake-agent')} codex {log}"},
        "wait_for_seconds": 0.3}, "start the fake agent")
    agent = sc["data"]["state"]["execution_id"]
    sc = await t.call("BashCommand", {**pair, "action_json": {"wait_for_turn": True}}, "turn")
    c.check(sc["data"].get("turn_state") == "awaiting_input", "the fake agent awaits input", sc)

    # Execution, as the seed shows it.
    sc = await t.call("Execution", seed(SEED_LIST, pair), "seed list")
    ids = [e["execution_id"] for e in sc["data"]["executions"]]
    c.check(build in ids and agent in ids, "list shows both executions", ids)
    cursor = sc["data"]["catalog_cursor"]
    sc = await t.call("Execution", seed(SEED_READ, pair, execution_id=build), "seed read")
    c.check(sc["data"]["page"]["text"] == "built\n", "read pages the output", sc)
    sc = await t.call("Execution", {**pair, "action": {"type": "get", "execution_id": build}},
                      "seed get")
    c.check(sc["data"].get("exit_code") == 0, "get has the exit code", sc)
    sc = await t.call("Execution", {**pair, "action": {"type": "explain", "execution_id": agent,
                                                       "recognizer": "auto"}}, "seed explain")
    c.check(isinstance(sc["data"].get("detection"), dict), "explain has a detection", sc)
    sc = await t.call("Execution", seed(SEED_OBSERVE, pair, build_id=build, test_id=agent),
                      "seed observe")
    c.check(len(sc["data"]["items"]) == 3, "observe answers three items", sc)
    wait = seed(SEED_WAIT, pair, execution_one=build, execution_two=agent,
                cursor_from_prior_list_or_wait=cursor)
    wait["action"]["timeout_seconds"] = 0
    sc = await t.call("Execution", wait, "seed wait (one pass)")
    c.check(sc["data"]["outcome"] in ("timeout", "changed"), "wait answers an outcome", sc)
    c.check(sc["data"]["effectiveWait"]["timeout_seconds"] == 0, "effectiveWait is the request's", sc)
    again = sc.get("nextAction") or {}
    c.check(again.get("arguments", {}).get("action", {}).get("after") == sc["data"]["catalog_cursor"],
            "the next action waits from the new baseline", again)

    # The flat Agent form: a native prompt, its receipt, and a Herdr read.
    sc = await t.call("Agent", seed(SEED_PROMPT, pair, execution_id=agent), "seed prompt")
    c.check(sc.get("errorCode") is None and sc["data"].get("delivery") == "delivered",
            "the flat prompt is delivered", sc)
    sc = await t.call("Agent", seed(SEED_RECEIPT_WAIT, pair, execution_id=agent), "seed receipt wait")
    c.check(sc.get("errorCode") is None and sc["data"].get("prompt_id") == "review-round-1",
            "the flat receipt wait reads the receipt", sc)
    sc = await t.call("Agent", seed(SEED_PROMPT, pair, execution_id=agent), "seed prompt again")
    c.check(sc["data"].get("replayed") is True, "the same prompt again is its receipt", sc)
    with open(log, encoding="utf-8") as f:
        received = f.read().splitlines()
    c.check(received == ["Review the current changes and report any correctness defects."],
            "the agent got the prompt once", received)
    report["received_lines"] = len(received)
    sc = await t.call("Agent", seed(SEED_HERDR_READ, pair), "seed herdr read")
    c.check(sc.get("errorCode") is None and "last line" in sc["data"].get("text", ""),
            "the flat Herdr read answers the target's text", sc)
    await t.call("BashCommand", {**pair, "action_json": {"send_text": "exit", "submit": True}}, "exit")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--mode", default="auto")
    args = ap.parse_args()
    return run_checks(run, args, {})


if __name__ == "__main__":
    sys.exit(main())
