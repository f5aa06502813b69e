//! Baton's scheduler: places the nodes of a graph on devices, cuts the
//! graph into splits (runs of nodes on one device), and runs them with
//! asynchronous copies between devices.
//!
//! Depends on baton-core alone and drives every backend through its
//! `Device` trait; baton-model runs its graphs with it, and baton-cli
//! reads its traces.
//!
//! - [`Plan`]: placement (groups, bound memory, weights), splits, the copies
//!   of each run with their bytes and how each edge is synchronised, and the
//!   layout of crossing tensors. `Display` prints it (`baton plan`).
//! - [`Runner`]: one stream per device; every split waits only on the points
//!   of the splits that feed it, copies run on the consumer's stream after a
//!   wait on the producer's point, and the host does not block between
//!   splits. Up to `copies` runs are in flight, each with its own crossing
//!   buffers; a later run never overwrites what an earlier one still reads.
//! - [`RemoteEdges`]: devices of other processes (ranks): the runner runs
//!   only its own devices' splits, and a crossing between processes is a
//!   send on the producer's stream and a receive on the consumer's.
//! - [`Trace`]: a Chrome trace-event file with a track per stream.
#![deny(missing_docs)]

mod bound;
mod error;
mod placement;
mod plan;
mod planning;
mod remote;
mod run;
mod runner;
mod split;
mod trace;

pub use error::SchedError;
pub use placement::place;
pub use plan::{DeviceArena, EdgePath, Plan, PlannedCopy, SyncPath};
pub use remote::RemoteEdges;
pub use run::{Run, RunPoints};
pub use runner::{CallerBindings, Runner, RunnerStats};
pub use split::{cut, LeafSource, Split, SplitLeaf};
pub use trace::{GateProfile, Trace};
