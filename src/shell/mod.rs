//! Shell-facing building blocks shared by guardians and the adapter: PTY spawning, the
//! prompt marker, output rendering, redaction and the mode command policy.
pub mod cmdpolicy;
pub mod keys;
pub mod marker;
pub mod needles;
pub mod output;
pub mod pty;
pub mod redact;
pub mod secrets;
pub mod submit;
pub mod turn;
