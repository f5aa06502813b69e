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

impl Comm {
    /// Checks that every rank passes the same `mine` for `what` (the
    /// arguments, a model file's identity): a collective, so every rank gets
    /// the same answer, and a mismatch is [`MpiError::Mismatch`] on every
    /// rank, naming the ranks that differ from rank 0.
    pub fn agree(&self, what: &str, mine: &[u8], bound: &RemoteBound) -> Result<(), MpiError> {
        let all = self.all_gather_bytes(mine, bound)?;
        let differ: Vec<usize> = (1..all.len()).filter(|&r| all[r] != all[0]).collect();
        if differ.is_empty() {
            return Ok(());
        }
        let show = |b: &[u8]| String::from_utf8_lossy(b).chars().take(200).collect::<String>();
        Err(MpiError::Mismatch {
            what: what.to_string(),
            ranks: differ.clone(),
            rank0: show(&all[0]),
            first_other: show(&all[differ[0]]),
        })
    }
}
