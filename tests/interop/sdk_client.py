#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK client (pinned `mcp`, see the Makefile)
against the real `winx-code-agent` binary over stdio.

Driven by `tests/it/interop.rs`; run by hand with the venv from `make venv`:

    target/venv/bin/python tests/interop/sdk_client.py \
        --server target/debug/winx-code-agent --workspace /some/dir --mode auto

The server gets only HOME, WINX_STATE_DIR and PATH, taken from this script's own
environment (the Rust test sets them to a per-test temp dir).

Every structuredContent received (success and isError alike) is validated against the
tool's advertised outputSchema with Draft 2020-12, independently of the SDK's own check
(which skips isError results). The last stdout line is one JSON object:
{"ok", "protocol_version", "connect_ms", "tools", "tools_list_bytes", "checks", "failures"};
the exit status is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from typing import Any

import anyio
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION

# Per-request ceiling inside the SDK; the Rust test enforces the overall hard timeout.
REQUEST_TIMEOUT_S = 20.0


class Checks:
    def __init__(self) -> None:
        self.count = 0
        self.failures: list[str] = []

    def check(self, cond: bool, what: str, detail: Any = None) -> bool:
        self.count += 1
        if not cond:
            msg = what if detail is None else f"{what}: {_short(detail)}"
            self.failures.append(msg)
        return cond


def _short(v: Any, limit: int = 600) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)
    return s if len(s) <= limit else s[:limit] + "...[truncated]"


def _schema_errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(instance)
    ]


def _leaves(e: BaseException) -> list[str]:
    """Flatten the ExceptionGroups the SDK's task groups wrap errors in."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in _leaves(sub)]
    return [f"{type(e).__name__}: {e}"]


def server_env() -> dict[str, str]:
    env = {}
    for key in ("HOME", "WINX_STATE_DIR", "PATH", "XDG_RUNTIME_DIR"):
        value = os.environ.get(key)
        if value is None:
            raise SystemExit(f"sdk_client.py: ${key} must be set (the server gets only HOME, WINX_STATE_DIR, PATH, XDG_RUNTIME_DIR)")
        env[key] = value
    return env


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    workspace = os.path.realpath(args.workspace)
    params = StdioServerParameters(command=args.server, args=["serve"], env=server_env())

    t0 = time.perf_counter()
    async with Client(params, mode=args.mode, read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        report["connect_ms"] = round((time.perf_counter() - t0) * 1000.0, 2)
        version = client.protocol_version
        report["protocol_version"] = version
        if args.mode == "auto":
            c.check(version == LATEST_MODERN_VERSION, "auto mode negotiates the modern version via server/discover", version)
        else:
            c.check(version in HANDSHAKE_PROTOCOL_VERSIONS, "legacy mode negotiates a handshake version via initialize", version)
        info = client.server_info
        c.check(info is not None and info.name == "winx-code-agent", "serverInfo names winx-code-agent", str(info))

        # --- tools/list -----------------------------------------------------------------
        listing = await client.list_tools(cache_mode="refresh")
        tools_json = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing.tools]
        report["tools"] = [t.name for t in listing.tools]
        report["tools_list_bytes"] = len(json.dumps({"tools": tools_json}, separators=(",", ":")).encode())
        c.check(bool(listing.tools), "tools/list is not empty")
        c.check(listing.next_cursor is None, "tools/list fits in one page", listing.next_cursor)
        input_validators: dict[str, Draft202012Validator] = {}
        output_validators: dict[str, Draft202012Validator] = {}
        for tool in listing.tools:
            schema_in = tool.input_schema
            c.check(schema_in.get("type") == "object", f"{tool.name}: inputSchema type is object", schema_in.get("type"))
            try:
                Draft202012Validator.check_schema(schema_in)
                input_validators[tool.name] = Draft202012Validator(schema_in)
                c.check(True, f"{tool.name}: inputSchema is valid 2020-12")
            except Exception as e:  # noqa: BLE001 - reported as a failure
                c.check(False, f"{tool.name}: inputSchema is valid 2020-12", str(e))
            schema_out = tool.output_schema
            if not c.check(schema_out is not None, f"{tool.name}: has an outputSchema"):
                continue
            try:
                Draft202012Validator.check_schema(schema_out)
                output_validators[tool.name] = Draft202012Validator(schema_out)
                c.check(True, f"{tool.name}: outputSchema is valid 2020-12")
            except Exception as e:  # noqa: BLE001
                c.check(False, f"{tool.name}: outputSchema is valid 2020-12", str(e))
        if not c.check("Initialize" in input_validators and "Initialize" in output_validators,
                       "Initialize is listed with usable schemas", report["tools"]):
            return

        def check_input(arguments: dict[str, Any], label: str, expect_valid: bool = True) -> None:
            errors = _schema_errors(input_validators["Initialize"], arguments)
            if expect_valid:
                c.check(not errors, f"{label}: arguments valid against Initialize inputSchema", errors)
            else:
                c.check(bool(errors), f"{label}: arguments rejected by Initialize inputSchema", arguments)

        async def call(name: str, arguments: dict[str, Any], label: str) -> tuple[bool, dict[str, Any]]:
            """tools/call; validates structuredContent against `name`'s outputSchema (or
            Initialize's for names the server does not list, since every tool shares it)."""
            result = await client.call_tool(name, arguments)
            sc = result.structured_content
            c.check(isinstance(sc, dict), f"{label}: structuredContent is an object", sc)
            if not isinstance(sc, dict):
                return result.is_error, {}
            validator = output_validators.get(name, output_validators["Initialize"])
            c.check(not _schema_errors(validator, sc),
                    f"{label}: structuredContent valid against outputSchema",
                    _schema_errors(validator, sc))
            c.check(any(getattr(b, "type", None) == "text" for b in result.content), f"{label}: has a text content block")
            c.check(sc.get("tool") == name or name not in output_validators, f"{label}: envelope names the tool", sc.get("tool"))
            return result.is_error, sc

        # --- Initialize first_call ------------------------------------------------------
        first_args = {"type": "first_call", "workspace_root": workspace}
        check_input(first_args, "first_call")
        is_error, sc = await call("Initialize", first_args, "first_call")
        c.check(not is_error and sc.get("status") == "completed", "first_call completes", sc)
        data = sc.get("data") or {}
        thread_id, ws_root = data.get("thread_id"), data.get("workspace_root")
        c.check(isinstance(thread_id, str) and bool(thread_id), "first_call returns a thread_id", data)
        c.check(ws_root == workspace, "first_call returns the canonical workspace_root", {"got": ws_root, "want": workspace})
        if not (isinstance(thread_id, str) and isinstance(ws_root, str)):
            return

        # --- Initialize status with the returned pair ----------------------------------
        status_args = {"type": "status", "thread_id": thread_id, "workspace_root": ws_root}
        check_input(status_args, "status")
        is_error, sc = await call("Initialize", status_args, "status")
        c.check(not is_error and sc.get("status") == "completed", "status with the returned pair completes", sc)
        c.check((sc.get("data") or {}).get("thread_id") == thread_id, "status echoes the thread_id", sc.get("data"))

        # --- prompts and resources -------------------------------------------------------
        prompts = await client.list_prompts()
        c.check([p.name for p in prompts.prompts] == ["handoff"], "prompts/list names the handoff prompt",
                [p.name for p in prompts.prompts])
        handoff = await client.get_prompt("handoff", {"thread_id": thread_id})
        text = getattr(handoff.messages[0].content, "text", "") if handoff.messages else ""
        c.check(thread_id in text and ws_root in text, "the handoff names the session and its workspace", text[:300])
        how_to = await client.get_prompt("handoff")
        text = getattr(how_to.messages[0].content, "text", "") if how_to.messages else ""
        c.check("Initialize" in text, "the handoff without a session says how to get one", text[:300])
        resources = await client.list_resources()
        uris = [str(r.uri) for r in resources.resources]
        c.check(uris == ["winx://docs/README.md"], "resources/list names the README", uris)
        readme = await client.read_resource("winx://docs/README.md")
        text = getattr(readme.contents[0], "text", "") if readme.contents else ""
        c.check("winx" in text, "resources/read returns the README", text[:200])
        try:
            await client.read_resource("winx://docs/nope.md")
            c.check(False, "an unknown resource is refused")
        except Exception as e:  # noqa: BLE001 - the SDK's error type varies by version
            code = getattr(getattr(e, "error", None), "code", None)
            c.check(code == -32602, "an unknown resource is refused with -32602", f"{type(e).__name__}: {e}")

        # --- error cases ----------------------------------------------------------------
        missing_args = {"type": "status", "workspace_root": ws_root}
        check_input(missing_args, "status without thread_id")
        is_error, sc = await call("Initialize", missing_args, "status without thread_id")
        c.check(is_error, "status without thread_id sets isError", sc)
        c.check(sc.get("status") == "needs_initialize", "status without thread_id -> needs_initialize", sc)

        with tempfile.TemporaryDirectory(prefix="winx-other-ws-") as other:
            other = os.path.realpath(other)
            wrong_args = {"type": "status", "thread_id": thread_id, "workspace_root": other}
            check_input(wrong_args, "status with another workspace")
            is_error, sc = await call("Initialize", wrong_args, "status with another workspace")
            c.check(is_error, "status with another workspace sets isError", sc)
            c.check(sc.get("status") == "conflict", "status with another workspace -> conflict", sc)

        unknown_field_args = {"type": "first_call", "workspace_root": ws_root, "no_such_field": 1}
        check_input(unknown_field_args, "unknown field", expect_valid=False)
        is_error, sc = await call("Initialize", unknown_field_args, "unknown field")
        c.check(is_error, "unknown field sets isError", sc)
        c.check(sc.get("errorCode") == "invalid_tool_input", "unknown field -> invalid_tool_input", sc)

        is_error, sc = await call("NoSuchTool", {}, "unknown tool")
        c.check(is_error, "unknown tool sets isError", sc)
        c.check(sc.get("errorCode") == "unknown_tool", "unknown tool -> unknown_tool", sc)

        # --- ReadFiles and an edit: the read is the permit ------------------------------
        with open(os.path.join(ws_root, "interop.txt"), "w") as f:
            f.write("alpha\nbeta\n")
        is_error, sc = await call("FileWriteOrEdit", {"thread_id": thread_id, "workspace_root": ws_root,
            "file_path": "interop.txt",
            "text_or_search_replace_blocks": "<<<<<<< SEARCH\nbeta\n=======\nBETA\n>>>>>>> REPLACE\n"}, "edit before read")
        c.check(sc.get("status") == "needs_read", "an edit before reading needs a read", sc)
        reads = (sc.get("nextAction") or {}).get("arguments") or {}
        is_error, sc = await call("ReadFiles", reads, "read as told")
        files = (sc.get("data") or {}).get("files") or [{}]
        c.check(not is_error and str(files[0].get("revision", "")).startswith("sha256:"), "ReadFiles returns a revision", sc)
        is_error, sc = await call("FileWriteOrEdit", {"thread_id": thread_id, "workspace_root": ws_root,
            "file_path": "interop.txt",
            "text_or_search_replace_blocks": "<<<<<<< SEARCH\nbeta\n=======\nBETA\n>>>>>>> REPLACE\n"}, "edit after read")
        c.check(sc.get("status") == "completed", "the edit applies after the read", sc)
        with open(os.path.join(ws_root, "interop.txt")) as f:
            c.check(f.read() == "alpha\nBETA\n", "the file holds the edit")

        # --- BashCommand: real work through the session's shell -------------------------
        pair = {"thread_id": thread_id, "workspace_root": ws_root}
        is_error, sc = await call("BashCommand", {**pair, "action_json": {"command": "echo hello && false"}}, "bash false")
        data = sc.get("data") or {}
        c.check(not is_error and sc.get("status") == "completed", "a failing command is a completed result", sc)
        c.check(data.get("exit_code") == 1, "exit code 1 is reported", data)
        is_error, sc = await call(
            "BashCommand", {**pair, "action_json": {"command": "sleep 30"}, "wait_for_seconds": 0.2}, "bash running")
        c.check(sc.get("status") == "running", "a long command reports running", sc)
        c.check((sc.get("nextAction") or {}).get("tool") == "BashCommand", "running -> status_check next action", sc)
        is_error, sc = await call("BashCommand", {**pair, "action_json": {"send_specials": ["Ctrl-c"]}}, "bash interrupt")
        c.check((sc.get("data") or {}).get("exit_code") == 130, "Ctrl-c interrupts the command", sc)
        is_error, sc = await call(
            "BashCommand", {**pair, "action_json": {"command": "echo bg-ok", "is_background": True}}, "bash background")
        bg = ((sc.get("data") or {}).get("state") or {}).get("bg_command_id")
        c.check(isinstance(bg, str), "background command returns a bg_command_id", sc)
        is_error, sc = await call("BashCommand", {**pair, "action_json": {"status_check": True, "bg_command_id": bg},
                                                  "wait_for_seconds": 10}, "bash bg status")
        c.check((sc.get("data") or {}).get("exit_code") == 0, "background command completes", sc)
        is_error, sc = await call("BashCommand", {**pair, "action_json": "rm -rf /tmp/nothing"}, "bash text action")
        c.check(sc.get("errorCode") == "invalid_tool_input", "action_json text is refused, never run", sc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, help="path to winx-code-agent")
    ap.add_argument("--workspace", required=True, help="existing directory used as workspace_root")
    ap.add_argument("--mode", choices=("auto", "legacy"), required=True)
    args = ap.parse_args()

    report: dict[str, Any] = {"mode": args.mode, "protocol_version": None, "connect_ms": None, "tools": []}
    return run_checks(run, args, report)


def run_checks(run: Any, args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Run `run(args, checks, report)` under anyio, then print the report as the last
    stdout line; the exit status is 0 only if every check passed."""
    c = Checks()
    try:
        anyio.run(run, args, c, report)
    except BaseException as e:  # noqa: BLE001 - ExceptionGroup from the SDK's task groups too
        if isinstance(e, KeyboardInterrupt):
            raise
        traceback.print_exc(file=sys.stderr)
        c.check(False, "client session raised", "; ".join(_leaves(e)))
    report["checks"] = c.count
    report["failures"] = c.failures
    report["ok"] = not c.failures and c.count > 0
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
