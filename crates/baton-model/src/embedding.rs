//! Embeddings: a text's final hidden states pooled into one vector, which
//! `/v1/embeddings` then normalises, as llama-server does
//! (`Model::embed`, in `model/hidden.rs`, pools).

use std::str::FromStr;

use crate::error::ModelError;

/// How a sequence's per-token hidden states become one vector
/// (llama-server's `--pooling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over every token.
    #[default]
    Mean,
    /// The last token's.
    Last,
}

impl FromStr for Pooling {
    type Err = ModelError;

    fn from_str(name: &str) -> Result<Pooling, ModelError> {
        match name {
            "mean" => Ok(Pooling::Mean),
            "last" => Ok(Pooling::Last),
            other => Err(ModelError::Input(format!("unknown pooling {other:?}: the poolings are `mean` and `last`"))),
        }
    }
}

impl Pooling {
    /// Pools `hidden` (rows of `dim` values, at least one) into one vector.
    /// Sums run in f64.
    pub fn pool(self, hidden: &[f32], dim: usize) -> Vec<f32> {
        let rows = hidden.len() / dim.max(1);
        match self {
            Pooling::Mean => {
                let mut sum = vec![0f64; dim];
                for row in hidden.chunks_exact(dim) {
                    sum.iter_mut().zip(row).for_each(|(s, &x)| *s += f64::from(x));
                }
                sum.iter().map(|s| (s / rows.max(1) as f64) as f32).collect()
            }
            Pooling::Last => hidden[(rows.max(1) - 1) * dim..][..dim].to_vec(),
        }
    }
}

/// Scales `v` to unit Euclidean length (the sum in f64); a zero vector
/// stays zero.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x = (f64::from(*x) / norm) as f32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_last_pool_and_normalize_scales_to_unit_length() {
        let hidden = [3.0, 0.0, 1.0, 4.0];
        assert_eq!(Pooling::Mean.pool(&hidden, 2), vec![2.0, 2.0]);
        let mut last = Pooling::Last.pool(&hidden, 2);
        assert_eq!(last, vec![1.0, 4.0]);
        normalize(&mut last);
        let root = 17f64.sqrt();
        assert!((f64::from(last[0]) - 1.0 / root).abs() < 1e-7 && (f64::from(last[1]) - 4.0 / root).abs() < 1e-7);
        let mut zero = [0.0, 0.0];
        normalize(&mut zero);
        assert_eq!(zero, [0.0, 0.0], "a zero vector stays zero");
    }

    #[test]
    fn poolings_parse_by_name() {
        assert_eq!("last".parse::<Pooling>().ok(), Some(Pooling::Last));
        assert!("cls".parse::<Pooling>().is_err());
    }
}
