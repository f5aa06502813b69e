//! The registry: every kind's names parse, unknown names list the kinds,
//! and each kind enumerates what this machine has.

use super::*;

#[test]
fn every_kind_is_found_by_its_prefix_once() {
    for kind in KINDS {
        let found = find(kind.prefix()).expect("a listed kind is found");
        assert!(std::ptr::eq(found, kind), "{} found as {}", kind.prefix(), found.prefix());
        assert_eq!(KINDS.iter().filter(|k| k.prefix() == kind.prefix()).count(), 1, "{} listed twice", kind.prefix());
    }
    assert!(find("gpu").is_none(), "gpu is no kind");
}

#[test]
fn each_kind_parses_bare_indexed_and_ranked_names() {
    for kind in KINDS {
        let p = kind.prefix();
        let cases = [
            (p.to_string(), p.to_string(), None, None),
            (format!("{p}:3"), format!("{p}:3"), Some(3), None),
            (format!(" {p}:1@2 "), format!("{p}:1"), Some(1), Some(2)),
            (format!("{p}@0"), p.to_string(), None, Some(0)),
        ];
        for (name, local, index, rank) in cases {
            let parsed = DeviceName::parse(&name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
            assert!(std::ptr::eq(parsed.kind, kind), "{name:?} is of kind {}, read as {}", p, parsed.kind.prefix());
            assert_eq!((parsed.local, parsed.index, parsed.rank), (local.as_str(), index, rank), "{name:?}");
        }
    }
}

#[test]
fn an_unknown_kind_is_refused_with_every_known_kind() {
    for name in ["gpu:1", "cuda", "cpux", "@1"] {
        let error = DeviceName::parse(name).expect_err("no such kind").to_string();
        assert!(error.contains(&format!("unknown device {name:?}")), "{name:?}: {error}");
        for kind in KINDS {
            assert!(error.contains(&format!("`{}`", kind.prefix())), "{} missing from {error:?}", kind.prefix());
        }
    }
}

#[test]
fn bad_numbers_are_refused_with_the_name() {
    for (name, says) in [("cpu:x", "\"x\" after `cpu:` is not a device number"), ("vulkan:0@one", "\"one\" after `@`")]
    {
        let error = DeviceName::parse(name).expect_err("a bad number").to_string();
        assert!(error.contains(name) && error.contains(says), "{name:?}: {error}");
    }
}

#[test]
fn a_ranked_name_is_refused_outside_mpirun() {
    let error = open_devices("cpu:0,cpu@1", None).map(|d| d.len()).expect_err("a rank's device").to_string();
    assert!(error.contains("opening cpu: a device on rank 1"), "{error}");
}

#[test]
fn the_cpu_kind_enumerates_cpu_then_one_device_per_core() {
    let rows = find("cpu").expect("cpu is a kind").enumerate().expect("the CPU always enumerates");
    let cores = baton_cpu::topology::usable_cores().len();
    let names: Vec<&str> = rows.iter().map(|i| i.name.as_str()).collect();
    let expected: Vec<String> =
        std::iter::once("cpu".to_string()).chain((0..cores).map(|i| format!("cpu:{i}"))).collect();
    assert_eq!(names, expected, "cpu, then the per-core split");
}

#[test]
fn every_enumerated_device_is_of_its_kind_and_declares_its_weight_types() {
    for kind in KINDS {
        // Vulkan enumerates nothing without a driver: an error, not a panic.
        let Ok(rows) = kind.enumerate() else { continue };
        for info in rows {
            assert!(info.name.starts_with(kind.prefix()), "{} listed by {}", info.name, kind.prefix());
            assert_eq!(info.weight_types, kind.weight_types(), "{}", info.name);
        }
    }
}

#[test]
fn each_kind_opens_its_own_names() {
    let cpu = find("cpu").expect("cpu is a kind");
    let devices = cpu.open(&["cpu:0", "cpu:1"], &OpenOptions { threads: Some(1) }).expect("two cpu devices");
    let names: Vec<&str> = devices.iter().map(|d| d.info().name.as_str()).collect();
    assert_eq!(names, ["cpu:0", "cpu:1"]);
    let threads = cpu.open(&["cpu"], &OpenOptions { threads: Some(1) }).expect("cpu")[0].info().threads;
    assert_eq!(threads, 1, "-t sets a cpu device's threads");
}

#[test]
fn mixed_lists_open_in_the_lists_order() {
    let devices = open_devices("cpu:1,cpu:0", Some(1)).expect("two cpu devices");
    let names: Vec<&str> = devices.iter().map(|d| d.info().name.as_str()).collect();
    assert_eq!(names, ["cpu:1", "cpu:0"]);
}

#[test]
fn teardown_of_kinds_without_devices_is_immediate() {
    assert!(find("cpu").expect("cpu").teardown(std::time::Duration::ZERO), "cpu tears down on the dropping thread");
}
