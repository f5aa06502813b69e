//! Known models by name: `baton model list`, `-m NAME` and its errors, with
//! `BATON_CACHE_DIR` in a temp dir (nothing is downloaded).

use std::path::Path;
use std::process::{Command, Output};

use baton_testkit::TempDir;

use crate::{assert_clean_error, tiny};

/// Runs `baton` with `args` in `dir`, its cache in `cache`.
fn baton_in(dir: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .current_dir(dir)
        .env("BATON_CACHE_DIR", cache)
        .output()
        .expect("run baton")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "baton failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn model_list_shows_each_known_model_its_cache_path_and_whether_cached() {
    let cache = TempDir::new("cli-list");
    let models = cache.file("models");
    let list = stdout(&baton_in(cache.path(), cache.path(), &["model", "list"]));
    for (name, file) in
        [("smollm2-135m (default)", "SmolLM2-135M-Instruct.Q4_1.gguf"), ("gemma3-270m", "gemma-3-270m-q4_k_m.gguf")]
    {
        let line = list.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no line for {name}: {list}"));
        assert!(line.contains("not cached"), "{line}");
        assert!(line.contains(&models.join(file).display().to_string()), "{line}");
    }

    // A file of the model's size under its name is what a verified fetch leaves.
    std::fs::create_dir_all(&models).expect("models dir");
    let file = std::fs::File::create(models.join("gemma-3-270m-q4_k_m.gguf")).expect("create");
    file.set_len(253_113_024).expect("set_len");
    let json = stdout(&baton_in(cache.path(), cache.path(), &["model", "list", "--json"]));
    let gemma = json.lines().find(|l| l.contains(r#""name":"gemma3-270m""#)).unwrap_or_else(|| panic!("{json}"));
    assert!(gemma.contains(r#""cached":true"#) && gemma.contains(r#""default":false"#), "{gemma}");
    assert!(
        gemma.contains(r#""sha256":"a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818""#),
        "{gemma}"
    );
    let smol = json.lines().find(|l| l.contains(r#""name":"smollm2-135m""#)).unwrap_or_else(|| panic!("{json}"));
    assert!(smol.contains(r#""cached":false"#) && smol.contains(r#""default":true"#), "{smol}");
}

#[test]
fn unknown_model_names_are_an_error_listing_the_known_ones() {
    let cache = TempDir::new("cli-unknown");
    for args in
        [&["model", "fetch", "llama9"][..], &["model", "info", "-m", "llama9"], &["run", "-m", "llama9", "-p", "x"]]
    {
        let out = baton_in(cache.path(), cache.path(), args);
        assert_clean_error(&out, "unknown model \"llama9\"");
        assert_clean_error(&out, "smollm2-135m, gemma3-270m");
    }
    assert!(!cache.file("models").exists(), "nothing was fetched");
}

#[test]
fn a_file_named_like_a_known_model_wins_over_the_name() {
    let (dir, model) = tiny("name-file");
    std::fs::rename(&model, dir.file("gemma3-270m")).expect("rename");
    let cache = TempDir::new("cli-name-file");
    let info = stdout(&baton_in(dir.path(), cache.path(), &["model", "info", "-m", "gemma3-270m"]));
    assert!(info.contains("architecture: llama"), "{info}");
    assert!(!cache.file("models").exists(), "nothing was fetched");
}
