//! Command line and tool policy through the real binary.

use crate::support;

use serde_json::json;
use support::{Agent, Opts, run};

#[test]
fn help_and_version() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--tool-profile") && help.contains("--allow-tool"));
    let out = run(&["--version"]);
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    assert!(
        v.starts_with(&format!(
            "winx-code-agent {} (rev ",
            env!("CARGO_PKG_VERSION")
        )),
        "{v}"
    );
}

#[test]
fn usage_errors_exit_2_with_a_hint() {
    for args in [
        &["--bogus"][..],
        &["serve", "extra"],
        &["--tool-profile", "everything"],
        &["--allow-tool", "bashcommand"],
        &["--allow-tool", "Initialize", "--allow-tool", "VerifyEdit"],
        &["--tool-profile"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: stdout must stay clean");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(
            err.lines().any(|l| l.starts_with("hint: ")),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn hidden_tools_are_neither_listed_nor_executed() {
    let mut a = Agent::spawn_with(Opts {
        args: &["serve", "--allow-tool", "ReadFiles"],
        ..Default::default()
    });
    let r = a.request("tools/list", json!({}));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["ReadFiles"]);
    let ws = a.ws();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["status"], "policy_blocked");
    assert_eq!(r["structuredContent"]["errorCode"], "policy_blocked");
    // Nothing was bound: the store has no session.
    assert!(!a.state.join("winx.db").exists());
}

#[test]
fn profiles_filter_the_catalog() {
    for (profile, expected) in [
        (
            "full",
            &[
                "Initialize",
                "BashCommand",
                "ReadFiles",
                "ReadImage",
                "FileWriteOrEdit",
                "MultiFileEdit",
                "ApplyPatch",
                "EditFiles",
                "VerifyEdit",
                "UndoEdit",
                "CodeMap",
                "ContextSave",
                "Execution",
                "Agent",
            ][..],
        ),
        (
            "coding",
            &[
                "Initialize",
                "BashCommand",
                "ReadFiles",
                "FileWriteOrEdit",
                "MultiFileEdit",
                "ApplyPatch",
                "EditFiles",
                "VerifyEdit",
                "UndoEdit",
                "CodeMap",
                "Execution",
                "Agent",
            ],
        ),
        (
            "read-only",
            &[
                "Initialize",
                "ReadFiles",
                "ReadImage",
                "CodeMap",
                "Execution",
            ],
        ),
        (
            "terminal",
            &["Initialize", "BashCommand", "Execution", "Agent"],
        ),
    ] {
        let mut a = Agent::spawn_with(Opts {
            args: &["--tool-profile", profile],
            ..Default::default()
        });
        let r = a.request("tools/list", json!({}));
        let names: Vec<&str> = r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, expected, "{profile}");
    }
}

#[test]
fn full_catalog_fits_the_context_budget() {
    let mut a = Agent::spawn();
    let r = a.request("tools/list", json!({}));
    let bytes = serde_json::to_vec(&r).unwrap().len();
    assert!(
        bytes <= 18 * 1024,
        "tools/list is {bytes} bytes; the budget is 18 KiB"
    );
    for t in r["result"]["tools"].as_array().unwrap() {
        let props = t["inputSchema"]["properties"].as_object().unwrap();
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
        for key in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(
                t["annotations"][key].is_boolean(),
                "{} lacks {key}",
                t["name"]
            );
        }
        // Session-bound tools require the pair; Initialize takes it optionally.
        if t["name"] != "Initialize" {
            let req = t["inputSchema"]["required"].as_array().unwrap();
            assert!(req.contains(&json!("thread_id")) && req.contains(&json!("workspace_root")));
        }
        assert!(props.contains_key("thread_id") && props.contains_key("workspace_root"));
    }
}

/// Seed 003's quick start is `cargo install winx-code-agent`: that is the package's name
/// (the library keeps the short name `winx`).
#[test]
fn the_package_is_named_winx_code_agent() {
    assert_eq!(env!("CARGO_PKG_NAME"), "winx-code-agent");
}

/// `RUST_LOG` with module filters is accepted (its plain level applies); a bad value is
/// blamed on the variable at fault; range errors come from the variable table.
#[test]
fn environment_errors_name_the_variable_at_fault() {
    let home = tempfile::tempdir().unwrap();
    let serve = |vars: &[(&str, &str)]| {
        std::process::Command::new(support::bin())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("WINX_RUNTIME", "embedded")
            .envs(vars.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = serve(&[("RUST_LOG", "info,tiny_http=warn")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let out = serve(&[("RUST_LOG", "tiny_http=loud")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("RUST_LOG") && !err.contains("WINX_LOG"),
        "{err}"
    );
    let out = serve(&[("WINX_MAX_GUARDIANS", "0")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("WINX_MAX_GUARDIANS must be a whole number in 1..=1024"),
        "{err}"
    );
    // Every variable of the table is in --help.
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    for v in winx::config::vars::ALL {
        assert!(help.contains(v.name), "{} missing from --help", v.name);
    }
}
