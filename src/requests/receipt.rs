//! The admission receipt (seed 001): a class, whether the prompt was written, and for a
//! return-final request what its final is correlated from.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Accepted,
    Busy,
    Unsupported,
    Unavailable,
    StaleIncarnation,
    Invalid,
    ObserverFailure,
    InternalFailure,
    Indeterminate,
    /// The write to the agent's terminal failed before its first byte: nothing reached
    /// the agent (`prompt_written: false`), the request is terminal `delivery_failed`.
    DeliveryFailed,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::Accepted,
        Class::Busy,
        Class::Unsupported,
        Class::Unavailable,
        Class::StaleIncarnation,
        Class::Invalid,
        Class::ObserverFailure,
        Class::InternalFailure,
        Class::Indeterminate,
        Class::DeliveryFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Accepted => "accepted",
            Class::Busy => "busy",
            Class::Unsupported => "unsupported",
            Class::Unavailable => "unavailable",
            Class::StaleIncarnation => "stale_incarnation",
            Class::Invalid => "invalid",
            Class::ObserverFailure => "observer_failure",
            Class::InternalFailure => "internal_failure",
            Class::Indeterminate => "indeterminate",
            Class::DeliveryFailed => "delivery_failed",
        }
    }

    /// The CLI's exit code for a receipt of this class (README, "agent").
    pub fn exit_code(self) -> u8 {
        match self {
            Class::Accepted => 0,
            Class::Invalid => 2,
            Class::Busy
            | Class::Unsupported
            | Class::Unavailable
            | Class::StaleIncarnation
            | Class::ObserverFailure
            | Class::DeliveryFailed => 3,
            Class::Indeterminate => 4,
            Class::InternalFailure => 1,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Correlation {
    /// `codex_rollout`: the provider-file cursor of the adopted process's rollout;
    /// `app_server_events`: the host's event sequence (`rollout` is its event log).
    pub correlation_source: String,
    pub baseline_provider_turn: Option<String>,
    pub armed_cursor: u64,
    pub rollout: String,
    pub target_pid: u32,
    pub target_start_time: u64,
    /// `app_server_events`: the app-server's thread and session, and the provider turn
    /// its `turn/start` answered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_server_thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_server_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_turn: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Receipt {
    pub receipt_version: u32,
    pub receipt_class: Class,
    /// `false` for every definitive rejection; `null` when it cannot be known (a write
    /// that failed part-way, an answer lost after the request was sent).
    pub prompt_written: Option<bool>,
    pub request_id: String,
    pub agent_id: String,
    pub incarnation: String,
    /// `final` (a terminal event will carry the turn's outcome) or `none`.
    pub return_mode: String,
    pub reply_pending: bool,
    pub paste_mode: String,
    pub final_timeout_ms: u64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<Correlation>,
    pub detail: String,
    /// This receipt was stored by an earlier admission of the same request.
    #[serde(default)]
    pub replayed: bool,
}

impl Receipt {
    pub fn rejected(base: &Receipt, class: Class, detail: &str) -> Receipt {
        Receipt {
            receipt_class: class,
            prompt_written: Some(false),
            reply_pending: false,
            correlation: None,
            detail: detail.to_string(),
            ..base.clone()
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
