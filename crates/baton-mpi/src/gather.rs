//! Gathering what each rank says about itself: variable-length bytes.

use std::os::raw::{c_int, c_void};

use mpi::ffi;

use crate::bound::RemoteBound;
use crate::comm::Comm;
use crate::wire::Wire;
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

impl Comm {
    /// Every rank's `send` concatenated in rank order into every rank's
    /// `recv`, where rank `r` sends `counts[r]` values (`MPI_Iallgatherv`):
    /// an all-gather of uneven parts, as a tensor split over devices of
    /// unequal shares gives. Every rank passes the same `counts`.
    pub fn all_gather_uneven<T: Wire>(
        &self,
        send: &mut Vec<T>,
        recv: &mut Vec<T>,
        counts: &[usize],
        bound: &RemoteBound,
    ) -> Result<(), MpiError> {
        let op = "uneven all-gather";
        let bad = |what: String| MpiError::BadBuffers { op, what };
        if counts.len() != self.size() {
            return Err(bad(format!("{} counts for {} ranks", counts.len(), self.size())));
        }
        if send.len() != counts[self.rank()] || recv.len() != counts.iter().sum::<usize>() {
            let what = format!("send has {}, recv {} values for counts {counts:?}", send.len(), recv.len());
            return Err(bad(what));
        }
        let to_int = |n: usize| c_int::try_from(n).map_err(|_| bad(format!("{n} values exceed MPI's count range")));
        // MPI reads these until the operation completes: leaked below if
        // it does not.
        let sizes = counts.iter().map(|&n| to_int(n)).collect::<Result<Vec<c_int>, _>>()?;
        let mut displacements = Vec::with_capacity(sizes.len());
        let mut at = 0usize;
        for &n in counts {
            displacements.push(to_int(at)?);
            at += n;
        }
        if at == 0 {
            return Ok(());
        }
        let mine = sizes[self.rank()];
        let peers = self.peers();
        let described = format!("uneven all-gather of {at} {}", T::NAME);
        let (sizes_at, displacements_at) = (sizes.as_ptr(), displacements.as_ptr());
        let done = self.bounded(&described, &peers, bound, &mut [send, recv], |s, comm, b, reqs| {
            reqs.push(null_request());
            let (first, rest) = b.split_at_mut(1);
            // SAFETY: the buffers live until the request completes or are
            // leaked (`bounded`), the count and displacement arrays until it
            // completes or are leaked below; `recv` holds the sum of the
            // counts, and the two vectors are distinct.
            let code = s.call(|| unsafe {
                ffi::MPI_Iallgatherv(
                    first[0].as_ptr().cast::<c_void>(),
                    mine,
                    T::datatype(),
                    rest[0].as_mut_ptr().cast::<c_void>(),
                    sizes_at,
                    displacements_at,
                    T::datatype(),
                    comm.0,
                    &mut reqs[0],
                )
            });
            s.check("MPI_Iallgatherv", code)
        });
        if done.is_err() {
            std::mem::forget(sizes);
            std::mem::forget(displacements);
        }
        done.map(drop)
    }
}

fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading a predefined MPI constant.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}
