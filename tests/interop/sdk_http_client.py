#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK streamable-HTTP client (pinned `mcp`, see the
Makefile) against a running `winx-code-agent serve --http`.

Driven by `tests/it/interop_http.rs`, which starts the server; by hand:

    WINX_TEST_HTTP_TOKEN=... target/venv/bin/python tests/interop/sdk_http_client.py \
        --url http://127.0.0.1:8000/mcp --workspace /some/dir --mode auto

Besides `Initialize`, each mode runs one foreground `BashCommand` as an MCP task:
`auto` (2026-07-28) through the `io.modelcontextprotocol/tasks` extension, polling
`tasks/get`; `legacy` (2025-11-25) with a task-augmented `tools/call` and `tasks/result`.
The tasks client half lives in `sdk_tasks.py` next to this file.

The bearer token comes from $WINX_TEST_HTTP_TOKEN (never argv). The last stdout line is
one JSON object: {"ok", "protocol_version", "tools", "thread_id", "task_id", "checks",
"failures"}; the exit status is 0 only if every check passed.
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
import mcp_types as mt
from jsonschema import Draft202012Validator
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION
from pydantic import ValidationError
from sdk_tasks import (
    EXTENSION,
    RELATED_TASK_META_KEY,
    TERMINAL_STATUSES,
    RequestHeaderLog,
    SessionIdRecorder,
    TaskDetail,
    TasksExtension,
    get_task_request,
    raw_post,
)

REQUEST_TIMEOUT_S = 20.0
# The command every task check runs: output before and after a pause, so a result that
# holds both markers proves the task waited for the command to finish.
TASK_COMMAND = "echo task-start; sleep 1; echo task-done"
TASK_MARKERS = ("task-start", "task-done")
# The lifetime a 2025-11-25 task-augmented tools/call asks for.
LEGACY_TASK_TTL_MS = 60_000


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


def _schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    return [e.message for e in Draft202012Validator(schema).iter_errors(instance)]


def check_bash_task_result(
    c: Checks, label: str, result: mt.CallToolResult, schema: dict[str, Any] | None
) -> None:
    """The CallToolResult of TASK_COMMAND, however it was delivered: complete and valid."""
    text = "".join(b.text for b in result.content if isinstance(b, mt.TextContent))
    sc = result.structured_content
    c.check(not result.is_error, f"{label}: not isError", sc)
    c.check(all(m in text for m in TASK_MARKERS), f"{label}: text holds the whole output", text)
    if not c.check(isinstance(sc, dict), f"{label}: structuredContent is an object", sc):
        return
    c.check(sc.get("status") == "completed", f"{label}: status is completed", sc)
    c.check((sc.get("data") or {}).get("exit_code") == 0, f"{label}: exit code 0", sc.get("data"))
    if c.check(schema is not None, f"{label}: BashCommand has an outputSchema"):
        errors = _schema_errors(schema, sc)
        c.check(not errors, f"{label}: structuredContent matches BashCommand's outputSchema", errors)


async def modern_tasks(
    args: argparse.Namespace,
    c: Checks,
    report: dict[str, Any],
    http: httpx2.AsyncClient,
    plain: Client,
    bash_args: dict[str, Any],
    schema: dict[str, Any] | None,
    headers: RequestHeaderLog,
) -> None:
    """2026-07-28: a client declaring the tasks extension gets BashCommand as a task."""
    caps = plain.server_capabilities
    c.check(EXTENSION in (caps.extensions or {}), "server/discover advertises the tasks extension", caps)

    # The same call from a client that declares the extension. The session stamps the
    # declaration into every request's `_meta`; the claim resolves the task by polling.
    tasks = TasksExtension()
    transport = streamable_http_client(args.url, http_client=http)
    async with Client(transport, mode="auto", extensions=[tasks], read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        await client.list_tools(cache_mode="refresh")  # output schemas and Mcp-Param headers
        result = await client.call_tool("BashCommand", bash_args)
    if not c.check(len(tasks.resolved) == 1, "until_complete BashCommand is answered with a task", tasks.resolved):
        return
    record = tasks.resolved[0]
    task_id, handle = record["task_id"], record["handle"]
    report["task_id"] = task_id
    c.check(task_id.startswith("task_"), "task handle has a taskId", handle)
    c.check(handle.get("status") == "working", "task handle says working", handle)
    c.check(isinstance(handle.get("pollIntervalMs"), int), "task handle has pollIntervalMs", handle)
    c.check(isinstance(handle.get("ttlMs"), int), "task handle has ttlMs", handle)
    c.check(all(k in handle for k in ("createdAt", "lastUpdatedAt")), "task handle has timestamps", handle)
    c.check(record["polls"][-1:] == ["completed"], "tasks/get polling ends completed", record["polls"])
    gets = headers.for_method("tasks/get")
    c.check(bool(gets) and all(g["mcp-name"] == task_id for g in gets),
            "every tasks/get carries Mcp-Method and Mcp-Name: <taskId>", gets)
    check_bash_task_result(c, "task result", result, schema)

    # Without the extension, the task is not readable (-32021)...
    try:
        await plain.session.send_request(get_task_request(task_id), TaskDetail)
        c.check(False, "tasks/get without the extension is refused", "it answered")
    except MCPError as e:
        c.check(e.code == MISSING_REQUIRED_CLIENT_CAPABILITY, "tasks/get without the extension -> -32021",
                f"{e.code}: {e}")
    # ...and the same call is answered inline: the plain session has no claim for
    # `resultType: "task"`, so a task handle would fail its CallToolResult validation.
    try:
        inline = await plain.session.call_tool("BashCommand", bash_args)
    except ValidationError as e:
        c.check(False, "without the tasks extension BashCommand answers inline", e)
    else:
        check_bash_task_result(c, "inline result (no tasks extension)", inline, schema)


async def legacy_tasks(
    args: argparse.Namespace,
    c: Checks,
    report: dict[str, Any],
    http: httpx2.AsyncClient,
    client: Client,
    bash_args: dict[str, Any],
    tool: mt.Tool | None,
    sessions: SessionIdRecorder,
) -> None:
    """2025-11-25: a task-augmented tools/call, then tasks/result, tasks/get, tasks/list."""
    caps = client.server_capabilities.tasks
    c.check(caps is not None and caps.requests is not None and caps.requests.tools is not None
            and caps.requests.tools.call is not None,
            "initialize advertises capabilities.tasks.requests.tools.call", caps)
    execution = tool.execution if tool is not None else None
    c.check(execution is not None and execution.task_support == "optional",
            "BashCommand declares execution.taskSupport optional", execution)

    # The SDK sends `params.task` but parses the answer as a CallToolResult, which a
    # CreateTaskResult is not; so this one request is posted raw, on the SDK's session.
    if not c.check(sessions.session_id is not None, "the SDK holds an Mcp-Session-Id"):
        return
    response = await raw_post(
        http, args.url, session_id=sessions.session_id, protocol_version=client.protocol_version,
        method="tools/call",
        params={"name": "BashCommand", "arguments": bash_args, "task": {"ttl": LEGACY_TASK_TTL_MS}},
    )
    created = response.get("result")
    if not c.check(isinstance(created, dict), "task-augmented tools/call returns a result", response):
        return
    try:
        task = mt.CreateTaskResult.model_validate(created, by_name=False).task
    except ValidationError as e:
        c.check(False, "tools/call with params.task returns a CreateTaskResult", f"{e}; {created}")
        return
    report["task_id"] = task.task_id
    c.check(task.task_id.startswith("task_"), "CreateTaskResult has a taskId", created)
    c.check(task.status == "working" or task.status in TERMINAL_STATUSES,
            "CreateTaskResult status is working or terminal", created)
    c.check(isinstance(task.ttl, int) and task.ttl > 0, "CreateTaskResult has a ttl", created)
    c.check(isinstance(created["task"].get("pollInterval"), int) or task.status in TERMINAL_STATUSES,
            "a working task has a pollInterval", created)

    # tasks/result blocks until the task ends and answers exactly the CallToolResult.
    payload = await client.session.send_request(
        mt.GetTaskPayloadRequest(params=mt.GetTaskPayloadRequestParams(task_id=task.task_id)), mt.CallToolResult
    )
    related = (payload.meta or {}).get(RELATED_TASK_META_KEY)
    c.check(related == {"taskId": task.task_id}, "tasks/result carries the related-task _meta", payload.meta)
    check_bash_task_result(c, "tasks/result", payload, tool.output_schema if tool is not None else None)

    # Afterwards the task reads as completed, and it is listed.
    got = await client.session.send_request(
        mt.GetTaskRequest(params=mt.GetTaskRequestParams(task_id=task.task_id)), mt.GetTaskResult
    )
    c.check(got.task_id == task.task_id and got.status == "completed", "tasks/get after tasks/result: completed",
            got.model_dump(mode="json", by_alias=True))
    listed = await client.session.send_request(mt.ListTasksRequest(), mt.ListTasksResult)
    c.check(task.task_id in [t.task_id for t in listed.tasks], "tasks/list lists the task",
            [t.task_id for t in listed.tasks])


async def run(args: argparse.Namespace, c: Checks, report: dict[str, Any]) -> None:
    token = os.environ["WINX_TEST_HTTP_TOKEN"]
    workspace = os.path.realpath(args.workspace)
    # The hooks watch the SDK's traffic: which session it holds, which headers it sends.
    sessions, headers = SessionIdRecorder(), RequestHeaderLog()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(REQUEST_TIMEOUT_S),
        event_hooks={"request": [headers], "response": [sessions]},
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
            tools = {t.name: t for t in listing.tools}
            schemas = {t.name: t.output_schema for t in listing.tools}

            result = await client.call_tool("Initialize", {"type": "first_call", "workspace_root": workspace})
            sc = result.structured_content
            c.check(not result.is_error, "Initialize succeeds", sc)
            if not c.check(isinstance(sc, dict), "structuredContent is an object", sc):
                return
            schema = schemas.get("Initialize")
            if c.check(schema is not None, "Initialize has an outputSchema"):
                errors = _schema_errors(schema, sc)
                c.check(not errors, "structuredContent matches outputSchema", errors)
            data = sc.get("data") or {}
            report["thread_id"] = data.get("thread_id")
            c.check(str(data.get("thread_id", "")).startswith("ws_"), "workspace-affinity thread id", data)
            c.check(data.get("workspace_root") == workspace, "canonical workspace echoed", data)
            if not (isinstance(data.get("thread_id"), str) and isinstance(data.get("workspace_root"), str)):
                return

            # --- Prompts and resources over HTTP (in auto mode with the SDK's own Mcp-Name) --
            handoff = await client.get_prompt("handoff", {"thread_id": data["thread_id"]})
            text = getattr(handoff.messages[0].content, "text", "") if handoff.messages else ""
            c.check(data["thread_id"] in text, "the handoff prompt names the session", text[:300])
            readme = await client.read_resource("winx://docs/README.md")
            text = getattr(readme.contents[0], "text", "") if readme.contents else ""
            c.check("winx" in text, "resources/read returns the README", text[:200])

            # --- MCP Tasks: one foreground BashCommand that waits until it completes ----
            bash_args = {
                "thread_id": data["thread_id"],
                "workspace_root": data["workspace_root"],
                "action_json": {"command": TASK_COMMAND},
                "wait_policy": "until_complete",
            }
            if args.mode == "auto":
                await modern_tasks(args, c, report, http, client, bash_args, schemas.get("BashCommand"), headers)
            else:
                await legacy_tasks(args, c, report, http, client, bash_args, tools.get("BashCommand"), sessions)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--mode", choices=["auto", "legacy"], required=True)
    args = p.parse_args()
    c = Checks()
    report: dict[str, Any] = {"mode": args.mode, "task_id": None}
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
