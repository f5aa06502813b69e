//! Shared helpers of the integration tests: a hand-byte GGUF builder (which
//! does not use the crate's writer, so it checks the format independently),
//! a sample valid file, and the malformed-file corpus with expected errors.

#[cfg(feature = "reference-tests")]
pub mod json;

use baton_gguf::{Array, GgmlType, GgufWriter, ReadError, Value};

/// Builds GGUF bytes field by field.
#[derive(Default, Clone)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version and counts.
    pub fn header(version: u32, tensors: u64, kvs: u64) -> Self {
        let mut raw = Raw(b"GGUF".to_vec());
        raw.u32(version).u64(tensors).u64(kvs);
        raw
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    pub fn string(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).bytes(s)
    }
    /// A metadata pair with a `u32` value.
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.string(key.as_bytes()).u32(4).u32(v)
    }
    /// A metadata pair whose type tag and value bytes are given raw.
    pub fn kv_raw(&mut self, key: &str, tag: u32, value: &[u8]) -> &mut Self {
        self.string(key.as_bytes()).u32(tag).bytes(value)
    }
    pub fn tensor_info(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.string(name.as_bytes()).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    /// Zero padding up to a multiple of `align`.
    pub fn pad(&mut self, align: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    pub fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    pub fn build(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// IEEE half bits of an f32 that is zero or a normal f16 exactly.
pub fn f16_bits(x: f32) -> u16 {
    if x == 0.0 {
        return 0;
    }
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    assert!((1..31).contains(&exp), "{x} is not a normal f16");
    assert_eq!(bits & 0x1fff, 0, "{x} is not exact in f16");
    sign | ((exp as u16) << 10) | ((bits >> 13) & 0x3ff) as u16
}

/// Little-endian bytes of f32 values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Tensor payloads of [`sample_file`]: an F32 3x2, an F16 4, a Q4_0 32x2.
pub fn sample_tensors() -> Vec<(&'static str, Vec<u64>, GgmlType, Vec<u8>)> {
    let f16: Vec<u8> = [1.0f32, -2.0, 0.5, 0.0].iter().flat_map(|&v| f16_bits(v).to_le_bytes()).collect();
    vec![
        ("a.f32", vec![3, 2], GgmlType::F32, f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
        ("b.f16", vec![4], GgmlType::F16, f16),
        ("c.q4_0", vec![32, 2], GgmlType::Q4_0, (0..36u8).collect()),
    ]
}

/// Metadata of [`sample_file`]: one pair of every value type.
pub fn sample_metadata() -> Vec<(&'static str, Value)> {
    vec![
        ("general.architecture", "llama".into()),
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-100)),
        ("t.u16", Value::U16(60000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(0.25)),
        ("t.bool", Value::Bool(true)),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(-1e300)),
        ("t.strings", vec!["<s>", "é", ""].into()),
        ("t.scores", vec![0.5f32, -1.5].into()),
        ("t.nested", Value::Array(Array::Array(vec![Array::I32(vec![1, -2]), Array::Bool(vec![])]))),
    ]
}

/// A valid file exercising every value type and three tensor types.
pub fn sample_file() -> Vec<u8> {
    let tensors = sample_tensors();
    let mut writer = GgufWriter::new();
    for (key, value) in sample_metadata() {
        writer.add_metadata(key, value).expect("sample metadata is valid");
    }
    for (name, dims, ty, data) in &tensors {
        writer.add_tensor(*name, dims, *ty, data).expect("sample tensors are valid");
    }
    let mut out = Vec::new();
    writer.write_to(&mut out).expect("writing to a Vec cannot fail");
    out
}

/// A predicate on the error a malformed file must give.
pub type Expect = fn(&ReadError) -> bool;

/// The malformed corpus: file name (the defect), bytes, expected error.
pub fn malformed_cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let one_tensor = |dims: &[u64], ty: u32, offset: u64, data: usize| {
        let mut r = Raw::header(3, 1, 0);
        r.tensor_info("t", dims, ty, offset).pad(32).zeros(data);
        r.build()
    };
    let two_tensors = |name2: &str, offset2: u64| {
        let mut r = Raw::header(3, 2, 0);
        r.tensor_info("a", &[16], 0, 0).tensor_info(name2, &[16], 0, offset2).pad(32).zeros(128);
        r.build()
    };
    let mut nested = Raw::header(3, 0, 1);
    nested.string(b"deep");
    nested.u32(9);
    for _ in 0..20 {
        nested.u32(9).u64(1);
    }
    nested.u32(0).u64(0);

    vec![
        (
            "bad_magic.gguf",
            {
                let mut r = Raw(b"GGML".to_vec());
                r.u32(3).u64(0).u64(0);
                r.build()
            },
            |e| matches!(e, ReadError::BadMagic { offset: 0, found } if found == b"GGML"),
        ),
        ("unsupported_version_1.gguf", Raw::header(1, 0, 0).build(), |e| {
            matches!(e, ReadError::UnsupportedVersion { offset: 4, found: 1 })
        }),
        (
            "big_endian_version.gguf",
            {
                let mut r = Raw(b"GGUF".to_vec());
                r.bytes(&3u32.to_be_bytes()).u64(0).u64(0);
                r.build()
            },
            |e| matches!(e, ReadError::UnsupportedVersion { found: 0x0300_0000, .. }),
        ),
        ("truncated_header.gguf", Raw::header(3, 0, 0).0[..12].to_vec(), |e| {
            matches!(e, ReadError::Truncated { offset: 8, what: "tensor count", needed: 8, remaining: 4 })
        }),
        ("huge_tensor_count.gguf", Raw::header(3, u64::MAX / 2, 0).build(), |e| {
            matches!(e, ReadError::CountTooLarge { offset: 8, what: "tensor count", .. })
        }),
        ("huge_metadata_count.gguf", Raw::header(3, 0, 1 << 40).build(), |e| {
            matches!(e, ReadError::CountTooLarge { offset: 16, what: "metadata count", .. })
        }),
        (
            "huge_key_length.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.u64(u64::MAX).bytes(b"key").u32(4).u32(0);
                r.build()
            },
            |e| matches!(e, ReadError::LengthTooLarge { offset: 24, what: "metadata key", len: u64::MAX, .. }),
        ),
        (
            "huge_array_length.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.string(b"arr").u32(9).u32(8).u64(1 << 50).zeros(64);
                r.build()
            },
            |e| matches!(e, ReadError::LengthTooLarge { what: "array", len: 0x4_0000_0000_0000, .. }),
        ),
        (
            "invalid_utf8_key.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.string(&[0x66, 0xff, 0xfe]).u32(4).u32(0);
                r.build()
            },
            |e| matches!(e, ReadError::InvalidUtf8 { offset: 32, what: "metadata key" }),
        ),
        (
            "invalid_utf8_string_value.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.string(b"k").u32(8).string(&[0xc3]);
                r.build()
            },
            |e| matches!(e, ReadError::InvalidUtf8 { what: "string value", .. }),
        ),
        (
            "unknown_value_type.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.kv_raw("k", 13, &[0; 8]);
                r.build()
            },
            |e| matches!(e, ReadError::UnknownValueType { offset: 33, found: 13 }),
        ),
        (
            "invalid_bool.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.kv_raw("k", 7, &[2]);
                r.build()
            },
            |e| matches!(e, ReadError::InvalidBool { offset: 37, found: 2 }),
        ),
        ("deeply_nested_array.gguf", nested.build(), |e| matches!(e, ReadError::NestingTooDeep { max_depth: 8, .. })),
        (
            "duplicate_key.gguf",
            {
                let mut r = Raw::header(3, 0, 2);
                r.kv_u32("k", 1).kv_u32("k", 2);
                r.build()
            },
            |e| matches!(e, ReadError::DuplicateKey { offset: 41, key } if key == "k"),
        ),
        (
            "bad_alignment.gguf",
            {
                let mut r = Raw::header(3, 0, 1);
                r.kv_u32("general.alignment", 3);
                r.build()
            },
            |e| matches!(e, ReadError::BadAlignment { .. }),
        ),
        (
            "zero_dims.gguf",
            one_tensor(&[], 0, 0, 0),
            |e| matches!(e, ReadError::BadDimCount { n_dims: 0, tensor, .. } if tensor == "t"),
        ),
        ("too_many_dims.gguf", one_tensor(&[1, 1, 1, 1, 1], 0, 0, 4), |e| {
            matches!(e, ReadError::BadDimCount { n_dims: 5, .. })
        }),
        ("dims_overflow.gguf", one_tensor(&[1 << 32, 1 << 32], 0, 0, 0), |e| {
            matches!(e, ReadError::DimsOverflow { .. })
        }),
        (
            "unknown_ggml_type.gguf",
            one_tensor(&[32], 4, 0, 32),
            |e| matches!(e, ReadError::UnknownGgmlType { id: 4, tensor, .. } if tensor == "t"),
        ),
        ("not_block_aligned.gguf", one_tensor(&[31], 2, 0, 32), |e| {
            matches!(e, ReadError::NotBlockAligned { dim0: 31, block_elems: 32, .. })
        }),
        (
            "duplicate_tensor_name.gguf",
            two_tensors("a", 64),
            |e| matches!(e, ReadError::DuplicateTensor { name, .. } if name == "a"),
        ),
        ("misaligned_offset.gguf", one_tensor(&[4], 0, 8, 64), |e| {
            matches!(e, ReadError::MisalignedTensor { data_offset: 8, alignment: 32, .. })
        }),
        ("offset_past_end.gguf", one_tensor(&[4], 0, 1 << 20, 64), |e| {
            matches!(e, ReadError::TensorOutOfBounds { .. })
        }),
        ("offset_overflows.gguf", one_tensor(&[4], 0, u64::MAX - 31, 64), |e| {
            matches!(e, ReadError::TensorOutOfBounds { end: u64::MAX, .. })
        }),
        ("tensor_data_truncated.gguf", one_tensor(&[16], 0, 0, 63), |e| {
            matches!(e, ReadError::TensorOutOfBounds { .. })
        }),
        (
            "overlapping_tensors.gguf",
            two_tensors("b", 32),
            |e| matches!(e, ReadError::TensorOverlap { tensor, other, .. } if tensor == "b" && other == "a"),
        ),
    ]
}
