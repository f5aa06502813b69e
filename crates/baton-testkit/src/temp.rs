//! Temporary directories that clean up after themselves.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells apart the directories one process makes with the same tag (the
/// tests of one binary run as threads of one process under `cargo test`).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A new directory under the system's temp dir, removed with everything in
/// it on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `baton-{tag}-{pid}-{n}` under the system's temp dir; `tag`
    /// says which test made it, should one be left behind.
    ///
    /// # Panics
    ///
    /// When the directory cannot be created (a test cannot go on without it).
    pub fn new(tag: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("baton-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` in the directory (the file need not exist).
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
