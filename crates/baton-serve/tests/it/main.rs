//! baton-serve's HTTP tests, one binary: the server harness, the endpoints,
//! hostile input, shutdown and connection limits, and (feature
//! `fault-injection`) what a panic in the engine does.

mod server;

mod auth;
mod echo;
mod embeddings;

#[cfg(feature = "fault-injection")]
mod faults;
mod hostile;
mod hostile_schemas;
mod http;
mod json_format;
mod logit_bias;
mod shutdown;
mod tools;
