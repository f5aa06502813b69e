//! Synthetic llama models (`baton_synth::write_synth_model`) written where a test can
//! load them and removed after it.

use std::path::PathBuf;

use baton_core::DType;
use baton_synth::{write_synth_model, SynthShape, SynthSpec};

use crate::TempDir;

/// Writes the synthetic model of `shape`, `dtype` and `seed` as
/// `{shape}-{dtype}.gguf` in a new [`TempDir`] tagged `tag`; the model lasts
/// as long as the directory.
///
/// # Panics
///
/// When the model cannot be written.
pub fn synth_model(tag: &str, shape: SynthShape, dtype: DType, seed: u64) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let path = dir.file(&format!("{shape}-{dtype}.gguf"));
    write_synth_model(&SynthSpec { shape, dtype, seed }, &path)
        .unwrap_or_else(|e| panic!("writing the synthetic model {}: {e}", path.display()));
    (dir, path)
}

/// [`synth_model`] of the `tiny` shape.
pub fn tiny_model(tag: &str, dtype: DType, seed: u64) -> (TempDir, PathBuf) {
    synth_model(tag, SynthShape::Tiny, dtype, seed)
}
