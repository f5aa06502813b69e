//! The `baton` binary end to end on a synthetic model: the verbs work, print
//! what scripts read, and bad input is an error message with exit code 1,
//! never a panic.

use crate::{assert_clean_error, baton, tiny};

#[test]
fn run_bench_perplexity_and_plan_work_on_a_synthetic_model() {
    let (_dir, model) = tiny("verbs");
    let out = baton(&["run", "-m", &model, "-p", "hello world", "-n", "8", "--temp", "0", "--devices", "cpu:0,cpu:1"]);
    assert!(out.status.success(), "run: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("hello world"), "the prompt is echoed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("generation:"), "speed line");

    let out = baton(&["bench", "-m", &model, "-p", "16", "-n", "8", "-r", "2", "--json"]);
    assert!(out.status.success(), "bench: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "one JSON object per test: {stdout}");
    assert!(lines[0].contains("\"test\":\"pp16\"") && lines[1].contains("\"test\":\"tg8\""), "{stdout}");
    // A wait is counted only where the host found the device not done yet, so
    // a tiny model's step may finish first: at most one wait per step.
    assert!(host_waits_per_token(lines[1]) <= 1.0, "at most one host wait per token: {}", lines[1]);
    // At a depth (llama-bench's -d): the tests run after 40 cached positions.
    let out = baton(&["bench", "-m", &model, "-p", "8", "-n", "4", "-d", "40", "-r", "1", "--json"]);
    assert!(out.status.success(), "bench -d: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"test\":\"pp8 @ d40\"") && stdout.contains("\"test\":\"tg4 @ d40\""), "{stdout}");
    assert_eq!(stdout.matches("\"n_depth\":40").count(), 2, "{stdout}");
    // Sequences decoded together (a server's batch), after the depth copied
    // to each: one step per token of all of them.
    let out = baton(&["bench", "-m", &model, "-p", "0", "-n", "4", "-d", "40", "--parallel", "3", "-r", "1", "--json"]);
    assert!(out.status.success(), "bench --parallel: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"test\":\"tg4 x3 @ d40\"") && stdout.contains("\"parallel\":3"), "{stdout}");
    assert!(host_waits_per_token(&stdout) <= 0.334, "at most one host wait per step of 3: {stdout}");
    let out = baton(&["bench", "-m", &model, "-p", "0", "-n", "4", "--parallel", "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--parallel") && !stderr.contains("panicked"), "{stderr}");

    let text = std::env::temp_dir().join(format!("baton-cli-text-{}.txt", std::process::id()));
    std::fs::write(&text, "the quick brown fox jumps over the lazy dog. ".repeat(200)).expect("text");
    let text_arg = text.to_string_lossy().into_owned();
    let out = baton(&["perplexity", "-m", &model, "-f", &text_arg, "-c", "64", "--chunks", "2", "--json"]);
    let _ = std::fs::remove_file(&text);
    assert!(out.status.success(), "perplexity: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"chunks\":2"), "{}", String::from_utf8_lossy(&out.stdout));

    let out = baton(&["plan", "-m", &model, "--devices", "cpu:0,cpu:1", "-p", "4"]);
    assert!(out.status.success(), "plan: {}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("2 splits") && plan.contains("bytes"), "{plan}");
    // CPU streams wait natively on each other's host-memory timelines and
    // address each other's memory: no relay, no staging.
    assert!(plan.contains("native wait") && plan.contains("direct copy"), "{plan}");
    assert!(!plan.contains("relay") && !plan.contains("host-staged"), "{plan}");
}

/// The `host_waits_per_token` figure of a bench JSON line.
fn host_waits_per_token(line: &str) -> f64 {
    let key = "\"host_waits_per_token\":";
    let at = line.find(key).unwrap_or_else(|| panic!("no {key} in {line}")) + key.len();
    let number: String = line[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    number.parse().unwrap_or_else(|e| panic!("{key}{number}: {e}"))
}

/// A mixture of experts runs from the command line, and `baton plan` says
/// how many bytes of experts each device holds and a token reads.
#[test]
fn a_mixture_of_experts_runs_and_plans_its_experts_per_device() {
    let dir = baton_testkit::TempDir::new("cli-experts");
    let model = dir.file("moe.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "gpt-oss", "--type", "q8_0", "-o", &model]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    let out = baton(&["run", "-m", &model, "-p", "hello", "-n", "4", "--temp", "0", "--devices", "cpu:0,cpu:1"]);
    assert!(out.status.success(), "run: {}", String::from_utf8_lossy(&out.stderr));
    let out = baton(&["plan", "-m", &model, "--devices", "cpu:0,cpu:1", "-p", "4"]);
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "plan: {}", String::from_utf8_lossy(&out.stderr));
    // 16 experts of 3 matrices of 64 x 64 Q8_0 (34 bytes a block of 32) a
    // layer, 2 layers a device; a token reads 4 of the 16.
    let held = 2.0 * 16.0 * 3.0 * 64.0 * 64.0 / 32.0 * 34.0 / f64::from(1 << 20);
    let line = format!("experts {held:.1} MiB held, {:.1} MiB read a token", held / 4.0);
    assert!(plan.contains(&format!("cpu:0: layers 0..=1 (2 layers); {line}")), "{line}\n{plan}");
}

#[test]
fn bench_profiles_ops_and_puts_tg_against_the_bandwidth_roofline() {
    let (_dir, model) = tiny("profile");
    let out = baton(&["bench", "-m", &model, "-p", "0", "-n", "8", "-r", "1", "--op-profile", "--roofline"]);
    assert!(out.status.success(), "bench: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // tiny has 5 layers of 7 linear matmuls, one of them (ffn_down, rows of
    // 172) in f32 for want of whole q8_0 blocks, and the output: 31 q8_0.
    let linear = stdout.lines().find(|l| l.starts_with("| matmul linear (q8_0 weights)")).expect(&stdout);
    assert_eq!(linear.split('|').nth(2).map(str::trim), Some("31.0"), "{linear}");
    assert!(stdout.contains("| outside ops"), "{stdout}");
    let roof = stdout.lines().find(|l| l.starts_with("roofline:")).expect(&stdout);
    // Weights, and at a depth the keys and values a token reads.
    assert!(roof.contains("GB/s") && roof.contains("MB of weights and"), "{roof}");
    assert!(roof.contains("MB of keys and values per token"), "{roof}");
    let tg = stdout.lines().find(|l| l.contains("| tg8 |")).expect(&stdout);
    // The share against the triad measured before each repetition: mean ± std.
    let share = tg.trim_end().strip_suffix(" |").and_then(|t| t.rsplit('|').next()).map(str::trim);
    assert!(share.is_some_and(|s| s.contains("% ± ")), "a roofline share: {tg}");
    assert!(roof.contains("before the tg runs"), "{roof}");

    let out = baton(&["bench", "memory", "--mib", "8", "--passes", "2", "-t", "2", "--json"]);
    assert!(out.status.success(), "bench memory: {}", String::from_utf8_lossy(&out.stderr));
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains("\"triad_gbs\":") && json.contains("\"read_gbs_1t\":"), "{json}");
}

#[test]
fn devices_and_conformance_report_on_this_machine() {
    let out = baton(&["devices", "--json"]);
    assert!(out.status.success());
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.starts_with('[') && json.contains("\"name\":\"cpu\""), "{json}");
    let out = baton(&["conformance", "--filter", "q_fifo"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 passed, 0 expected failures, 0 failed"), "{stdout}");
}

/// The composite backend (`--split-mode tensor`) is a backend like any
/// other: `baton conformance -sm tensor` runs the suite on two composites
/// over the given devices.
#[test]
fn conformance_runs_the_composite_backend_with_split_mode_tensor() {
    let out = baton(&["conformance", "--devices", "cpu:0,cpu:1", "-sm", "tensor", "--filter", "c_", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON array");
    let names: Vec<&str> = rows.as_array().expect("rows").iter().filter_map(|r| r["name"].as_str()).collect();
    assert!(names.contains(&"c_order") && names.contains(&"c_cross"), "{stdout}");
    assert!(rows.as_array().expect("rows").iter().all(|r| r["outcome"] == "pass"), "{stdout}");
    let out = baton(&["conformance", "--devices", "cpu:0,cpu:1", "-sm", "tensor", "--filter", "w_order"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("two composite devices tensor(cpu:0,cpu:1)"), "the header names the composites: {stdout}");
    assert!(stdout.contains("1 passed, 0 expected failures, 0 failed"), "{stdout}");
    assert_clean_error(&baton(&["conformance", "-sm", "row", "--filter", "q_fifo"]), "--split-mode");
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    assert_clean_error(&baton(&["run", "-m", "/nonexistent.gguf", "-p", "x"]), "/nonexistent.gguf");
    assert_clean_error(&baton(&["run", "-m", "/nonexistent.gguf", "-p", "x", "--devices", "gpu:7"]), "unknown device");
    let (_dir, model) = tiny("bad");
    assert_clean_error(
        &baton(&["run", "-m", &model, "-p", "x", "--devices", "cpu:0,cpu:1", "-ts", "1,1,1"]),
        "--tensor-split",
    );
    let split = |mode: &str, shares: &str| {
        baton(&["run", "-m", &model, "-p", "x", "-n", "1", "--devices", "cpu:0,cpu:1", "-sm", mode, "-ts", shares])
    };
    assert_clean_error(&split("layer", "1,nan"), "--tensor-split");
    assert_clean_error(&split("layer", "0,0"), "--tensor-split");
    // A layer split may leave a device out; a tensor split may not.
    assert!(split("layer", "0,1").status.success(), "a zero share holds no layers");
    assert_clean_error(&split("tensor", "0,1"), "one positive share per device");
    assert_clean_error(&baton(&["run", "-m", &model, "-p", "x", "--cache-type", "q6_k"]), "--cache-type");
    // The tiny model's heads of 8 cannot be whole blocks of 32.
    assert_clean_error(&baton(&["run", "-m", &model, "-p", "x", "-ctk", "q4_0"]), "a multiple of 32");
    assert_clean_error(&baton(&["run", "-m", &model, "-p", "x", "--top-p", "0"]), "top");
    assert_clean_error(&baton(&["model", "synth", "--shape", "huge", "-o", "/tmp/x.gguf"]), "unknown shape");
    // A paged pool too small for one sequence: `run` refuses the step (the
    // server queues and preempts instead: the engine's tests).
    let pool = ["run", "-m", &model, "-c", "256", "--kv-pool-blocks", "1", "-p", "x", "-n", "100"];
    assert_clean_error(&baton(&pool), "the KV pool of 1 blocks of 64 positions has 0 free");
    // The pool sized in positions (64: one block) or bytes.
    let positions = ["run", "-m", &model, "-c", "256", "--kv-pool", "64", "-p", "x", "-n", "100"];
    assert_clean_error(&baton(&positions), "the KV pool of 1 blocks of 64 positions has 0 free");
    let bytes = ["run", "-m", &model, "-c", "256", "--kv-pool", "1KiB", "-p", "x"];
    assert_clean_error(&baton(&bytes), "less than one block of 64 positions");
    // Usage errors (clap's exit code 2), named.
    let usage = |args: &[&str], needle: &str| {
        let out = baton(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle) && !stderr.contains("panicked"), "{stderr}");
    };
    usage(&["run", "-m", &model, "--kv-pool", "2parsecs", "-p", "x"], "the unit is one of");
    usage(&["run", "-m", &model, "--kv-pool", "1GiB", "--kv-pool-blocks", "4", "-p", "x"], "cannot be used with");
}

/// The README's crate tree ("How it is built") names exactly the
/// workspace's members, so a newcomer's map of the system stays true.
#[test]
fn the_readme_lists_every_crate_of_the_workspace() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let read = |file: &str| std::fs::read_to_string(format!("{root}/{file}")).unwrap_or_else(|e| panic!("{file}: {e}"));
    let manifest = read("Cargo.toml");
    let members: std::collections::BTreeSet<String> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("\"crates/"))
        .filter_map(|l| l.split('"').next())
        .map(str::to_string)
        .collect();
    let readme = read("README.md");
    let built = readme.split("## How it is built").nth(1).expect("a section \"How it is built\"");
    let listed: std::collections::BTreeSet<String> = built
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|name| name.strip_suffix('/'))
        .filter(|name| name.starts_with("baton-"))
        .map(str::to_string)
        .collect();
    assert!(members.len() >= 10, "found only {members:?} in Cargo.toml");
    assert_eq!(listed, members, "README's crate tree against the workspace members");
}

/// `baton --help` opens with a summary that names no list of commands of
/// its own (clap's "Commands:" list below it is the one list), and every
/// command there is shown in the README.
#[test]
fn the_help_lists_the_commands_once_and_the_readme_shows_each() {
    let out = baton(&["--help"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .expect("a Commands: section")
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.len() >= 8, "found only {commands:?} in\n{help}");
    let summary = help.lines().next().expect("a first line");
    let words: Vec<&str> = summary.split(|c: char| !c.is_alphanumeric()).collect();
    let named: Vec<&&str> = commands.iter().filter(|c| words.contains(c)).collect();
    assert!(named.len() < 2, "the summary {summary:?} lists commands {named:?}; clap lists {commands:?}");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let missing: Vec<&&str> = commands.iter().filter(|c| !readme.contains(&format!("baton {c}"))).collect();
    assert!(missing.is_empty(), "commands of `baton --help` the README never shows: {missing:?}");
}

/// The shapes and types of `baton model synth`: its `--help` and the
/// README's command line list exactly the shape table and the supported
/// types.
#[test]
fn the_synth_shapes_and_types_agree_with_the_help_and_the_readme() {
    use std::collections::BTreeSet;
    let shapes: BTreeSet<&str> = baton_synth::SynthShape::ALL.iter().map(|s| s.name()).collect();
    let mut types: BTreeSet<&str> = baton_synth::SynthSpec::SUPPORTED_DTYPES.iter().map(|t| t.name()).collect();
    types.extend(["q4_k_m", "mxfp4_moe"]);
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let line = readme.lines().find(|l| l.starts_with("baton model synth --shape")).expect("a synth line in the README");
    let listed = |flag: &str| -> BTreeSet<&str> {
        let after = line.split(flag).nth(1).unwrap_or_else(|| panic!("{flag} in {line:?}"));
        after.split_whitespace().next().unwrap_or("").split('|').collect()
    };
    assert_eq!(listed("--shape "), shapes, "the README's shapes against SynthShape::ALL");
    assert_eq!(listed("--type "), types, "the README's types against SynthSpec::SUPPORTED_DTYPES and the mixes");
    let out = baton(&["model", "synth", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for name in shapes.iter().chain(&types) {
        assert!(help.contains(name), "`baton model synth --help` lacks {name}:\n{help}");
    }
}

/// `-ot PATTERN=DEVICE`, `--n-cpu-moe` and `--cpu-moe` place a mixture's
/// experts apart from their layers: the text and logits are one device's,
/// bit for bit; a pattern that matches no expert, a model without experts
/// and a bad pattern are clear errors.
#[test]
fn experts_placed_apart_give_one_devices_bits() {
    let dir = baton_testkit::TempDir::new("cli-experts-placed");
    let path = dir.file("moe.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "qwen3moe", "--type", "q8_0", "-o", &path]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    let run = |extra: &[&str], logits: &str| {
        let logits = dir.file(logits).to_string_lossy().into_owned();
        let mut args = vec!["run", "-m", &path, "-p", "Once upon", "-n", "6", "--temp", "0", "--logits-out", &logits];
        args.extend_from_slice(extra);
        let out = baton(&args);
        assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        (out.stdout, std::fs::read(&logits).expect("logits"))
    };
    let want = run(&["--devices", "cpu"], "one.bin");
    for (i, flags) in [
        &["--devices", "cpu:0,cpu:1", "-ts", "1,0", "-ot", "exps=cpu:1"][..],
        &["--devices", "cpu:0,cpu:1", "-ts", "1,0", "-ot", r"blk\.[01]\.ffn_.*_exps=cpu:1"][..],
        &["--devices", "cpu:1,cpu:0", "-ts", "1,0", "--n-cpu-moe", "2"][..],
    ]
    .into_iter()
    .enumerate()
    {
        assert!(run(flags, &format!("placed{i}.bin")) == want, "{flags:?}: not one device's text and logits");
    }
    let (_tiny_dir, tiny) = tiny("experts-placed");
    for (model, flags, needle) in [
        (&path, &["-ot", "attn_q=CPU"][..], "only experts' tensors"),
        (&path, &["-ot", "exps"][..], "not PATTERN=DEVICE"),
        (&path, &["-ot", "(=CPU"][..], "the pattern"),
        (&path, &["-ot", "exps=vulkan:7"][..], "does not list"),
        (&tiny, &["--cpu-moe"][..], "has none"),
    ] {
        let mut args = vec!["run", "-m", model, "-p", "hi", "-n", "1"];
        args.extend_from_slice(flags);
        assert_clean_error(&baton(&args), needle);
    }
}
