//! `winx-code-agent`: the MCP adapter. All logic lives in the library.

use std::process::ExitCode;
use std::sync::Arc;
use winx::adapter::{LocalHandler, stdio};
use winx::config::Config;
use winx::config::cli::{self, Command};

fn main() -> ExitCode {
    winx::alloc::single_arena();
    winx::config::apply_build_identity(&winx::config::lookup(&winx::config::process_env()));
    let command = match cli::parse(std::env::args_os().skip(1)) {
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
    let config = match Config::build(&args, winx::config::process_env()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}\nhint: run 'winx-code-agent --help' for usage");
            return ExitCode::from(2);
        }
    };
    winx::adapter::init_logging(config.log_level);
    if args.http {
        return serve_http(&args, &config);
    }
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
    };
    let handler = Arc::new(LocalHandler {
        server: Arc::new(winx::mcp::Server::new(&config)),
        config: Arc::new(config),
    });
    match stdio::serve(std::io::stdin().lock(), std::io::stdout(), limits, handler) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `serve --http`: the HTTP configuration is built here (it reads the environment), so
/// every credential or listener problem is a startup error with exit code 2.
fn serve_http(args: &cli::ServeArgs, config: &Config) -> ExitCode {
    let vars = winx::config::process_env();
    let env = winx::config::lookup(&vars);
    let http = match winx::config::http::HttpConfig::build(
        args,
        &config.policy,
        config.max_message_bytes,
        &env,
    ) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}\nhint: run 'winx-code-agent --help' for usage");
            return ExitCode::from(2);
        }
    };
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
    match winx::adapter::http::serve(config, http) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
