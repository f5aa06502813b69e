//! `baton run --spec-type ngram` prints the text, and writes the logits
//! rows (`--logits-out`), that `baton run` without speculation does, byte
//! for byte, greedy and sampled with penalties, on one device and split by
//! layer or tensor; and says what it drafted.

use std::process::Output;

use baton_testkit::TempDir;

use crate::{baton, tiny};

/// `baton run -m model -p prompt -n n` with the `extra` arguments, its
/// logits rows written to a file of `dir` named after `tag`: the output and
/// those rows.
fn run_logits(
    dir: &TempDir,
    (model, prompt, n): (&str, &str, &str),
    extra: &[&[&str]],
    tag: &str,
) -> (Output, Vec<u8>) {
    let logits = dir.file(&format!("logits-{tag}.bin"));
    let logits_arg = logits.to_string_lossy().into_owned();
    let mut args = vec!["run", "-m", model, "-p", prompt, "-n", n, "--logits-out", &logits_arg];
    extra.iter().for_each(|e| args.extend_from_slice(e));
    let out = baton(&args);
    assert!(out.status.success(), "run {extra:?}: {}", String::from_utf8_lossy(&out.stderr));
    (out, std::fs::read(&logits).expect("logits file"))
}

#[test]
fn run_with_ngram_speculation_gives_the_bytes_of_run_without() {
    let (dir, model) = tiny("spec");
    let prompt = "one two three four one two three four one two three";
    let samplings: [&[&str]; 4] = [
        &["--temp", "0"],
        &["--temp", "0.8", "--top-k", "40", "--repeat-penalty", "1.1", "--repeat-last-n", "16", "-s", "3"],
        // Over a layer split and a tensor split (exact sums) too.
        &["--temp", "0", "--devices", "cpu:0,cpu:1", "-sm", "layer"],
        &["--temp", "0.8", "-s", "5", "--devices", "cpu:0,cpu:1", "-sm", "tensor", "--tensor-exact"],
    ];
    for (i, sampling) in samplings.iter().enumerate() {
        let run = |spec: &[&str], tag: &str| {
            run_logits(&dir, (&model, prompt, "48"), &[sampling, spec], &format!("{i}-{tag}"))
        };
        let (plain, plain_logits) = run(&[], "plain");
        let (spec, spec_logits) = run(&["--spec-type", "ngram", "--draft-max", "4"], "spec");
        assert_eq!(String::from_utf8_lossy(&spec.stdout), String::from_utf8_lossy(&plain.stdout), "{sampling:?}");
        assert!(!plain_logits.is_empty() && spec_logits == plain_logits, "{sampling:?}: logits rows differ");
        let stderr = String::from_utf8_lossy(&spec.stderr);
        assert!(stderr.contains("speculation:") && stderr.contains("drafted tokens"), "{stderr}");
        assert!(!String::from_utf8_lossy(&plain.stderr).contains("speculation:"), "off by default");
    }
    let out = baton(&["run", "-m", &model, "-p", "x", "--spec-type", "eagle"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

/// `--model-draft` (llama.cpp's `-md`): the same bytes with drafts of a
/// model of the same vocabulary; one of another vocabulary is refused.
#[test]
fn run_with_a_draft_model_gives_the_bytes_of_run_without() {
    let (dir, model) = tiny("spec-md");
    let draft = dir.file("draft.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "tiny", "--type", "q4_0", "-o", &draft]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    let base = ["run", "-m", &model, "-p", "one two three one two three", "-n", "32", "--temp", "0.7", "-s", "2"];
    let plain = baton(&base);
    let mut args = base.to_vec();
    // llama.cpp's spelling: `-md`, `-devd`.
    args.extend(["-md", &draft, "-devd", "cpu", "--draft-max", "4"]);
    let drafted = baton(&args);
    assert!(drafted.status.success(), "-md: {}", String::from_utf8_lossy(&drafted.stderr));
    assert_eq!(String::from_utf8_lossy(&drafted.stdout), String::from_utf8_lossy(&plain.stdout));
    assert!(String::from_utf8_lossy(&drafted.stderr).contains("speculation:"));
    let other = dir.file("other.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "stories15M", "--type", "q4_0", "-o", &other]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    let mut args = base.to_vec();
    args.extend(["--md", &other]);
    crate::assert_clean_error(&baton(&args), "vocabulary");
}

/// A hybrid model (`qwen35moe`): `baton run --spec-type ngram` prints the
/// text and writes the logits rows of `baton run` without (its recurrent
/// state cut back to the accepted drafts each step); `--delta-chunk`
/// refuses speculation by name; `baton bench spec` reports what keeping
/// the states after each row costs.
#[test]
fn a_hybrid_model_speculates_with_the_bytes_of_run_without() {
    let (dir, _) = tiny("spec-hybrid");
    let model = dir.file("qwen35moe.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "qwen35moe", "--type", "q8_0", "-o", &model]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    // A hybrid draft model of the same vocabulary (its slot's recurrent
    // state back to its checkpoint after rejected drafts).
    let draft = dir.file("qwen35.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "qwen35", "--type", "q4_0", "-o", &draft]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    for (i, sampling) in
        [&["--temp", "0"][..], &["--temp", "0.8", "--repeat-penalty", "1.1", "-s", "3"]].iter().enumerate()
    {
        let prompt = "one two one two one two";
        let run = |spec: &[&str], tag: &str| {
            run_logits(&dir, (&model, prompt, "32"), &[sampling, spec], &format!("h{i}-{tag}"))
        };
        let (plain, plain_logits) = run(&[], "plain");
        for (j, spec_args) in [&["--spec-type", "ngram"][..], &["-md", &draft]].iter().enumerate() {
            let args: Vec<&str> = spec_args.iter().copied().chain(["--draft-max", "4"]).collect();
            let (spec, spec_logits) = run(&args, &format!("spec{j}"));
            let what = format!("{sampling:?} {spec_args:?}");
            assert_eq!(String::from_utf8_lossy(&spec.stdout), String::from_utf8_lossy(&plain.stdout), "{what}");
            assert!(!plain_logits.is_empty() && spec_logits == plain_logits, "{what}: logits rows differ");
            assert!(String::from_utf8_lossy(&spec.stderr).contains("speculation:"), "{what}");
        }
    }
    let chunked = ["run", "-m", &model, "-p", "x", "-n", "4", "--spec-type", "ngram", "--delta-chunk", "4"];
    crate::assert_clean_error(&baton(&chunked), "delta-chunk");
    let bench = baton(&["bench", "spec", "-m", &model, "-c", "2048", "-n", "8", "-r", "1", "--spec-type", "ngram"]);
    assert!(bench.status.success(), "bench spec: {}", String::from_utf8_lossy(&bench.stderr));
    let table = String::from_utf8_lossy(&bench.stdout);
    assert!(table.contains("recurrent states kept after each row") && table.contains("| code |"), "{table}");
}

/// `--spec-type mtp`: the file's own multi-token-prediction block drafts
/// (qwen35 toy, f32), and the text and the logits rows are those of `baton
/// run` without, greedy and sampled; `baton bench spec` runs it; a file
/// without the block refuses it by name (`baton serve`'s: serve.rs).
#[test]
fn run_with_the_models_own_mtp_head_gives_the_bytes_of_run_without() {
    let (dir, tiny) = tiny("spec-mtp");
    let model = dir.file("qwen35.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "qwen35", "--type", "f32", "-o", &model]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    for (i, sampling) in
        [&["--temp", "0"][..], &["--temp", "0.8", "--repeat-penalty", "1.1", "-s", "3"]].iter().enumerate()
    {
        let run = |spec: &[&str], tag: &str| {
            run_logits(&dir, (&model, "one two three", "32"), &[sampling, spec], &format!("m{i}-{tag}"))
        };
        let (plain, plain_logits) = run(&[], "plain");
        let (spec, spec_logits) = run(&["--spec-type", "mtp", "--draft-max", "4"], "spec");
        assert_eq!(String::from_utf8_lossy(&spec.stdout), String::from_utf8_lossy(&plain.stdout), "{sampling:?}");
        assert!(!plain_logits.is_empty() && spec_logits == plain_logits, "{sampling:?}: logits rows differ");
        let stderr = String::from_utf8_lossy(&spec.stderr);
        assert!(stderr.contains("speculation:") && stderr.contains("drafted tokens"), "{stderr}");
    }
    let bench = baton(&["bench", "spec", "-m", &model, "-c", "2048", "-n", "8", "-r", "1", "--spec-type", "mtp"]);
    assert!(bench.status.success(), "bench spec: {}", String::from_utf8_lossy(&bench.stderr));
    assert!(String::from_utf8_lossy(&bench.stdout).contains("| code |"));
    crate::assert_clean_error(&baton(&["run", "-m", &tiny, "-p", "x", "--spec-type", "mtp"]), "holds none");
}
