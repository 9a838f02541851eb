#!/usr/bin/env python3
"""Interop check: an orchestrator on the official MCP Python SDK client uses the execution
history of the real `winx-code-agent` binary (issue 13's "done when").

It starts three builds in the background, waits on all of them with `Execution wait`,
kills the guardian under a fourth command, restarts the server (a new client process on the
same state), then pages through each build's full output with `read` cursors and tells the
unknown outcome from a success and a failure.

Driven by `tests/it/interop.rs` (same environment rules as sdk_client.py); the last stdout line
is one JSON object {"ok", "checks", "failures", ...}.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from mcp import Client, StdioServerParameters

from sdk_client import Checks, run_checks, server_env

REQUEST_TIMEOUT_S = 40.0
LINES = 4000


def build(name: str, code: int) -> str:
    return f"for i in $(seq 1 {LINES}); do echo {name}-$i; done; exit {code}"


def expected(name: str) -> str:
    return "".join(f"{name}-{i}\n" for i in range(1, LINES + 1))


async def session(client: Client, workspace: str) -> dict[str, str]:
    r = await client.call_tool("Initialize", {"type": "first_call", "workspace_root": workspace})
    d = r.structured_content["data"]
    return {"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]}


async def execution(client: Client, pair: dict[str, str], action: dict[str, Any]) -> dict[str, Any]:
    r = await client.call_tool("Execution", {**pair, "action": action})
    return r.structured_content


async def first_run(args: argparse.Namespace, c: Checks, ids: dict[str, str]) -> dict[str, str]:
    params = StdioServerParameters(command=args.server, args=["serve"], env=server_env())
    async with Client(params, mode="auto", read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        pair = await session(client, os.path.realpath(args.workspace))
        for name, code in (("alpha", 0), ("beta", 2), ("gamma", 0)):
            r = await client.call_tool("BashCommand", {**pair, "action_json": {
                "command": build(name, code), "is_background": True}})
            ids[name] = r.structured_content["data"]["state"]["execution_id"]
        # Observe first: its catalog cursor is the baseline, so no exit can slip by unseen.
        items = [{"execution_id": i, "page_bytes": 4} for i in ids.values()]
        sc = await execution(client, pair, {"type": "observe", "items": items})
        after = sc["data"]["catalog_cursor"]
        pending = {it["execution_id"] for it in sc["data"]["items"]
                   if it["execution"]["process_status"] != "exited"}
        for _ in range(20):
            if not pending:
                break
            sc = await execution(client, pair, {"type": "wait", "execution_ids": sorted(pending),
                                                "after": after, "events": ["exited"],
                                                "timeout_seconds": 30})
            c.check(sc.get("errorCode") is None, "wait answers", sc)
            after = sc["data"]["catalog_cursor"]
            for e in sc["data"]["executions"]:
                if e["process_status"] == "exited":
                    pending.discard(e["execution_id"])
        c.check(not pending, "wait saw every build exit", pending)
        # A command whose guardian dies: its outcome is unknown, never a success.
        r = await client.call_tool("BashCommand", {**pair, "action_json": {
            "command": "sleep 60"}, "wait_for_seconds": 0.3})
        ids["lost"] = r.structured_content["data"]["state"]["execution_id"]
        status = await client.call_tool("Initialize", {"type": "status", **pair})
        shell = status.structured_content["data"]["shell"]["pid"]
        with open(f"/proc/{shell}/stat") as f:
            guardian = int(f.read().rsplit(")", 1)[1].split()[1])
        # The baseline is taken before the kill, so the change cannot slip in before it.
        seen = await execution(client, pair, {"type": "observe", "items": [{"execution_id": ids["lost"]}]})
        os.kill(guardian, signal.SIGKILL)
        sc = await execution(client, pair, {"type": "wait", "execution_ids": [ids["lost"]],
                                            "after": seen["data"]["catalog_cursor"],
                                            "events": ["unknown"], "timeout_seconds": 30})
        c.check(sc["data"]["outcome"] == "changed", "the lost command turns unknown", sc)
        return pair


async def second_run(args: argparse.Namespace, c: Checks, ids: dict[str, str],
                     pair: dict[str, str], report: dict[str, Any]) -> None:
    params = StdioServerParameters(command=args.server, args=["serve"], env=server_env())
    async with Client(params, mode="auto", read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        for name in ("alpha", "beta", "gamma"):
            text, cursor, pages = "", None, 0
            while pages < 100:
                action = {"type": "read", "execution_id": ids[name], "page_bytes": 8192}
                if cursor:
                    action["cursor"] = cursor
                sc = await execution(client, pair, action)
                page = sc["data"]["page"]
                c.check(page.get("retention_gap") is None, f"{name}: no retention gap", page)
                text += page["text"]
                pages += 1
                if not page["has_more"]:
                    break
                cursor = page["next_cursor"]
            c.check(text == expected(name), f"{name}: full output after the restart",
                    {"len": len(text), "want": len(expected(name))})
            report[f"{name}_pages"] = pages
        got = {}
        for name in ("alpha", "beta", "lost"):
            sc = await execution(client, pair, {"type": "get", "execution_id": ids[name]})
            got[name] = (sc["data"]["process_status"], sc["data"]["exit_code"])
        c.check(got["alpha"] == ("exited", 0), "alpha succeeded", got)
        c.check(got["beta"] == ("exited", 2), "beta failed with 2", got)
        c.check(got["lost"] == ("unknown", None), "the lost command is unknown, not a success", got)


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    ids: dict[str, str] = {}
    pair = await first_run(args, c, ids)
    await second_run(args, c, ids, pair, report)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--mode", default="auto")
    args = ap.parse_args()
    return run_checks(run, args, {})


if __name__ == "__main__":
    sys.exit(main())
