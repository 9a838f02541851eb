#!/usr/bin/env python3
"""Interop check: an agent on the official MCP Python SDK client finds a function in an
unfamiliar repository with `CodeMap` and reads only its lines (issue 17's "done when").

The repository is a copy of the Python standard library's `json` package (code nobody
here wrote). The agent asks the repository map for `raw_decode`, outlines the file the
map ranks first, and reads exactly the definition's line range with `ReadFiles`; then
`references` lists the definition before its uses.

Driven by `tests/it/interop.rs` (same environment rules as sdk_client.py); the last stdout line
is one JSON object {"ok", "checks", "failures", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any

from mcp import Client, StdioServerParameters

from sdk_client import Checks, run_checks, server_env

REQUEST_TIMEOUT_S = 40.0


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await client.call_tool(tool, args)
    return r.structured_content


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    repo = os.path.join(os.path.realpath(args.workspace), "vendored-json")
    shutil.copytree(os.path.dirname(json.__file__), repo,
                    ignore=shutil.ignore_patterns("__pycache__"))
    params = StdioServerParameters(command=args.server, args=["serve"], env=server_env())
    async with Client(params, mode=args.mode, read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        sc = await call(client, "Initialize", {"type": "first_call", "workspace_root": repo})
        pair = {"thread_id": sc["data"]["thread_id"], "workspace_root": sc["data"]["workspace_root"]}
        sc = await call(client, "CodeMap", {**pair, "operation": "outline", "path": ".",
                                            "query": "raw_decode"})
        files = sc["data"].get("files", [])
        c.check(bool(files), "the repository map lists files", sc)
        first = files[0]["path"] if files else ""
        c.check(first.endswith("decoder.py"), "the file defining raw_decode ranks first", files[:3])
        sc = await call(client, "CodeMap", {**pair, "operation": "outline", "path": first})
        found = [s for s in sc["data"].get("symbols", []) if s["name"] == "raw_decode"]
        c.check(len(found) == 1, "the outline has raw_decode once", sc["data"].get("symbols"))
        if not found:
            return
        sym = found[0]
        c.check(sym.get("parent") == "JSONDecoder", "raw_decode is a JSONDecoder method", sym)
        span = f"{sym['line']}-{sym['end_line']}"
        path = os.path.join(repo, first)
        r = await client.call_tool("ReadFiles", {**pair, "file_paths": [f"{path}:{span}"]})
        text = "".join(getattr(part, "text", "") for part in r.content)
        c.check("def raw_decode(" in text, "the read range holds the definition", text[:400])
        c.check("def decode(" not in text, "and not the method before it", text[:400])
        report["read_lines"] = sym["end_line"] - sym["line"] + 1
        with open(os.path.join(repo, first), encoding="utf-8") as f:
            report["file_lines"] = len(f.read().splitlines())
        c.check(report["read_lines"] * 4 < report["file_lines"],
                "only a fraction of the file was read", report)
        sc = await call(client, "CodeMap", {**pair, "operation": "references", "name": "raw_decode"})
        occ = sc["data"].get("occurrences", [])
        c.check(bool(occ) and occ[0].get("definition") is not None,
                "references list the definition first", occ[:3])
        c.check(any(o.get("definition") is None for o in occ), "and its uses", occ)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--mode", default="auto")
    args = ap.parse_args()
    return run_checks(run, args, {})


if __name__ == "__main__":
    sys.exit(main())
