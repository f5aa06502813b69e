//! The weight types: what a weight matrix may hold, in one list.

use baton_core::DType;

/// The types a weight matrix can have: every type
/// [`matmul()`](crate::matmul()) multiplies and
/// [`dequantize_row`](crate::dequantize_row) decodes, which is every
/// real-valued [`DType`]. The CPU backend declares these as its weight types,
/// the llama loader accepts them and names them when it refuses a tensor.
pub const WEIGHT_TYPES: [DType; 15] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q8_0,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::MXFP4,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::Q8_K,
];

/// Whether `dtype` is one of the [`WEIGHT_TYPES`].
pub fn is_weight_type(dtype: DType) -> bool {
    WEIGHT_TYPES.contains(&dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_types_are_every_real_valued_type() {
        let real: Vec<DType> = DType::ALL.into_iter().filter(|t| t.is_float()).collect();
        let mut listed = WEIGHT_TYPES.to_vec();
        listed.sort_by_key(|t| t.ggml_id());
        assert_eq!(listed, real, "WEIGHT_TYPES against DType::ALL's real-valued types");
    }

    /// The README names the weight types in one sentence, which lists
    /// exactly these.
    #[test]
    fn the_readme_lists_every_weight_type() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
        let marker = "Weights may be of the types in `baton_kernels::WEIGHT_TYPES`:";
        let (_, after) = readme.split_once(marker).expect("the README's sentence on weight types");
        let list = after.split('.').next().unwrap_or_default().replace(" and ", ", ");
        let mut named: Vec<&str> = list.split(',').map(str::trim).collect();
        let mut names: Vec<&str> = WEIGHT_TYPES.iter().map(|t| t.name()).collect();
        named.sort_unstable();
        names.sort_unstable();
        assert_eq!(named, names, "the README's weight types against WEIGHT_TYPES");
    }
}
