//! The privacy-safe category of a shell command: judged from the program name of its
//! first word alone (leading `VAR=value` assignments and a directory prefix skipped), and
//! always one of `CATEGORIES` — the command text itself never leaves this function.

/// Every value `command_category` returns.
pub const CATEGORIES: [&str; 9] = [
    "build", "test", "vcs", "package", "file", "search", "shell", "other", "empty",
];

/// The category of `command`.
pub fn command_category(command: &str) -> &'static str {
    let mut words = command.split_whitespace();
    let first = loop {
        match words.next() {
            None => return "empty",
            // `FOO=1 cargo test`: the assignment is not the program.
            Some(w) if is_assignment(w) => continue,
            Some(w) => break w,
        }
    };
    let program = first.rsplit('/').next().unwrap_or(first);
    let second = words.next().unwrap_or("");
    match program {
        "make" | "cmake" | "ninja" | "gcc" | "g++" | "cc" | "clang" | "rustc" | "javac" | "tsc"
        | "go" | "mvn" | "gradle" | "bazel" | "meson" => build_or_test(second),
        "cargo" => match second {
            "test" | "nextest" | "bench" => "test",
            "add" | "install" | "remove" | "update" | "fetch" | "publish" => "package",
            _ => "build",
        },
        "npm" | "pnpm" | "yarn" | "bun" => match second {
            "test" | "t" => "test",
            "run" | "build" | "exec" | "x" => "build",
            _ => "package",
        },
        "pytest" | "tox" | "nox" | "jest" | "vitest" | "mocha" | "ctest" | "phpunit" | "rspec" => {
            "test"
        }
        "git" | "hg" | "svn" | "gh" | "jj" => "vcs",
        "pip" | "pip3" | "pipx" | "uv" | "poetry" | "apt" | "apt-get" | "dnf" | "yum" | "brew"
        | "apk" | "pacman" | "gem" | "bundle" | "composer" | "conda" => "package",
        "ls" | "cat" | "cp" | "mv" | "rm" | "mkdir" | "rmdir" | "touch" | "chmod" | "chown"
        | "ln" | "head" | "tail" | "wc" | "stat" | "tree" | "du" | "df" | "tar" | "zip"
        | "unzip" | "sed" | "awk" | "less" | "diff" | "patch" | "file" => "file",
        "grep" | "rg" | "ag" | "find" | "fd" | "locate" | "which" => "search",
        "cd" | "echo" | "printf" | "export" | "source" | "." | "pwd" | "env" | "set" | "true"
        | "false" | "sleep" | "exit" | "clear" | "history" | "alias" | "unset" => "shell",
        _ => "other",
    }
}

fn build_or_test(second: &str) -> &'static str {
    match second {
        "test" | "check" | "tests" => "test",
        _ => "build",
    }
}

/// `NAME=value` with a shell variable name.
fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_come_from_the_first_word_only() {
        let table = [
            ("cargo build --release", "build"),
            ("RUST_LOG=debug cargo test -p x", "test"),
            ("/usr/bin/git status", "vcs"),
            ("make test", "test"),
            ("npm install left-pad", "package"),
            ("ls -la /secret/path", "file"),
            ("rg CANARY src", "search"),
            ("echo hello", "shell"),
            ("./secret-tool --token abc", "other"),
            ("   ", "empty"),
            ("=x ls", "other"),
        ];
        for (cmd, want) in table {
            let got = command_category(cmd);
            assert_eq!(got, want, "{cmd}");
            assert!(CATEGORIES.contains(&got));
        }
    }
}
