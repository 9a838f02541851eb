//! `winx-code-agent`: the MCP adapter. All logic lives in the library.

use std::process::ExitCode;
use winx::config::cli::{self, Command, USAGE};
use winx::config::Config;

fn main() -> ExitCode {
    let command = match cli::parse(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let args = match command {
        Command::Help => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("winx-code-agent {}", winx::build_info::identity());
            return ExitCode::SUCCESS;
        }
        Command::Serve(args) => args,
    };
    let config = match Config::build(&args, &|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}\nhint: run 'winx-code-agent --help' for usage");
            return ExitCode::from(2);
        }
    };
    winx::adapter::init_logging(config.log_level);
    let server = std::sync::Arc::new(winx::mcp::Server::new(&config));
    let stdin = std::io::stdin().lock();
    match winx::adapter::stdio::serve(stdin, std::io::stdout(), &config, server) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
