//! `--devices vulkan:N` end to end: listed by `baton devices`, tested by
//! `baton conformance`, and a model runs on it, alone and split with a CPU
//! device. On a machine without a Vulkan driver these print a notice and
//! pass, unless `CI` or `BATON_REQUIRE_VULKAN=1` is set.

use baton_testkit::env::vulkan_required;

use crate::{baton, tiny};

/// Whether `vulkan:0` opens here (a missing driver is a failure where one
/// is required).
fn have_vulkan() -> bool {
    let out = baton(&["devices", "--devices", "vulkan:0", "--json"]);
    if out.status.success() {
        return true;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!vulkan_required(), "vulkan:0 does not open: {stderr}");
    eprintln!("skipped: vulkan:0 does not open: {stderr}");
    false
}

#[test]
fn vulkan_devices_are_listed_tested_and_run_models() {
    if !have_vulkan() {
        return;
    }
    let out = baton(&["devices", "--json"]);
    assert!(out.status.success());
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains("\"name\":\"vulkan:0\"") && json.contains("\"backend\":\"vulkan\""), "{json}");

    let out = baton(&["conformance", "--devices", "vulkan:0", "--filter", "w_"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("w_hold") && stdout.contains(" 0 failed"), "{stdout}");

    // Two logical devices cannot wait natively on each other's timelines
    // (W-FOREIGN): the suite's expected failures, each with its reason.
    let out = baton(&["conformance", "--devices", "vulkan:0,vulkan:0", "--filter", "_order"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for rule in ["w_order", "m_order"] {
        let line = stdout.lines().find(|l| l.contains(rule)).unwrap_or_else(|| panic!("no {rule}: {stdout}"));
        assert!(line.trim_start().starts_with("expected"), "{line}");
    }
    assert!(stdout.contains("why: streams of vulkan:0#2 cannot wait natively"), "{stdout}");
    assert!(stdout.contains("1 passed, 2 expected failures, 0 failed"), "{stdout}");
    let out = baton(&["conformance", "--devices", "vulkan:0,vulkan:0", "--filter", "w_order", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let rows: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON array");
    assert_eq!(rows[0]["outcome"], "expected", "{stdout}");
    assert!(rows[0]["why"].as_str().is_some_and(|w| w.contains("W-FOREIGN")), "{stdout}");

    let (_dir, model) = tiny("vulkan");
    for devices in ["vulkan:0", "cpu,vulkan:0"] {
        let out = baton(&["run", "-m", &model, "-p", "hello world", "-n", "4", "--temp", "0", "--devices", devices]);
        assert!(out.status.success(), "run on {devices}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A consumer that cannot wait natively on the producer's timeline (a
    // CPU stream on a Vulkan semaphore, one Vulkan device on another's) is
    // served by the relay, and the plan says so; a Vulkan stream waits
    // natively on a CPU device's host-memory timeline.
    for devices in ["vulkan:0,cpu", "vulkan:0,vulkan:0"] {
        let out = baton(&["plan", "-m", &model, "--devices", devices, "-p", "4"]);
        let plan = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "plan on {devices}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(plan.contains("relay wait") && !plan.contains("native wait"), "plan on {devices}: {plan}");
    }
    let out = baton(&["plan", "-m", &model, "--devices", "cpu,vulkan:0", "-p", "4"]);
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "plan on cpu,vulkan:0: {}", String::from_utf8_lossy(&out.stderr));
    assert!(plan.contains("native wait") && !plan.contains("relay wait"), "plan on cpu,vulkan:0: {plan}");
}

/// A mixture of experts on a Vulkan device is refused before loading, the
/// device named (its shaders do not have the experts' ops), alone or
/// holding some layers; the CPU runs it.
#[test]
fn experts_on_vulkan_are_refused_with_the_device_named() {
    if !have_vulkan() {
        return;
    }
    let dir = baton_testkit::TempDir::new("cli-vulkan-experts");
    let path = dir.file("moe.gguf").to_string_lossy().into_owned();
    let out = baton(&["model", "synth", "--shape", "qwen3moe", "--type", "q8_0", "-o", &path]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    for devices in ["vulkan:0", "cpu,vulkan:0"] {
        let out = baton(&["run", "-m", &path, "-p", "hello", "-n", "2", "--temp", "0", "--devices", devices]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "ran experts on {devices}");
        assert!(stderr.contains("vulkan:0 does not run a mixture of experts"), "{devices}: {stderr}");
    }
    let out = baton(&["run", "-m", &path, "-p", "hello", "-n", "2", "--temp", "0", "--devices", "cpu"]);
    assert!(out.status.success(), "on the CPU: {}", String::from_utf8_lossy(&out.stderr));
    // llama.cpp's split: the layers on the GPU, their experts on the CPU
    // (added to the devices), by `--cpu-moe` and by `-ot exps=CPU`.
    for flags in [&["--cpu-moe"][..], &["-ot", "exps=CPU"][..]] {
        let mut args = vec!["run", "-m", &path, "-p", "hello", "-n", "4", "--temp", "0", "--devices", "vulkan:0"];
        args.extend_from_slice(flags);
        let out = baton(&args);
        assert!(out.status.success(), "{flags:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// `baton bench sync --devices vulkan:0` adds the device's host->device->host
/// row: timeline semaphore beside fence shader, p50/p99, as table and JSON.
#[test]
fn bench_sync_measures_vulkan_hand_offs() {
    let out = baton(&["bench", "sync", "--iterations", "20", "--devices", "cpu:0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("Vulkan devices"), "{stderr}");
    if !have_vulkan() {
        return;
    }
    let out = baton(&["bench", "sync", "--iterations", "40", "--devices", "vulkan:0", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(rows.iter().filter(|r| r["policy"].is_string()).count(), 12, "{stdout}");
    for mechanism in ["timeline_semaphore", "fence_shader"] {
        let row = rows
            .iter()
            .find(|r| r["device"] == "vulkan:0" && r["mechanism"] == mechanism)
            .unwrap_or_else(|| panic!("no {mechanism} row: {stdout}"));
        assert_eq!(row["measurement"], "host_device_host");
        let (p50, p99) = (row["p50_us"].as_f64(), row["p99_us"].as_f64());
        assert!(
            matches!((p50, p99), (Some(a), Some(b)) if a > 0.0 && b >= a && b < 1e6),
            "{mechanism}: p50 {p50:?}, p99 {p99:?}"
        );
        assert!(row["fence_timeouts"].as_u64().is_some_and(|t| t < 40), "{row}");
    }
    let out = baton(&["bench", "sync", "--iterations", "20", "--devices", "vulkan:0"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("| hand-off | timeline semaphore | fence shader |")
            && stdout.contains("| round trip host->vulkan:0->host | "),
        "{stdout}"
    );
}
