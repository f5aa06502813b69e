//! baton-serve's HTTP tests, one binary: the server harness, the endpoints,
//! hostile input, shutdown and connection limits, and (feature
//! `fault-injection`) what a panic in the engine does.

mod call_kit;
#[path = "../kit/mod.rs"]
mod kit;
mod server;

mod anthropic;
mod auth;
mod choices;
mod cors;
mod echo;
mod embeddings;
mod grammar;

#[cfg(feature = "fault-injection")]
mod faults;
mod gemma4_tools;
mod harmony;
mod hostile;
mod hostile_schemas;
mod http;
mod json_format;
mod llama_extras;
mod llama_routes;
mod logit_bias;
mod model_name;
mod native_completion;
mod parallel_calls;
mod reasoning;
mod responses;
mod routes_without_v1;
mod shutdown;
mod slots;
mod spec;
mod spec_mtp;
mod template_calls;
mod tools;
mod xml_tools;
