//! All-reduce by a butterfly over point-to-point messages: the fallback
//! where MPI's own collective is missing or slower, and its baseline.
//!
//! Recursive doubling, as baton-composite's in-process `Butterfly` does it: ranks past
//! the largest power of two `p` send their values to rank `r - p`, which
//! adds them (`x[r] + x[r + p]`); then `log2(p)` exchanges with rank
//! `r ^ mask`, each adding the peer's sum; then the folded ranks receive
//! the result. Every rank ends with the same bits (IEEE addition is
//! commutative, and both sides of an exchange add the same two sums), in
//! the tree order [`tree_sum`] computes: with 2 ranks `x0 + x1`, with 3
//! `(x0 + x2) + x1`, with 4 `(x0 + x1) + (x2 + x3)`.
//!

/// The butterfly's sum of one element over every rank's value, in its
/// order: what every rank's result equals bit for bit.
pub fn tree_sum(values: &[f32]) -> f32 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let mut cur: Vec<f32> = values[..p].to_vec();
    for i in 0..n - p {
        cur[i] += values[p + i];
    }
    let mut mask = 1;
    while mask < p {
        let next: Vec<f32> = (0..p).map(|r| cur[r] + cur[r ^ mask]).collect();
        cur = next;
        mask <<= 1;
    }
    cur[0]
}

#[cfg(feature = "mpi")]
mod over_mpi {
    use crate::bound::RemoteBound;
    use crate::comm::{Comm, RESERVED_TAGS};
    use crate::MpiError;

    impl Comm {
        /// All-reduce (sum) of `data` in place over point-to-point messages,
        /// bounded per step; `scratch` receives (same length; its contents
        /// are overwritten). Every rank gets the same bits, in
        /// [`tree_sum`](crate::tree_sum)'s order.
        pub fn butterfly_all_reduce_sum(
            &self,
            data: &mut Vec<f32>,
            scratch: &mut Vec<f32>,
            bound: &RemoteBound,
        ) -> Result<(), MpiError> {
            if scratch.len() != data.len() {
                let what = format!("data has {} values, scratch {}", data.len(), scratch.len());
                return Err(MpiError::BadBuffers { op: "butterfly all-reduce", what });
            }
            let (rank, n) = (self.rank(), self.size());
            let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
            let fold = RESERVED_TAGS;
            let serve = RESERVED_TAGS + 1;
            if rank >= p {
                self.send_raw(rank - p, fold, data, bound)?;
                self.recv_raw(rank - p, serve, data, bound)?;
                return Ok(());
            }
            if rank + p < n {
                self.recv_raw(rank + p, fold, scratch, bound)?;
                add_into(data, scratch);
            }
            let mut mask = 1;
            let mut step = 2;
            while mask < p {
                self.exchange(rank ^ mask, RESERVED_TAGS + step, data, scratch, bound)?;
                add_into(data, scratch);
                mask <<= 1;
                step += 1;
            }
            if rank + p < n {
                self.send_raw(rank + p, serve, data, bound)?;
            }
            Ok(())
        }
    }

    fn add_into(sum: &mut [f32], other: &[f32]) {
        for (s, o) in sum.iter_mut().zip(other) {
            *s += *o;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tree_sum;

    #[test]
    fn the_tree_order_of_two_ranks_is_the_plain_sum_and_of_three_folds_the_third_into_the_first() {
        let x = [0.1f32, 0.2, 0.3, 0.7];
        assert_eq!(tree_sum(&x[..1]).to_bits(), x[0].to_bits());
        assert_eq!(tree_sum(&x[..2]).to_bits(), (x[0] + x[1]).to_bits());
        assert_eq!(tree_sum(&x[..3]).to_bits(), ((x[0] + x[2]) + x[1]).to_bits());
        assert_eq!(tree_sum(&x).to_bits(), ((x[0] + x[1]) + (x[2] + x[3])).to_bits());
    }
}
