//! The usage events of one `tools/call`: `tool_started` when it begins, the phases its
//! tool times (through the `CallTrace` handed down in `ToolContext`), and the terminal
//! `tool_call`, all sharing one random `usage_call_id`.
//!
//! Invariant: arguments and results are read here only through
//! `tools::usage_facts::facts` (closed values and counts) and the envelope's closed
//! fields; the tool name is written only when it is one of ours.

use super::context::CallContext;
use super::tasks::Routed;
use crate::deadline::Stopwatch;
use crate::tools::envelope::ToolOutput;
use crate::tools::name::ToolName;
use crate::tools::usage_facts;
use crate::usage::event::{ToolCall, ToolStarted};
use crate::usage::{CallTrace, Event, Sink};
use serde_json::{Map, Value};

/// One call's usage record in progress. With the log off it records nothing.
pub(super) struct CallLog<'a> {
    sink: &'a Sink,
    ctx: &'a CallContext<'a>,
    call_id: String,
    tool: Option<ToolName>,
    clock: Stopwatch,
    pub trace: CallTrace,
}

/// Bytes a value serialises to, without keeping them.
fn serialized_len(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

fn ms(sw: &Stopwatch) -> f64 {
    (sw.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

impl<'a> CallLog<'a> {
    /// Start the record of a call of `name` (as the client spelled it).
    pub fn begin(sink: &'a Sink, ctx: &'a CallContext<'a>, name: Option<&str>) -> CallLog<'a> {
        let tool = name.and_then(ToolName::parse);
        let call_id = sink.new_id('c').unwrap_or_default();
        let trace = match sink.is_on() {
            true => CallTrace::new(sink, call_id.clone()),
            false => CallTrace::off(),
        };
        let log = CallLog {
            sink,
            ctx,
            call_id,
            tool,
            clock: Stopwatch::start(),
            trace,
        };
        if sink.is_on() {
            sink.emit(Event::ToolStarted(ToolStarted {
                usage_call_id: log.call_id.clone(),
                request_id: ctx.origin.request_id.clone(),
                tool: log.tool_name(),
                principal: ctx.principal.to_string(),
            }));
        }
        log
    }

    fn tool_name(&self) -> &'static str {
        self.tool.map_or("unknown", ToolName::as_str)
    }

    /// The salted hash of the session's thread: the argument the client passed, else the
    /// one the server chose (an Initialize answer).
    fn thread(&self, args: &Map<String, Value>, out: Option<&ToolOutput>) -> Option<String> {
        let raw = args
            .get("thread_id")
            .and_then(Value::as_str)
            .or_else(|| out?.envelope.data.get("thread_id")?.as_str())
            .filter(|t| !t.is_empty())?;
        self.sink
            .hash("thread", &format!("{}\0{raw}", self.ctx.principal))
    }

    fn base(&self, outcome: &'static str) -> ToolCall {
        ToolCall {
            usage_call_id: self.call_id.clone(),
            origin: self.ctx.origin.clone(),
            tool: self.tool_name(),
            build: crate::build_info::identity(),
            principal: self.ctx.principal.to_string(),
            outcome,
            duration_ms: ms(&self.clock),
            ..Default::default()
        }
    }

    fn write(self, mut call: ToolCall) {
        let (phases, suppressed) = self.trace.totals();
        call.phases = phases;
        call.phases_suppressed = suppressed;
        self.sink.emit(Event::ToolCall(Box::new(call)));
    }

    /// The envelope's closed fields and the size of `result`, what went on the wire.
    fn outcome(&self, call: &mut ToolCall, out: &ToolOutput, result: &Value) {
        let e = &out.envelope;
        call.status = Some(e.status.as_str());
        call.code = e.error_code.map(|c| c.as_str());
        call.retryable = Some(e.retryable);
        call.retry_same_call = Some(e.retry_same_call);
        call.next_action_tool = e
            .next_action
            .as_ref()
            .and_then(|n| ToolName::parse(&n.tool))
            .map(ToolName::as_str);
        call.response_bytes = Some(serialized_len(result));
    }

    /// The call produced a tool result (`result` is what goes on the wire).
    pub fn result(
        self,
        args: &Map<String, Value>,
        out: &ToolOutput,
        result: &Value,
        read_parallelism: usize,
    ) {
        if !self.sink.is_on() {
            return;
        }
        let mut call = self.base("result");
        call.thread = self.thread(args, Some(out));
        self.outcome(&mut call, out, result);
        if let Some(tool) = self.tool {
            let f = usage_facts::facts(tool, args, out, read_parallelism);
            call.action = f.action;
            call.command_category = f.command_category;
            call.batch_items = f.batch_items;
            call.worker_limit = f.worker_limit;
            call.facts = f.facts;
        }
        self.write(call);
    }

    /// The request was refused before a tool ran (a JSON-RPC error).
    pub fn rpc_error(self, args: &Map<String, Value>) {
        if self.sink.is_on() {
            let mut call = self.base("rpc_error");
            call.thread = self.thread(args, None);
            self.write(call);
        }
    }

    /// The call was offered or asked to be an MCP Task: its answer is a task handle (the
    /// result is collected later, so the facts come from the arguments and the route) or,
    /// when the server answered inline, the tool result (the same facts as a synchronous
    /// call, with the route's wait mode).
    pub fn task(self, args: &Map<String, Value>, routed: &Routed, read_parallelism: usize) {
        if !self.sink.is_on() {
            return;
        }
        let out = routed.out.as_deref();
        let mut call = self.base(if out.is_some() { "result" } else { "task" });
        call.thread = self.thread(args, out);
        if let Some(out) = out {
            self.outcome(&mut call, out, &routed.answer);
        }
        if let Some(tool) = self.tool {
            let f = usage_facts::routed_facts(tool, args, out, routed.route, read_parallelism);
            call.action = f.action;
            call.command_category = f.command_category;
            call.batch_items = f.batch_items;
            call.worker_limit = f.worker_limit;
            call.facts = f.facts;
        }
        self.write(call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_bytes_count_the_serialised_result() {
        assert_eq!(serialized_len(&serde_json::json!({"a": 1})), 7);
    }
}
