//! `winx-guardian`: reserved process role (see docs/architecture.md). The shell runtime issue
//! gives it a body; until then it only reports its build identity.

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("-V") | Some("--version") => {
            println!("winx-guardian {}", winx::build_info::identity());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "error: winx-guardian is not built yet in this version; only --version is available"
            );
            ExitCode::from(2)
        }
    }
}
