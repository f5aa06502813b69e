//! The `baton` binary's tests, one test binary (`cargo test -p baton-cli
//! --test it`): the verbs end to end, chat, serve, Vulkan devices, and the
//! layering of every crate's source files.

mod chat;
mod cli;
mod layering;
mod models;
mod serve;
mod spec;
mod vulkan;

use std::process::{Command, Output};

use baton_testkit::TempDir;

/// Runs `baton` with `args`.
fn baton(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton")).args(args).output().expect("run baton")
}

/// Asserts `out` is an error message containing `needle`, exit code 1, no panic.
fn assert_clean_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {stderr}");
    assert!(stderr.contains(needle), "stderr lacks {needle:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
}

/// The tiny synthetic model in q8_0, written by `baton model synth` into a
/// temp dir tagged `tag`: the directory and the model's path.
fn tiny(tag: &str) -> (TempDir, String) {
    let dir = TempDir::new(&format!("cli-{tag}"));
    let path = dir.file("tiny.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "tiny", "--type", "q8_0", "-o", &path]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    (dir, path)
}
