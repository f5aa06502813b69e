//! `baton run --spec-type ngram` prints the text, and writes the logits
//! rows (`--logits-out`), that `baton run` without speculation does, byte
//! for byte, greedy and sampled with penalties, on one device and split by
//! layer or tensor; and says what it drafted.

use crate::{baton, tiny};

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
            let logits = dir.file(&format!("logits-{i}-{tag}.bin"));
            let logits_arg = logits.to_string_lossy().into_owned();
            let mut args = vec!["run", "-m", &model, "-p", prompt, "-n", "48", "--logits-out", &logits_arg];
            args.extend_from_slice(sampling);
            args.extend_from_slice(spec);
            let out = baton(&args);
            assert!(out.status.success(), "run {spec:?}: {}", String::from_utf8_lossy(&out.stderr));
            (out, std::fs::read(&logits).expect("logits file"))
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
