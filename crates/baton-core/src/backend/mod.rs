//! The backend contract: devices, buffers, streams (docs/contract.md).
//!
//! Two layers, as in `lock_api`: a backend implements the unsafe raw traits
//! ([`RawBuffer`], [`RawStream`]) whose `# Safety` sections list what it must
//! guarantee; users hold the safe types ([`Buffer`], [`Stream`]) that own host
//! buffers while work uses them and order every device-memory access.

mod bindings;
mod buffer;
mod device;
mod error;
mod hazard;
mod host;
mod path;
mod stream;
mod tracking;

pub use bindings::{Bindings, BoundGraph, SharedGraph};
pub use buffer::{Buffer, BufferRange, RawBuffer, TensorRef};
pub use device::{into_devices, Device, DeviceInfo, DeviceKind, DeviceMemory, FileRange, IntoDevice};
pub use error::{DeviceError, StreamError};
pub use hazard::{HazardReport, RacingAccess};
pub use host::{as_bytes, as_bytes_mut, Element, HostBytes, HostSlot, Pending, PendingError};
pub use path::{CopyPath, WaitPath};
pub use stream::{RawStream, Stream, StreamOp};

#[cfg(all(test, not(loom)))]
mod tests;
