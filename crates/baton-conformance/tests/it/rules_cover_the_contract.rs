//! Every rule of docs/contract.md has its test, and every test its rule.

use std::collections::BTreeSet;

/// Rules checked elsewhere: H-BORROW by a compile-fail doc test of
/// `Stream::write_async`, G-NUMERIC by the op cases.
const ELSEWHERE: [&str; 2] = ["h_borrow", "g_numeric"];

#[test]
fn every_contract_rule_has_a_test_and_every_test_a_rule() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/contract.md"))
        .expect("docs/contract.md");
    let rules: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .filter(|id| id.len() > 2 && id.contains('-') && id.chars().all(|c| c.is_ascii_uppercase() || c == '-'))
        .map(|id| id.to_lowercase().replace('-', "_"))
        .collect();
    let tests: BTreeSet<String> = baton_conformance::CONTRACT_RULES.iter().map(|(n, _)| n.to_string()).collect();
    let missing: Vec<&String> =
        rules.iter().filter(|r| !tests.contains(*r) && !ELSEWHERE.contains(&r.as_str())).collect();
    let orphans: Vec<&String> = tests.iter().filter(|t| !rules.contains(*t)).collect();
    assert!(rules.len() >= 20, "found only {} rules in docs/contract.md", rules.len());
    assert!(missing.is_empty(), "rules without a test: {missing:?}");
    assert!(orphans.is_empty(), "tests without a rule: {orphans:?}");
}

#[test]
fn an_unsupported_rule_must_fail_and_a_listed_rule_that_passes_is_an_error() {
    let listed = baton_conformance::expected::listed_unsupported(&["w_foreign"]);
    assert_eq!(listed[0].rule, "w_foreign");
    // Listed and failing: fine (an expected failure).
    baton_conformance::run_rule("w_foreign", &listed, &|| panic!("not supported here"));
    // Listed but passing: an error.
    let passing = std::panic::catch_unwind(|| baton_conformance::run_rule("w_foreign", &listed, &|| {}));
    assert!(passing.is_err(), "a listed rule that passes must fail the test");
    // Not listed: runs as is.
    baton_conformance::run_rule("q_fifo", &listed, &|| {});
    // A list naming no rule is an error.
    let unknown = std::panic::catch_unwind(|| baton_conformance::expected::listed_unsupported(&["no_such_rule"]));
    assert!(unknown.is_err());
}
