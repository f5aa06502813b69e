//! The list of device kinds, and finding one by its prefix.

use super::kind::Kind;
use super::{cpu, vulkan};

/// Every device kind, in the order `baton devices` lists them.
pub static KINDS: [&Kind; 2] = [&cpu::CPU, &vulkan::VULKAN];

/// The kind whose name prefix is `prefix` (`cpu`, `vulkan`).
pub fn find(prefix: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.prefix() == prefix)
}

/// The kinds and the names each takes, for messages: "`cpu` (`cpu`,
/// `cpu:0,cpu:1,...`), `vulkan` (...)".
pub fn known_kinds() -> String {
    KINDS.iter().map(|k| format!("`{}` ({})", k.prefix(), k.forms())).collect::<Vec<_>>().join(", ")
}
