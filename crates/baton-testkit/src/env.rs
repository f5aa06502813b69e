//! What the tests read from their environment: whether a missing Vulkan
//! driver fails them, and where the independent references are (the
//! interpreter, the scripts, the model), all set by `scripts/test.sh`.

use std::path::{Path, PathBuf};

/// Whether a missing Vulkan driver is a failure rather than a skip: in CI
/// (`CI` set and not `false`) or when `BATON_REQUIRE_VULKAN=1`.
pub fn vulkan_required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
        || std::env::var("BATON_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
}

/// The Python interpreter of the references (`BATON_PYTHON`, the one
/// `scripts/setup-python.sh` prints: a venv with numpy, gguf, jinja2).
///
/// # Panics
///
/// When `BATON_PYTHON` is unset: a reference test cannot run without it.
pub fn python() -> String {
    std::env::var("BATON_PYTHON").unwrap_or_else(|_| {
        panic!(
            "BATON_PYTHON is unset: run the tests through scripts/test.sh, or set it to the \
             interpreter `bash scripts/setup-python.sh` prints"
        )
    })
}

/// A reference script of `tests/reference/` at the workspace's root, by
/// file name (`llama_ref.py`).
pub fn reference_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/reference").join(name)
}

/// The SmolLM2 model (`BATON_SMOLLM2`, the path `scripts/fetch-smollm2.sh`
/// prints).
///
/// # Panics
///
/// When `BATON_SMOLLM2` is unset or names no file.
pub fn smollm2() -> PathBuf {
    let path = PathBuf::from(std::env::var("BATON_SMOLLM2").expect("BATON_SMOLLM2 is not set: run scripts/test.sh"));
    assert!(path.exists(), "{} is missing: run scripts/fetch-smollm2.sh", path.display());
    path
}
