//! Gathering what each rank says about itself: variable-length bytes.

use crate::bound::RemoteBound;
use crate::comm::Comm;
use crate::MpiError;

impl Comm {
    /// Every rank's `mine`, in rank order, on every rank (any lengths): an
    /// all-gather of the lengths, then of the bytes padded to the longest.
    /// For descriptions (device lists, arguments to compare), not tensors.
    pub fn all_gather_bytes(&self, mine: &[u8], bound: &RemoteBound) -> Result<Vec<Vec<u8>>, MpiError> {
        let size = self.size();
        let len = u32::try_from(mine.len())
            .map_err(|_| MpiError::BadBuffers { op: "all-gather of bytes", what: format!("{} bytes", mine.len()) })?;
        let mut lens = vec![0u32; size];
        self.all_gather(&mut vec![len], &mut lens, bound)?;
        let longest = lens.iter().copied().max().unwrap_or(0) as usize;
        let mut padded = mine.to_vec();
        padded.resize(longest, 0);
        let mut all = vec![0u8; longest * size];
        self.all_gather(&mut padded, &mut all, bound)?;
        Ok(all
            .chunks(longest.max(1))
            .zip(&lens)
            .map(|(chunk, &n)| chunk[..n as usize].to_vec())
            .chain(std::iter::repeat_n(Vec::new(), if longest == 0 { size } else { 0 }))
            .collect())
    }
}
