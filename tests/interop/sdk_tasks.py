"""A minimal MCP Tasks client for the interop test `sdk_http_client.py`.

The pinned `mcp` SDK ships no tasks client, so this module supplies the two halves the
test needs, built only on the SDK's public extension points plus plain `httpx2`:

* 2026-07-28 (`io.modelcontextprotocol/tasks` extension): `TasksExtension`, a
  `ClientExtension` whose claim accepts a `tools/call` answered with `resultType: "task"`
  and resolves it by polling `tasks/get` until the task ends, returning the inlined
  `result` as the `CallToolResult` the call would have produced.
* 2025-11-25 (handshake era): `raw_post`, one JSON-RPC request on the SDK's own HTTP
  session. The SDK sends a task-augmented `tools/call` (`params.task`) but validates the
  answer as a `CallToolResult`, so the `CreateTaskResult` (`{"task": {...}}`) never gets
  past it; `SessionIdRecorder` captures the `Mcp-Session-Id` the SDK negotiated so the
  raw request joins that session. `tasks/result`, `tasks/get` and `tasks/list` go through
  the SDK (`ClientSession.send_request` with its 2025-11-25 task types).

No test assertions live here; the caller records them in its `Checks`.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as mt
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict, Field

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
# Bounds on resolving one task: the overall wait and the per-poll sleep the server may ask for.
RESOLVE_TIMEOUT_S = 30.0
DEFAULT_POLL_MS = 1000
MIN_POLL_MS, MAX_POLL_MS = 50, 5000


# --- 2026-07-28: the tasks extension ---------------------------------------------------


class TaskHandle(mt.Result):
    """A `tools/call` answered with a task (2026-07-28, `resultType: "task"`)."""

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskDetail(mt.Result):
    """A 2026-07-28 `tasks/get` answer: the task, plus its outcome once it has ended."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class ModernGetTaskRequest(mt.GetTaskRequest):
    """`tasks/get` whose `taskId` the SDK mirrors into the `Mcp-Name` HTTP header.

    The SDK's own `GetTaskRequest` (a 2025-11-25 type) declares no `name_param`, and the
    2026-07-28 streamable-HTTP transport requires `Mcp-Name` on `tasks/get`.
    """

    name_param = "taskId"


def get_task_request(task_id: str) -> ModernGetTaskRequest:
    return ModernGetTaskRequest(params=mt.GetTaskRequestParams(task_id=task_id))


class TaskNotResolved(RuntimeError):
    """A claimed task that did not end with a usable result."""


class TasksExtension(ClientExtension):
    """Resolve `resultType: "task"` answers to `tools/call` by polling `tasks/get`.

    Declaring this extension makes the SDK advertise `io.modelcontextprotocol/tasks` in
    every request's `_meta` client capabilities, which both allows the server to answer a
    `tools/call` with a task and is required for `tasks/get`. Every resolution is recorded
    in `resolved` so a test can tell a task from an inline answer.
    """

    identifier = EXTENSION

    def __init__(self, timeout_s: float = RESOLVE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        # One entry per resolved task: the handle, and each tasks/get status seen.
        self.resolved: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> mt.CallToolResult:
        record: dict[str, Any] = {
            "task_id": handle.task_id,
            "tool": ctx.tool_name,
            "handle": handle.model_dump(mode="json", by_alias=True, exclude_none=True),
            "polls": [],
        }
        self.resolved.append(record)
        deadline = time.monotonic() + self.timeout_s
        status, poll_ms = handle.status, handle.poll_interval_ms
        while True:
            # Honour the server's pollIntervalMs (clamped, so a bogus value cannot stall
            # the test) but never sleep past the overall deadline.
            wait_s = min(max(poll_ms or DEFAULT_POLL_MS, MIN_POLL_MS), MAX_POLL_MS) / 1000.0
            if time.monotonic() + wait_s > deadline:
                raise TaskNotResolved(f"task {handle.task_id} still {status} after {self.timeout_s:.0f} s")
            await anyio.sleep(wait_s)
            detail = await ctx.session.send_request(
                get_task_request(handle.task_id), TaskDetail, request_read_timeout_seconds=ctx.read_timeout_seconds
            )
            status = detail.status
            record["polls"].append(status)
            if detail.task_id != handle.task_id:
                raise TaskNotResolved(f"tasks/get for {handle.task_id} answered for {detail.task_id}")
            if status not in TERMINAL_STATUSES:
                poll_ms = detail.poll_interval_ms
                continue
            if detail.result is not None:
                return mt.CallToolResult.model_validate(detail.result, by_name=False)
            raise TaskNotResolved(
                f"task {handle.task_id} ended {status} without a result"
                + (f": {json.dumps(detail.error)}" if detail.error is not None else "")
            )


# --- 2025-11-25: raw requests on the SDK's session ------------------------------------


class SessionIdRecorder:
    """An `httpx2` response hook remembering the last `Mcp-Session-Id` the server issued."""

    def __init__(self) -> None:
        self.session_id: str | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            self.session_id = sid


class RequestHeaderLog:
    """An `httpx2` request hook keeping the routing headers of every MCP POST."""

    def __init__(self) -> None:
        self.entries: list[dict[str, str | None]] = []

    async def __call__(self, request: httpx2.Request) -> None:
        if request.method == "POST":
            self.entries.append({k: request.headers.get(k) for k in ("mcp-method", "mcp-name", "mcp-session-id")})

    def for_method(self, method: str) -> list[dict[str, str | None]]:
        return [e for e in self.entries if e["mcp-method"] == method]


_raw_ids = itertools.count(1)


async def raw_post(
    http: httpx2.AsyncClient, url: str, *, session_id: str, protocol_version: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One 2025-11-25 JSON-RPC request outside the SDK; returns the response object.

    The server may answer with JSON or a one-response SSE stream; both are accepted.
    """
    req_id = f"raw-{next(_raw_ids)}"
    response = await http.post(
        url,
        json={"jsonrpc": "2.0", "id": req_id, "method": method, "params": params},
        headers={
            "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": session_id,
            "MCP-Protocol-Version": protocol_version,
        },
    )
    response.raise_for_status()
    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type == "application/json":
        return response.json()
    if content_type == "text/event-stream":
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[len("data:") :])
                if message.get("id") == req_id:
                    return message
        raise ValueError(f"{method}: SSE stream carried no response for {req_id}")
    raise ValueError(f"{method}: unexpected content type {content_type!r}")
