//! A rank's own failure, told to its peers at once.
//!
//! A silent rank is found by the deadline; a rank that fails with an error
//! (its device, its stream, an MPI call) says so instead: it sends the
//! first cause to every peer on the liveness communicator, each peer's
//! responder thread records it, and every remote operation of that peer
//! then fails at its next test with [`MpiError::PeerFailed`], well before
//! its deadline. A timeout is not told: every peer reaches its own
//! deadline and names the silent ranks itself.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;

use mpi::ffi;

use crate::shared::{PeerFailure, Shared};
use crate::MpiError;

/// The tag of a failure notice (its payload: the cause, UTF-8).
pub(crate) const NOTICE: c_int = 20_000;

/// Tells every peer that this rank failed with `cause`, once per process
/// (later failures follow from the first). Never blocks and never fails:
/// a peer that is gone is no reason to fail differently.
pub(crate) fn announce(shared: &Shared, cause: &str) {
    if shared.announced.swap(true, Ordering::AcqRel) || shared.finalizing.load(Ordering::Acquire) {
        return;
    }
    // Leaked: the sends are never waited for, so MPI may read it any time.
    let text: &'static [u8] = Box::leak(cause.as_bytes().to_vec().into_boxed_slice());
    let Ok(len) = c_int::try_from(text.len()) else { return };
    for peer in (0..shared.size).filter(|&p| p != shared.rank) {
        // SAFETY: a null request is a valid value for MPI to overwrite.
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `text` is leaked (valid for the process's life); the
        // control communicator lives until finalisation, which has not
        // begun (checked above).
        let code = shared.call(|| unsafe {
            ffi::MPI_Isend(
                text.as_ptr().cast::<c_void>(),
                len,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                NOTICE,
                shared.control.0,
                &mut request,
            )
        });
        if code != ffi::MPI_SUCCESS as i32 {
            tracing::warn!("rank {}: could not tell rank {peer} of its failure (MPI error {code})", shared.rank);
        }
        // The request is left to complete on its own (never freed).
    }
}

/// Receives one waiting failure notice, if any, and records the first
/// (`Ok(false)`: none waits).
pub(crate) fn receive_one(shared: &Shared) -> Result<bool, MpiError> {
    let mut flag: c_int = 0;
    // SAFETY: a zeroed MPI_Status is a valid place for MPI to write to.
    let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
    // SAFETY: the control communicator is live while the responder runs;
    // flag and status are live places.
    let code = shared
        .call(|| unsafe { ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, NOTICE, shared.control.0, &mut flag, &mut status) });
    shared.check("MPI_Iprobe", code)?;
    if flag == 0 {
        return Ok(false);
    }
    let mut len: c_int = 0;
    // SAFETY: the status is the probed message's; `len` a live place.
    let code = shared.call(|| unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut len) });
    shared.check("MPI_Get_count", code)?;
    let mut text = vec![0u8; len.max(0) as usize];
    let from = status.MPI_SOURCE;
    // SAFETY: the probed message has `len` bytes and `text` holds as many;
    // the call completes before it returns.
    let code = shared.call(|| unsafe {
        ffi::MPI_Recv(
            text.as_mut_ptr().cast::<c_void>(),
            len,
            ffi::RSMPI_UINT8_T,
            from,
            NOTICE,
            shared.control.0,
            ffi::RSMPI_STATUS_IGNORE,
        )
    });
    shared.check("MPI_Recv", code)?;
    let failure = PeerFailure { rank: from as usize, cause: String::from_utf8_lossy(&text).into_owned() };
    shared.peer_failure.lock().get_or_insert(failure);
    shared.peer_failed.store(true, Ordering::Release);
    Ok(true)
}

/// The failure a peer told this rank about, if any (cheap when none).
pub(crate) fn peer_failure(shared: &Shared) -> Option<PeerFailure> {
    if !shared.peer_failed.load(Ordering::Acquire) {
        return None;
    }
    shared.peer_failure.lock().clone()
}
