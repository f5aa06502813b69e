//! Where a node's bytes live on the device.

use ash::vk;

/// Memory a node's bytes live in: a buffer this device binds, the byte of
/// the node's first element, and the buffer's size.
#[derive(Clone, Copy)]
pub(crate) struct Span {
    pub(super) buffer: vk::Buffer,
    pub(super) offset: u64,
    pub(super) buffer_bytes: u64,
}
