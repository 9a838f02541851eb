//! A FIFO at `WINX_HERDR_CONFIG` (issue 36 item 8): reading the configuration opens it
//! without blocking and refuses it as not a regular file, so the `Agent` call is answered
//! with `herdr_configuration` at once instead of parking its worker on the open.

use crate::support::herdr as herdr_support;

use herdr_support::*;
use serde_json::json;

#[test]
fn a_fifo_as_the_herdr_config_is_refused_without_blocking_the_call() {
    let mut r = Rig::new();
    nix::unistd::mkfifo(
        &r.cfg_path(),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    // `Agent::call` waits at most the hard timeout: a blocked open fails the test here.
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["errorCode"], "herdr_configuration", "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("FIFO"), "{v}");
    // The server goes on serving the next call (the same refusal, just as quickly).
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["errorCode"], "herdr_configuration", "{v}");
}
