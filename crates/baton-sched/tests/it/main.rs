//! The scheduler's tests, one test binary (`--test it`).

mod scheduler;
