//! Host memory of gates: the vectors a gate's input is read into and its
//! result is written from, reused from one gate to the next.

use std::sync::Arc;

use baton_core::backend::{as_bytes, as_bytes_mut, HostSlot};
use baton_core::loom::Mutex;

/// Free vectors kept at most (a gate takes two; a few gates in flight).
const KEPT: usize = 8;

/// The free host vectors of one rank stream's gates.
#[derive(Clone, Default)]
pub(crate) struct Pool(Arc<Mutex<Vec<Vec<f32>>>>);

impl Pool {
    /// A vector of `len` values: a free one (its old values left in place:
    /// every user overwrites all of them), else a new one of zeros.
    pub(crate) fn take(&self, len: usize) -> Vec<f32> {
        let mut free = self.0.lock();
        match free.iter().position(|v| v.len() == len) {
            Some(at) => free.swap_remove(at),
            None => vec![0f32; len],
        }
    }

    /// Gives `v` back (dropped when enough are kept; an empty one, left
    /// behind by an operation whose buffers stay with MPI, is ignored).
    pub(crate) fn put(&self, v: Vec<f32>) {
        if v.is_empty() {
            return;
        }
        let mut free = self.0.lock();
        if free.len() < KEPT {
            free.push(v);
        }
    }
}

/// A gate's result: filled by its host function, drained by the stream's
/// write; its vector goes back to the pool when the last holder (the
/// stream, once the write is done) lets it go.
pub(crate) struct Staged {
    values: Mutex<Vec<f32>>,
    pool: Pool,
}

impl Staged {
    pub(crate) fn new(pool: Pool) -> Staged {
        Staged { values: Mutex::new(Vec::new()), pool }
    }

    /// Sets the result.
    pub(crate) fn fill(&self, values: Vec<f32>) {
        *self.values.lock() = values;
    }
}

impl HostSlot for Staged {
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        f(as_bytes(&self.values.lock()));
    }
    fn with_bytes_mut(&self, f: &mut dyn FnMut(&mut [u8])) {
        f(as_bytes_mut(&mut self.values.lock()));
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.pool.put(std::mem::take(&mut *self.values.lock()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_given_back_is_taken_again_for_the_same_length_only() {
        let pool = Pool::default();
        let mut v = pool.take(4);
        v[0] = 7.0;
        pool.put(v);
        assert_eq!(pool.take(5).len(), 5, "another length is a new vector");
        assert_eq!(pool.take(4)[0], 7.0, "the same length reuses the vector given back");
        assert_eq!(pool.take(4)[0], 0.0, "and only once");
    }

    #[test]
    fn a_staged_result_goes_back_to_the_pool_when_dropped() {
        let pool = Pool::default();
        let staged = Staged::new(pool.clone());
        staged.fill(vec![3.0; 6]);
        drop(staged);
        assert_eq!(pool.take(6)[0], 3.0);
    }
}
