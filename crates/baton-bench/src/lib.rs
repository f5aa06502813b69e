//! The benchmarks of `baton bench`'s sub-commands, as library code the
//! binary calls (each with its arguments and its report):
//!
//! - `sync` and `gates`: what each wait policy of the core costs, single
//!   hand-offs between the host and CPU or Vulkan streams, and collectives
//!   over the pair of CPU devices of `pair`;
//! - `submit`: what a submission costs the host;
//! - `memory`: the machine's memory bandwidth (also `baton bench
//!   --roofline`'s);
//! - `serve`: a load generator for an OpenAI-compatible server (ours or
//!   another), over plain loopback HTTP;
//! - `stats`: the small statistics they and the model benchmark share.
//!
//! The model benchmark users run (`baton bench -p 512 -n 128`) stays in
//! the binary: it is llama-bench's table over `baton-model`'s `Model`.
//! These measure the runtime below a model (the core's sync contract on
//! two backends, so no one backend crate can hold them) or a server from
//! the outside, so they depend on the core and the backends only.

pub mod gates;
pub mod memory;
mod pair;
pub mod serve;
pub mod stats;
pub mod submit;
pub mod sync;
