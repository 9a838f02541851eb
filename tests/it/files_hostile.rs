//! File tools against a hostile file system, through the real binary: special files (FIFOs,
//! devices) are refused without blocking anyone, and a directory swapped for a symlink
//! mid-operation never lets a read or a write escape the workspace.

use crate::support;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Agent, Opts, pair_args, sc, text};

/// How long an answer that must not block may take (far below the hard timeout, far above
/// a loaded machine's worst case for a refusal).
const PROMPT: Duration = Duration::from_secs(8);

fn mkfifo(p: &Path) {
    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
}

fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

/// Send every request at once, then collect the answers by id until `deadline`; requests
/// left unanswered are missing from the map.
fn send_all(a: &mut Agent, reqs: &[(&str, Value)], within: Duration) -> HashMap<i64, Value> {
    let mut ids = Vec::new();
    for (method, params) in reqs {
        let id = a.fresh_id();
        a.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        ids.push(id);
    }
    let deadline = Instant::now() + within;
    let mut out = HashMap::new();
    while out.len() < ids.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(msg) = a.recv_within(left) else {
            break;
        };
        if let Some(id) = msg["id"].as_i64() {
            out.insert(id, msg);
        }
    }
    ids.iter()
        .filter_map(|id| out.remove(id).map(|m| (*id, m)))
        .collect()
}

fn call_args(tool: &str, args: Value) -> Value {
    json!({"name": tool, "arguments": args})
}

/// Issue item 4: an edit of a FIFO is refused at once, and does not hold up an edit of
/// another file (another session's, in another workspace, in the same process).
#[test]
fn editing_a_fifo_is_refused_and_blocks_no_other_edit() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let fifo = a.workspace.join("pipe");
    mkfifo(&fifo);
    let other_ws = a.dir.path().join("other");
    std::fs::create_dir(&other_ws).unwrap();
    let other_ws = other_ws.canonicalize().unwrap();
    let t = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": other_ws}),
    );
    let t = sc(&t).clone();
    let edit = |s: &Value, path: &str, body: &str| {
        call_args(
            "FileWriteOrEdit",
            pair_args(
                s,
                json!({"file_path": path, "text_or_search_replace_blocks": body}),
            ),
        )
    };
    let reqs = [
        ("tools/call", edit(&s, "pipe", "replaced\n")),
        ("tools/call", edit(&t, "note.txt", "hello\n")),
    ];
    let answers = send_all(&mut a, &reqs, PROMPT);
    let mut answers: Vec<Value> = answers.into_values().collect();
    answers.sort_by_key(|m| m["id"].as_i64());
    assert_eq!(
        answers.len(),
        2,
        "an edit of a FIFO blocked the process: {answers:?}"
    );
    let r = &answers[0]["result"];
    assert_eq!(sc(r)["errorCode"], "not_regular_file", "{r}");
    assert!(text(r).contains("pipe") && text(r).contains("FIFO"), "{r}");
    let r = &answers[1]["result"];
    assert_eq!(sc(r)["status"], "completed", "{r}");
    assert!(is_fifo(&fifo), "the FIFO was replaced by a regular file");
    // MultiFileEdit-shaped tools share the engine: a FIFO among several files writes none.
    let r = a.call(
        "ApplyPatch",
        pair_args(
            &s,
            json!({"file_path": "pipe", "expected_revision": "sha256:00", "patches": [
                {"start_line": 1, "delete_lines": 0, "replacement": "x"}]}),
        ),
    );
    assert_eq!(sc(&r)["errorCode"], "not_regular_file", "{r}");
    // A directory keeps its own clear error.
    std::fs::create_dir(a.workspace.join("d")).unwrap();
    let r = a.call(
        "FileWriteOrEdit",
        pair_args(
            &s,
            json!({"file_path": "d", "text_or_search_replace_blocks": "x"}),
        ),
    );
    assert!(text(&r).contains("is a directory"), "{r}");
}

/// Issue item 4: ReadImage of a FIFO is refused at once; more such calls than workers
/// never stop the process from answering `ping`.
#[test]
fn read_image_of_a_fifo_is_refused_and_ping_still_answers() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    mkfifo(&a.workspace.join("img.png"));
    let mut reqs: Vec<(&str, Value)> = (0..10)
        .map(|_| {
            (
                "tools/call",
                call_args(
                    "ReadImage",
                    pair_args(&s, json!({"file_path": "img.png", "force": true})),
                ),
            )
        })
        .collect();
    reqs.push(("ping", json!({})));
    let answers = send_all(&mut a, &reqs, PROMPT);
    assert_eq!(
        answers.len(),
        reqs.len(),
        "ReadImage of a FIFO blocked workers; answered: {}",
        answers.len()
    );
    for m in answers
        .values()
        .filter(|m| m["result"]["content"].is_array())
    {
        let r = &m["result"];
        assert_eq!(sc(r)["errorCode"], "not_regular_file", "{r}");
        assert!(
            text(r).contains("img.png") && text(r).contains("FIFO"),
            "{r}"
        );
    }
}

/// Issue item 4: ReadFiles refuses a FIFO and a character device (reachable through
/// `WINX_ALLOW_PATHS`) with `not_regular_file`, promptly.
#[test]
fn read_files_refuses_fifos_and_devices() {
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_ALLOW_PATHS", "/dev")],
        ..Default::default()
    });
    let s = a.first_call();
    mkfifo(&a.workspace.join("pipe"));
    std::os::unix::fs::symlink("pipe", a.workspace.join("link-to-pipe")).unwrap();
    let reqs = [(
        "tools/call",
        call_args(
            "ReadFiles",
            pair_args(
                &s,
                json!({"file_paths": ["pipe", "link-to-pipe", "/dev/zero"]}),
            ),
        ),
    )];
    let answers = send_all(&mut a, &reqs, PROMPT);
    let r = &answers.values().next().expect("ReadFiles blocked")["result"];
    let codes: Vec<&str> = sc(r)["data"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["errorCode"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["not_regular_file"; 3], "{r}");
    assert!(
        text(r).contains("/dev/zero") && text(r).contains("character device"),
        "{r}"
    );
}

/// Issue item 4: ContextSave's globs skip special files instead of hanging on them.
#[test]
fn context_save_globs_skip_special_files() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("a.txt"), "plain\n").unwrap();
    mkfifo(&a.workspace.join("b.txt"));
    let reqs = [(
        "tools/call",
        call_args(
            "ContextSave",
            pair_args(
                &s,
                json!({"id": "t1", "description": "d", "relevant_file_globs": ["*.txt"]}),
            ),
        ),
    )];
    let answers = send_all(&mut a, &reqs, PROMPT);
    let r = &answers
        .values()
        .next()
        .expect("ContextSave blocked on a FIFO")["result"];
    assert_eq!(sc(r)["status"], "completed", "{r}");
    assert_eq!(sc(r)["data"]["files"], json!(["a.txt"]), "{r}");
}

/// Issue item 6: while a racing thread keeps exchanging `ws/sub` with a symlink to an
/// outside directory (`renameat2(RENAME_EXCHANGE)`), reads and edits of `sub/…` never
/// touch or return the outside directory's files, and leave no temp file there.
#[test]
fn swapping_a_directory_for_a_symlink_never_escapes_the_workspace() {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const OUTSIDE: &str = "OUTSIDE CONTENT\n";
    /// Bounds of the race: whichever ends first.
    const MAX_OPS: usize = 1500;
    const RACE_FOR: Duration = Duration::from_secs(12);
    const MAX_EXCHANGES: u64 = 50_000_000;

    let mut a = Agent::spawn();
    let s = a.first_call();
    let ws = a.workspace.clone();
    let outside = a.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("f.txt"), OUTSIDE).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/f.txt"), "inside 0\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("swap")).unwrap();
    let (sub, swap) = (ws.join("sub"), ws.join("swap"));
    if let Err(e) = renameat2(
        AT_FDCWD,
        &sub,
        AT_FDCWD,
        &swap,
        RenameFlags::RENAME_EXCHANGE,
    ) {
        eprintln!("RENAME_EXCHANGE unsupported here ({e}); skipped");
        return;
    }
    renameat2(
        AT_FDCWD,
        &sub,
        AT_FDCWD,
        &swap,
        RenameFlags::RENAME_EXCHANGE,
    )
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let exchanges = Arc::new(AtomicU64::new(0));
    let racer = {
        let (stop, exchanges) = (stop.clone(), exchanges.clone());
        let (sub, swap) = (sub.clone(), swap.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + RACE_FOR + Duration::from_secs(5);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < MAX_EXCHANGES && Instant::now() < deadline {
                if renameat2(
                    AT_FDCWD,
                    &sub,
                    AT_FDCWD,
                    &swap,
                    RenameFlags::RENAME_EXCHANGE,
                )
                .is_ok()
                {
                    n += 1;
                }
            }
            // Leave `sub` a directory again.
            if n % 2 == 1 {
                renameat2(
                    AT_FDCWD,
                    &sub,
                    AT_FDCWD,
                    &swap,
                    RenameFlags::RENAME_EXCHANGE,
                )
                .unwrap();
                n += 1;
            }
            exchanges.store(n, Ordering::Relaxed);
        })
    };

    let (mut ops, mut reads_ok, mut leaked_reads, mut edits_ok) = (0, 0, 0, 0);
    let deadline = Instant::now() + RACE_FOR;
    while ops < MAX_OPS && Instant::now() < deadline {
        ops += 1;
        let r = a.call(
            "ReadFiles",
            pair_args(&s, json!({"file_paths": ["sub/f.txt"]})),
        );
        if text(&r).contains("OUTSIDE") {
            leaked_reads += 1;
        } else if sc(&r)["status"] == "completed" {
            reads_ok += 1;
        }
        let r = a.call(
            "FileWriteOrEdit",
            pair_args(
                &s,
                json!({"file_path": "sub/f.txt", "text_or_search_replace_blocks": format!("inside {ops}\n")}),
            ),
        );
        edits_ok += usize::from(sc(&r)["status"] == "completed");
        let r = a.call(
            "FileWriteOrEdit",
            pair_args(
                &s,
                json!({"file_path": format!("sub/new-{ops}.txt"), "text_or_search_replace_blocks": "new\n"}),
            ),
        );
        edits_ok += usize::from(sc(&r)["status"] == "completed");
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    let mut outside_names: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside_names.sort();
    let outside_now = std::fs::read_to_string(outside.join("f.txt")).unwrap_or_default();
    eprintln!(
        "race: {ops} rounds, {} exchanges, {reads_ok} clean reads, {leaked_reads} reads of \
         the outside file, {edits_ok} edits committed; outside: f.txt overwritten {}, {} temp \
         files, {} other new files",
        exchanges.load(Ordering::Relaxed),
        outside_now != OUTSIDE,
        outside_names.iter().filter(|n| n.ends_with(".tmp")).count(),
        outside_names
            .iter()
            .filter(|n| *n != "f.txt" && !n.ends_with(".tmp"))
            .count()
    );
    assert!(
        exchanges.load(Ordering::Relaxed) > 0,
        "the racer never exchanged"
    );
    assert_eq!(leaked_reads, 0, "reads returned the outside file's content");
    assert_eq!(outside_now, OUTSIDE, "the outside file was overwritten");
    assert_eq!(
        outside_names,
        ["f.txt"],
        "files (temp or new) were created outside the workspace"
    );
    assert!(reads_ok > 0 && edits_ok > 0, "no operation ever succeeded");
}
