//! The conformance crate's own tests, one test binary (`--test it`).

mod rules_cover_the_contract;
