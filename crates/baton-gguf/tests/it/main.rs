//! The GGUF reader's and writer's tests, one test binary (`--test it`):
//! malformed files, truncation, reading and writing, property round trips,
//! and, behind features, the real model (`model-tests`) and the Python
//! `gguf` package (`reference-tests`).

mod malformed;
mod model;
mod read_write;
mod reference;
mod roundtrip;
mod support;
mod truncation;
