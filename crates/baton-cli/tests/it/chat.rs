//! `baton run --chat` end to end on a synthetic model: a conversation piped
//! on stdin gets one answer line per user turn, `-p --chat` answers once,
//! stdout holds the answers only, and bad use is a clear error.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::tiny;

/// Runs `baton` with `stdin` piped in.
fn baton(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run baton");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("baton output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn chat_answers_each_piped_turn_and_exits_at_eof() {
    let (_dir, model) = tiny("turns");
    let args = ["run", "-m", &model, "--chat", "--temp", "0", "-n", "6"];
    let out = baton(&args, "hello there\nhow are you\n");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    assert!(stdout.ends_with('\n') && stdout.matches('\n').count() >= 2, "each answer ends a line: {stdout:?}");
    assert!(stderr.contains("using ChatML"), "the fallback template is announced: {stderr}");
    assert!(stderr.contains("in 2 answers"), "statistics on stderr: {stderr}");
    assert!(!stdout.contains("> ") && !stdout.contains("load:"), "stdout holds the answers only: {stdout:?}");
    // The second turn reuses the first from the cache.
    let reused: usize = stderr
        .split(" reused")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no reuse count in {stderr}"));
    assert!(reused > 0, "the second turn reuses the cache: {stderr}");

    // Greedy is deterministic; /exit ends like EOF does; blank lines are skipped.
    let again = baton(&args, "hello there\n\nhow are you\n/exit\nnot read\n");
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), stdout, "same answers, nothing after /exit");
}

#[test]
fn chat_with_a_prompt_answers_once() {
    let (_dir, model) = tiny("prompt");
    let out =
        baton(&["run", "-m", &model, "-cnv", "-sys", "be brief", "-p", "hello there", "--temp", "0", "-n", "4"], "");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    assert!(stdout.ends_with('\n'), "the answer ends a line: {stdout:?}");
    assert!(!stdout.contains("hello there"), "the prompt is not echoed in chat mode: {stdout:?}");
    assert!(stderr.contains("in 1 answer,"), "{stderr}");
    // Sampling flags work as in plain `run`.
    let sampled = baton(&["run", "-m", &model, "--chat", "-p", "hi", "--temp", "0.7", "--top-k", "5", "-s", "3"], "");
    assert!(sampled.status.success(), "{}", text(&sampled.stderr));
}

#[test]
fn chat_misuse_and_overflow_are_clear_errors() {
    let (_dir, model) = tiny("errors");
    let out = baton(&["run", "-m", &model, "-sys", "x", "-p", "hi"], "");
    assert_eq!(out.status.code(), Some(2), "--system-prompt needs --chat: {}", text(&out.stderr));
    let out = baton(&["run", "-m", &model, "--chat", "-c", "8", "-p", "hello there"], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("context is full") && !stderr.contains("panicked"), "{stderr}");
}
