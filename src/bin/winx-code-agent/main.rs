//! `winx-code-agent`: the MCP adapter, and under the names `winxd` and `winx-guardian` the
//! other two process roles (one binary: see docs/architecture.md, "One binary, three
//! roles"). All logic lives in the library.

mod guardian;
mod winxd;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use winx::adapter::{LocalHandler, stdio};
use winx::config::Config;
use winx::config::cli::{self, Command};

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let role = winx::process::Role::of(&args.next().unwrap_or_default());
    match role {
        winx::process::Role::Winxd => winxd::main(args),
        winx::process::Role::Guardian => guardian::main(args),
        winx::process::Role::Adapter => adapter(args),
    }
}

fn adapter(args: std::env::ArgsOs) -> ExitCode {
    winx::alloc::single_arena();
    winx::process::survive_file_size_limit();
    winx::config::apply_build_identity(&winx::config::lookup(&winx::config::process_env()));
    winx::config::apply_pty_write_timeout(&winx::config::lookup(&winx::config::process_env()));
    let args: Vec<std::ffi::OsString> = args.collect();
    // `<verb> --help` (or -h) prints that verb's usage before its parser, which would
    // refuse an option it does not take.
    if let Some(help) = winx::operator::help::asked(&args) {
        print!("{help}");
        return ExitCode::SUCCESS;
    }
    let command = match cli::parse(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let args = match command {
        Command::Help => {
            print!("{}", cli::help());
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("winx-code-agent {}", winx::build_info::identity());
            return ExitCode::SUCCESS;
        }
        Command::Serve(args) => args,
        Command::Operator(op) => {
            return match Config::build(&Default::default(), winx::config::process_env()) {
                Ok(config) => winx::operator::main(op, &config),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            };
        }
    };
    let mut config = match Config::build(&args, winx::config::process_env()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}\nhint: run 'winx-code-agent --help' for usage");
            return ExitCode::from(2);
        }
    };
    winx::adapter::init_logging_as(config.log_level, config.log_json);
    // HTTP credentials are read before the sandbox closes the files they may live in.
    let http = match args.http {
        true => match http_config(&args, &config) {
            Ok(h) => Some(h),
            Err(code) => return code,
        },
        false => None,
    };
    // Every credential is read: nothing started from here on gets one, and this process's
    // environment block no longer shows them (docs/decisions/002).
    let credential_vars = http.as_ref().map(|h| h.credential_vars.as_slice());
    winx::config::credentials::forget(&mut config, credential_vars.unwrap_or_default());
    // The sandbox comes before any thread, writer or PTY, so all of them inherit it.
    let own_dirs = [
        config.state_dir.as_path(),
        config.runtime.runtime_dir.as_path(),
    ];
    match winx::config::sandbox::enter(&config.sandbox, &own_dirs) {
        Ok(applied) => winx::sandbox::log_applied("winx-code-agent", &applied),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    // The usage log's writer starts after logging (it reports a bad log on stderr) and
    // before any request; without WINX_USAGE_LOG nothing is started.
    let usage = match &config.usage {
        Some(settings) => winx::usage::Sink::start(settings),
        None => winx::usage::Sink::off(),
    };
    let code = match http {
        Some(http) => serve_http(http, &config, usage.clone()),
        None => serve_stdio(config, usage.clone()),
    };
    // Everything the requests emitted reaches the file before the process ends.
    if !usage.flush(USAGE_FLUSH_GRACE) {
        log::warn!("usage log: the writer did not finish within {USAGE_FLUSH_GRACE:?}");
    }
    code
}

/// How long an exiting server waits for the usage writer to drain its queue.
const USAGE_FLUSH_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn serve_stdio(config: Config, usage: winx::usage::Sink) -> ExitCode {
    log::info!(
        "winx-code-agent {} serving MCP on stdio ({} workers, tool policy {}, state dir {})",
        winx::build_info::identity(),
        config.workers,
        config.policy.source,
        config.state_dir.display()
    );
    let limits = stdio::Limits {
        workers: config.workers,
        max_message_bytes: config.max_message_bytes,
        progress_interval: config.progress_interval,
    };
    // The MCP SDKs end a stdio server with SIGTERM right after closing its stdin, often
    // before EOF is read: the last call's usage line is queued before its answer is
    // written, so draining the queue here keeps it.
    let on_signal = usage.clone();
    let stop = move |sig: i32| {
        log::info!("signal {sig}: stopping");
        if !on_signal.flush(USAGE_FLUSH_GRACE) {
            log::warn!("usage log: the writer did not finish within {USAGE_FLUSH_GRACE:?}");
        }
        std::process::exit(128 + sig);
    };
    if let Err(e) = winx::adapter::signals::on_stop(stop) {
        log::warn!("cannot watch for SIGTERM ({e}); a signal ends the server without a flush");
    }
    let handler = Arc::new(LocalHandler::new(
        Arc::new(winx::mcp::Server::with_usage(&config, usage)),
        Arc::new(config),
    ));
    // A person ran this (`make run`), not an MCP host, whose stdin is a pipe: say on
    // stderr what runs and how to use and stop it. A host's stderr is often its log, so
    // under a host nothing is printed.
    if std::io::stdin().is_terminal() {
        eprintln!("{}", terminal_greeting());
    }
    // Two reader threads take turns on stdin, so it is shared (`Stdin`), not locked once.
    let input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
    match stdio::serve(input, std::io::stdout(), limits, handler) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The one line `serve` on a terminal prints: what is served, how a client connects,
/// how to stop.
fn terminal_greeting() -> String {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "winx-code-agent".into());
    format!(
        "winx-code-agent {} is serving MCP on stdio (one JSON-RPC message per line); an MCP \
         client connects by starting `{exe} serve` itself (README, \"Using it from an MCP \
         client\"); Ctrl-D or Ctrl-C stops it",
        winx::build_info::identity()
    )
}

/// `serve --http`'s configuration: built in `main` (it reads the environment and the
/// credential files), so every credential or listener problem is a startup error with
/// exit code 2.
fn http_config(
    args: &cli::ServeArgs,
    config: &Config,
) -> Result<winx::config::http::HttpConfig, ExitCode> {
    let vars = winx::config::process_env();
    let env = winx::config::lookup(&vars);
    winx::config::http::HttpConfig::build(args, &config.policy, config.max_message_bytes, &env)
        .map_err(|e| {
            eprintln!("error: {e}\nhint: run 'winx-code-agent --help' for usage");
            ExitCode::from(2)
        })
}

fn serve_http(
    http: winx::config::http::HttpConfig,
    config: &Config,
    usage: winx::usage::Sink,
) -> ExitCode {
    // File tools refuse the credentials this server was started with.
    let mut config = config.clone();
    for f in &http.secret_files {
        config.allow_paths.protect_file(f);
    }
    let config = &config;
    log::info!(
        "winx-code-agent {} serving MCP over HTTP on {} (state dir {})",
        winx::build_info::identity(),
        http.bind,
        config.state_dir.display()
    );
    match winx::adapter::http::serve(config, http, usage) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
