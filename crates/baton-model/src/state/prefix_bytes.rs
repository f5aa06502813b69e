//! A [`SavedPrefix`] as bytes and back, so a saved state outlives its
//! process (Python's `LlamaState` pickles): a tag, the positions, whether it
//! is a checkpoint, the frontier, then each chunk's length and bytes, all
//! integers little-endian. Reading checks the shape only; restoring
//! checks the chunks against the cache's geometry
//! ([`Model::restore_prefix`](crate::Model::restore_prefix)).

use super::prefix::SavedPrefix;
use crate::ModelError;

/// What the bytes start with (the format's name and version).
const TAG: &[u8; 8] = b"BATONKV1";

impl SavedPrefix {
    /// The bytes [`from_bytes`](Self::from_bytes) reads back.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes() + 33 + 8 * self.chunks.len());
        out.extend_from_slice(TAG);
        out.extend_from_slice(&(self.len as u64).to_le_bytes());
        out.push(u8::from(self.recurrent_only));
        out.extend_from_slice(&(self.frontier as u64).to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u64).to_le_bytes());
        for chunk in &self.chunks {
            out.extend_from_slice(&(chunk.len() as u64).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    /// A saved prefix from [`to_bytes`](Self::to_bytes)'s bytes; bytes of
    /// another shape (cut, another tag, counts past their end) are
    /// [`ModelError::Config`], naming what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<SavedPrefix, ModelError> {
        let rest = bytes.strip_prefix(TAG).ok_or_else(|| bad("not a Baton saved state (its tag differs)"))?;
        let mut read = Reader { rest };
        let len = read.number("length")?;
        let recurrent_only = match read.take(1, "kind")? {
            [0] => false,
            [1] => true,
            other => return Err(bad(&format!("its kind is {other:?}, not 0 or 1"))),
        };
        let frontier = read.number("frontier")?;
        if frontier < len {
            return Err(bad(&format!("its frontier {frontier} is before its length {len}")));
        }
        let count = read.number("chunk count")?;
        let mut chunks = Vec::with_capacity(count.min(bytes.len() / 8));
        for i in 0..count {
            let size = read.number(&format!("chunk {i}'s size"))?;
            chunks.push(read.take(size, &format!("chunk {i}"))?.to_vec());
        }
        if !read.rest.is_empty() {
            return Err(bad(&format!("{} bytes after its last chunk", read.rest.len())));
        }
        Ok(SavedPrefix { len, recurrent_only, frontier, chunks })
    }
}

fn bad(why: &str) -> ModelError {
    ModelError::Config(format!("a saved state's bytes: {why}"))
}

/// The bytes not read yet.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The next `n` bytes, those of `what`.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        if n > self.rest.len() {
            return Err(bad(&format!("cut in its {what} ({n} bytes, {} left)", self.rest.len())));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// The next little-endian u64, `what`, as a usize.
    fn number(&mut self, what: &str) -> Result<usize, ModelError> {
        let head = self.take(8, what)?;
        let value = u64::from_le_bytes(head.try_into().map_err(|_| bad(what))?);
        usize::try_from(value).map_err(|_| bad(&format!("its {what} {value} does not fit")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_back_as_saved_and_bad_bytes_are_errors() {
        let saved =
            SavedPrefix { len: 3, recurrent_only: false, frontier: 5, chunks: vec![vec![1, 2, 3], vec![], vec![9]] };
        let bytes = saved.to_bytes();
        let back = SavedPrefix::from_bytes(&bytes).expect("reads back");
        assert_eq!((back.len, back.recurrent_only, back.frontier, &back.chunks), (3, false, 5, &saved.chunks));
        for cut in 0..bytes.len() {
            let error = SavedPrefix::from_bytes(&bytes[..cut]).expect_err("cut");
            assert!(error.to_string().contains("saved state's bytes"), "{cut}: {error}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(SavedPrefix::from_bytes(&longer).is_err(), "a byte after the last chunk");
        let mut huge = bytes.clone();
        huge[TAG.len() + 17..TAG.len() + 25].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(SavedPrefix::from_bytes(&huge).is_err(), "a chunk count past the end");
        let mut kind = bytes;
        kind[TAG.len() + 8] = 7;
        assert!(SavedPrefix::from_bytes(&kind).is_err(), "a kind of 7");
    }
}
