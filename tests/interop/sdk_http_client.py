#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK streamable-HTTP client (pinned `mcp`, see the
Makefile) against a running `winx-code-agent serve --http`.

Driven by `tests/interop_http.rs`, which starts the server; by hand:

    WINX_TEST_HTTP_TOKEN=... target/venv/bin/python tests/interop/sdk_http_client.py \
        --url http://127.0.0.1:8000/mcp --workspace /some/dir --mode auto

The bearer token comes from $WINX_TEST_HTTP_TOKEN (never argv). The last stdout line is
one JSON object: {"ok", "protocol_version", "tools", "thread_id", "checks", "failures"};
the exit status is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any

import anyio
import httpx2
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION

REQUEST_TIMEOUT_S = 20.0


class Checks:
    def __init__(self) -> None:
        self.count = 0
        self.failures: list[str] = []

    def check(self, cond: bool, what: str, detail: Any = None) -> bool:
        self.count += 1
        if not cond:
            self.failures.append(what if detail is None else f"{what}: {str(detail)[:600]}")
        return cond


def _leaves(e: BaseException) -> list[str]:
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in _leaves(sub)]
    return [f"{type(e).__name__}: {e}"]


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    token = os.environ["WINX_TEST_HTTP_TOKEN"]
    workspace = os.path.realpath(args.workspace)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(REQUEST_TIMEOUT_S),
    )
    async with http:
        transport = streamable_http_client(args.url, http_client=http)
        async with Client(transport, mode=args.mode, read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
            version = client.protocol_version
            report["protocol_version"] = version
            if args.mode == "auto":
                c.check(version == LATEST_MODERN_VERSION, "auto mode negotiates 2026-07-28", version)
            else:
                c.check(version in HANDSHAKE_PROTOCOL_VERSIONS, "legacy mode uses the handshake", version)
            info = client.server_info
            c.check(info is not None and info.name == "winx-code-agent", "serverInfo names winx", str(info))

            listing = await client.list_tools(cache_mode="refresh")
            report["tools"] = [t.name for t in listing.tools]
            c.check("Initialize" in report["tools"], "Initialize is listed", report["tools"])
            schemas = {t.name: t.output_schema for t in listing.tools}

            result = await client.call_tool("Initialize", {"type": "first_call", "workspace_root": workspace})
            sc = result.structured_content
            c.check(not result.is_error, "Initialize succeeds", sc)
            c.check(isinstance(sc, dict), "structuredContent is an object", sc)
            if isinstance(sc, dict):
                schema = schemas.get("Initialize")
                if c.check(schema is not None, "Initialize has an outputSchema"):
                    errors = [e.message for e in Draft202012Validator(schema).iter_errors(sc)]
                    c.check(not errors, "structuredContent matches outputSchema", errors)
                data = sc.get("data") or {}
                report["thread_id"] = data.get("thread_id")
                c.check(str(data.get("thread_id", "")).startswith("ws_"), "workspace-affinity thread id", data)
                c.check(data.get("workspace_root") == workspace, "canonical workspace echoed", data)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--mode", choices=["auto", "legacy"], required=True)
    args = p.parse_args()
    c = Checks()
    report: dict[str, Any] = {"mode": args.mode}
    try:
        anyio.run(run, args, c, report)
    except BaseException as e:  # noqa: BLE001 - reported, never swallowed
        c.check(False, "client run raised", "; ".join(_leaves(e)))
        traceback.print_exc(file=sys.stderr)
    report.update(ok=not c.failures, checks=c.count, failures=c.failures)
    print(json.dumps(report))
    return 0 if not c.failures else 1


if __name__ == "__main__":
    sys.exit(main())
