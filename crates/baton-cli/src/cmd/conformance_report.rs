//! The verdicts of `baton conformance`, on this machine's devices or across
//! ranks (`conformance_ranks`): a table, or JSON rows.

use baton_conformance::Outcome;

/// One check's verdict.
pub(crate) struct Row {
    pub(crate) kind: &'static str,
    pub(crate) name: &'static str,
    pub(crate) outcome: Outcome,
    pub(crate) ms: f64,
}

/// Prints the verdicts (a table, or JSON rows with `json`) of the suite on
/// `name`; returns how many failed.
pub(crate) fn print(rows: &[Row], json: bool, name: &str) -> usize {
    let count = |f: fn(&Outcome) -> bool| rows.iter().filter(|r| f(&r.outcome)).count();
    let passed = count(|o| *o == Outcome::Passed);
    let expected_failures = count(|o| matches!(o, Outcome::Expected { .. }));
    let unexpected_passes = count(|o| matches!(o, Outcome::UnexpectedPass { .. }));
    let failed = count(|o| !o.is_ok());
    if json {
        println!("[{}]", rows.iter().map(json_row).collect::<Vec<_>>().join(","));
        return failed;
    }
    println!("conformance on {name}:");
    for row in rows {
        println!("  {:<8}  {:<8} {:<30} {:>8.1} ms", row.outcome.word(), row.kind, row.name, row.ms);
        match &row.outcome {
            Outcome::Passed => {}
            Outcome::Failed(message) => println!("        {}", first_line(message)),
            Outcome::Expected { why, message } => {
                println!("        why: {why}");
                println!("        got: {}", first_line(message));
            }
            Outcome::UnexpectedPass { why } => println!("        expected to fail ({why}), but passed"),
        }
    }
    let unexpected =
        if unexpected_passes > 0 { format!(" ({unexpected_passes} unexpected passes)") } else { String::new() };
    println!("{passed} passed, {expected_failures} expected failures, {failed} failed{unexpected}");
    failed
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("")
}

/// One row as a JSON object: `outcome` is `pass`, `fail`, `expected` or
/// `unexpected_pass`; `why` says why a failure is expected.
fn json_row(row: &Row) -> String {
    let (outcome, message, why) = match &row.outcome {
        Outcome::Passed => ("pass", "", ""),
        Outcome::Failed(m) => ("fail", m.as_str(), ""),
        Outcome::Expected { why, message } => ("expected", message.as_str(), why.as_str()),
        Outcome::UnexpectedPass { why } => ("unexpected_pass", "", why.as_str()),
    };
    format!(
        "{{\"kind\":\"{}\",\"name\":\"{}\",\"outcome\":\"{outcome}\",\"passed\":{},\"ms\":{:.1},\"message\":{},\"why\":{}}}",
        row.kind,
        row.name,
        row.outcome == Outcome::Passed,
        row.ms,
        crate::util::json::json_str(message),
        crate::util::json::json_str(why)
    )
}
