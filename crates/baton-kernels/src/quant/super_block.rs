//! The K-quant super-block's shape, shared by every K-quant format, its
//! fitting (`kfit`) and the kernels: 256 values in groups of 16.

/// Elements per super-block of every K-quant.
pub const SUPER_ELEMS: usize = 256;
/// Elements per scale group (the finest sub-block of any K-quant).
pub(crate) const GROUP_ELEMS: usize = 16;
/// Scale groups per super-block.
pub(crate) const GROUPS: usize = SUPER_ELEMS / GROUP_ELEMS;
/// 32-value chunks per super-block (the unit of one 256-bit register).
pub(crate) const CHUNKS: usize = SUPER_ELEMS / 32;
