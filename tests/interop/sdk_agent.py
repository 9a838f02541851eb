#!/usr/bin/env python3
"""Interop check: an orchestrator on the official MCP Python SDK client delegates to a
coding agent through the `Agent` tool of the real `winx-code-agent` binary (issue 14's
"done when").

It runs the fake Codex TUI (`tests/fake/fake-agent`) in a session, prompts it exactly once,
restarts the server (a new client process on the same state), re-reads the receipt and
waits for the agent to be idle again, then gets recovery advice for a
`claude --resume <uuid>` launch (the fake `tests/fake/bin/claude`).

Driven by `tests/it/interop.rs` (same environment rules as sdk_client.py); the last stdout line
is one JSON object {"ok", "checks", "failures", ...}.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from mcp import Client, StdioServerParameters

from sdk_client import Checks, run_checks, server_env

REQUEST_TIMEOUT_S = 40.0
FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake")
UUID = "123e4567-e89b-42d3-a456-426614174000"


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await client.call_tool(tool, args)
    return r.structured_content


async def first_run(args: argparse.Namespace, c: Checks, log: str) -> tuple[dict[str, str], str]:
    params = StdioServerParameters(command=args.server, args=["serve"], env=server_env())
    async with Client(params, mode="auto", read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        sc = await call(client, "Initialize", {"type": "first_call",
                                               "workspace_root": os.path.realpath(args.workspace)})
        pair = {"thread_id": sc["data"]["thread_id"], "workspace_root": sc["data"]["workspace_root"]}
        fake = os.path.join(FAKES, "fake-agent")
        sc = await call(client, "BashCommand", {**pair, "action_json": {
            "command": f"python3 {fake} codex {log}"}, "wait_for_seconds": 0.3})
        target = sc["data"]["state"]["execution_id"]
        sc = await call(client, "BashCommand", {**pair, "action_json": {"wait_for_turn": True}})
        c.check(sc["data"]["turn_state"] == "awaiting_input", "the fake agent awaits input", sc)
        prompt = {"type": "prompt", "target": target, "prompt_id": "review-1",
                  "text": "work:300 review the change"}
        sc = await call(client, "Agent", {**pair, "action": prompt})
        c.check(sc["data"]["delivery"] == "delivered", "the prompt is delivered", sc)
        c.check(sc["data"]["input_sent"] is True, "input_sent is true", sc)
        return pair, target


async def second_run(args: argparse.Namespace, c: Checks, log: str, pair: dict[str, str],
                     target: str, report: dict[str, Any]) -> None:
    params = StdioServerParameters(command=args.server, args=["serve"], env=server_env())
    async with Client(params, mode="auto", read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        wait = {"type": "wait", "target": target, "prompt_id": "review-1", "timeout_seconds": 20}
        sc = await call(client, "Agent", {**pair, "action": wait})
        c.check(sc.get("errorCode") is None, "the receipt is read after the restart", sc)
        c.check(sc["data"]["delivery"] == "delivered", "still delivered", sc)
        c.check(sc["data"]["activity_observed"] is True, "the agent was seen working", sc)
        c.check(sc["data"]["outcome"] == "awaiting_input", "the agent is idle again", sc)
        # The same prompt again: the stored receipt, nothing typed twice.
        again = {"type": "prompt", "target": target, "prompt_id": "review-1",
                 "text": "work:300 review the change"}
        sc = await call(client, "Agent", {**pair, "action": again})
        c.check(sc["data"]["replayed"] is True, "a repeated prompt is the stored receipt", sc)
        with open(log, encoding="utf-8") as f:
            received = f.read().splitlines()
        c.check(received == ["work:300 review the change"], "the agent got the prompt once", received)
        report["received_lines"] = len(received)
        await call(client, "BashCommand", {**pair, "action_json": {"send_text": "exit", "submit": True}})
        sc = await call(client, "BashCommand", {**pair, "action_json": {"status_check": True},
                                                "wait_for_seconds": 10})
        c.check(sc["data"]["state"]["process_status"] == "exited", "the fake agent exited", sc)
        bin_dir = os.path.realpath(os.path.join(FAKES, "bin"))
        await call(client, "BashCommand", {**pair, "action_json": {"command": f"export PATH={bin_dir}:$PATH"}})
        sc = await call(client, "BashCommand", {**pair, "action_json": {
            "command": f"claude --resume {UUID}"}, "wait_for_seconds": 1})
        launch = sc["data"]["state"]["execution_id"]
        sc = await call(client, "Agent", {**pair, "action": {"type": "get", "execution_id": launch}})
        advice = sc["data"].get("recovery", {})
        c.check(advice.get("advice") == "explicit_target", "explicit recovery advice", advice)
        c.check(advice.get("recommended_command") == f"claude --resume {UUID}",
                "the advice resumes that conversation", advice)
        await call(client, "BashCommand", {**pair, "action_json": {"send_text": "bye", "submit": True}})


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "codex.log")
        pair, target = await first_run(args, c, log)
        await second_run(args, c, log, pair, target, report)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--mode", default="auto")
    args = ap.parse_args()
    return run_checks(run, args, {})


if __name__ == "__main__":
    sys.exit(main())
