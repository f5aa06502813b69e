//! The metadata of a GGUF file: ordered key-value pairs with typed getters.
//!
//! Integer getters accept any integer type whose value fits the type asked
//! for, since GGUF writers differ (`u32` vs `i32` vs `u64` for the same key).
//! Float getters accept `f32` and `f64`. Errors name the key and the expected
//! versus found type.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::error::MetadataError;
use crate::value::{Array, Value};

/// Ordered metadata key-value pairs with unique keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

/// Turns a "missing key" error into `Ok(None)`, for optional keys:
/// `metadata.get_f32("llama.rope.freq_base").optional()?.unwrap_or(10000.0)`.
pub trait OptionalKey<T> {
    /// `Ok(Some(v))` for a value, `Ok(None)` if the key is absent, other
    /// errors unchanged.
    fn optional(self) -> Result<Option<T>, MetadataError>;
}

impl<T> OptionalKey<T> for Result<T, MetadataError> {
    fn optional(self) -> Result<Option<T>, MetadataError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(MetadataError::Missing { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn wrong_type(key: &str, expected: &'static str, found: &Value) -> MetadataError {
    MetadataError::WrongType { key: key.to_string(), expected, found: found.describe_type() }
}

macro_rules! integer_getter {
    ($(#[$doc:meta] $name:ident -> $t:ty),* $(,)?) => {
        $(
            #[$doc]
            pub fn $name(&self, key: &str) -> Result<$t, MetadataError> {
                let value = self.require(key)?;
                let wide = value
                    .as_integer()
                    .ok_or_else(|| wrong_type(key, stringify!($t), value))?;
                <$t>::try_from(wide).map_err(|_| MetadataError::OutOfRange {
                    key: key.to_string(),
                    expected: stringify!($t),
                    value: wide,
                })
            }
        )*
    };
}

impl Metadata {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a pair; gives the value back if the key is already present.
    pub fn insert(&mut self, key: String, value: Value) -> Result<(), (String, Value)> {
        if self.index.contains_key(&key) {
            return Err((key, value));
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the key is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The value of a key, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// All pairs in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// All keys in file order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The value of a key, or [`MetadataError::Missing`].
    pub fn require(&self, key: &str) -> Result<&Value, MetadataError> {
        self.get(key).ok_or_else(|| MetadataError::Missing { key: key.to_string() })
    }

    integer_getter! {
        /// An integer key as `u8`, from any integer type that fits.
        get_u8 -> u8,
        /// An integer key as `u16`, from any integer type that fits.
        get_u16 -> u16,
        /// An integer key as `u32`, from any integer type that fits.
        get_u32 -> u32,
        /// An integer key as `u64`, from any integer type that fits.
        get_u64 -> u64,
        /// An integer key as `usize`, from any integer type that fits.
        get_usize -> usize,
        /// An integer key as `i32`, from any integer type that fits.
        get_i32 -> i32,
        /// An integer key as `i64`, from any integer type that fits.
        get_i64 -> i64,
    }

    /// A float key as `f32`, from `f32` or `f64` (rounded).
    pub fn get_f32(&self, key: &str) -> Result<f32, MetadataError> {
        let value = self.require(key)?;
        match *value {
            Value::F32(v) => Ok(v),
            Value::F64(v) => Ok(v as f32),
            _ => Err(wrong_type(key, "f32", value)),
        }
    }

    /// A float key as `f64`, from `f32` or `f64`.
    pub fn get_f64(&self, key: &str) -> Result<f64, MetadataError> {
        let value = self.require(key)?;
        value.as_float().ok_or_else(|| wrong_type(key, "f64", value))
    }

    /// A bool key.
    pub fn get_bool(&self, key: &str) -> Result<bool, MetadataError> {
        match self.require(key)? {
            Value::Bool(v) => Ok(*v),
            other => Err(wrong_type(key, "bool", other)),
        }
    }

    /// A string key.
    pub fn get_str(&self, key: &str) -> Result<&str, MetadataError> {
        let value = self.require(key)?;
        value.as_str().ok_or_else(|| wrong_type(key, "string", value))
    }

    /// An array key, of any element type.
    pub fn get_array(&self, key: &str) -> Result<&Array, MetadataError> {
        let value = self.require(key)?;
        value.as_array().ok_or_else(|| wrong_type(key, "array", value))
    }

    /// An array of strings (e.g. `tokenizer.ggml.tokens`).
    pub fn get_str_array(&self, key: &str) -> Result<&[String], MetadataError> {
        let value = self.require(key)?;
        match value {
            Value::Array(Array::String(v)) => Ok(v),
            other => Err(wrong_type(key, "array of string", other)),
        }
    }

    /// An array of floats as `f32` (e.g. `tokenizer.ggml.scores`), borrowed
    /// if stored as `f32`, converted (rounded) if stored as `f64`.
    pub fn get_f32_array(&self, key: &str) -> Result<Cow<'_, [f32]>, MetadataError> {
        let value = self.require(key)?;
        match value {
            Value::Array(Array::F32(v)) => Ok(Cow::Borrowed(v)),
            Value::Array(Array::F64(v)) => Ok(Cow::Owned(v.iter().map(|&x| x as f32).collect())),
            other => Err(wrong_type(key, "array of f32", other)),
        }
    }

    /// An array of bools.
    pub fn get_bool_array(&self, key: &str) -> Result<&[bool], MetadataError> {
        match self.require(key)? {
            Value::Array(Array::Bool(v)) => Ok(v),
            other => Err(wrong_type(key, "array of bool", other)),
        }
    }
}

// The array getters need the variant name, which equals the element type name
// in upper case; spelled out per getter to keep the macro simple.
macro_rules! int_array_getters {
    ($($(#[$doc:meta])* $name:ident -> $t:ident via $variant:ident),* $(,)?) => {
        impl Metadata {
            $(
                $(#[$doc])*
                pub fn $name(&self, key: &str) -> Result<Cow<'_, [$t]>, MetadataError> {
                    let expected = concat!("array of ", stringify!($t));
                    let value = self.require(key)?;
                    let array = value.as_array().ok_or_else(|| wrong_type(key, expected, value))?;
                    if let Array::$variant(v) = array {
                        return Ok(Cow::Borrowed(v));
                    }
                    let wide = array.integers().ok_or_else(|| wrong_type(key, expected, value))?;
                    wide.into_iter()
                        .map(|x| {
                            $t::try_from(x).map_err(|_| MetadataError::OutOfRange {
                                key: key.to_string(),
                                expected: stringify!($t),
                                value: x,
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(Cow::Owned)
                }
            )*
        }
    };
}

int_array_getters! {
    /// An array of integers as `i32` (e.g. `tokenizer.ggml.token_type`), from
    /// any integer element type whose values fit; borrowed if stored as `i32`.
    get_i32_array -> i32 via I32,
    /// An array of integers as `u32`, from any integer element type whose
    /// values fit; borrowed if stored as `u32`.
    get_u32_array -> u32 via U32,
    /// An array of integers as `i64`, from any integer element type whose
    /// values fit; borrowed if stored as `i64`.
    get_i64_array -> i64 via I64,
    /// An array of integers as `u64`, from any integer element type whose
    /// values fit; borrowed if stored as `u64`.
    get_u64_array -> u64 via U64,
}

impl<'a> IntoIterator for &'a Metadata {
    type Item = (&'a str, &'a Value);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (String, Value)>, fn(&'a (String, Value)) -> (&'a str, &'a Value)>;

    fn into_iter(self) -> Self::IntoIter {
        fn pair(entry: &(String, Value)) -> (&str, &Value) {
            (entry.0.as_str(), &entry.1)
        }
        self.entries.iter().map(pair)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Metadata {
        let mut m = Metadata::new();
        let pairs: Vec<(&str, Value)> = vec![
            ("u32", Value::U32(7)),
            ("i32neg", Value::I32(-1)),
            ("u64big", Value::U64(u64::MAX)),
            ("i64", Value::I64(123)),
            ("f32", Value::F32(1.5)),
            ("f64", Value::F64(2.5)),
            ("str", "hello".into()),
            ("bool", true.into()),
            ("tokens", vec!["a", "b"].into()),
            ("scores", vec![0.5f32, -1.0].into()),
            ("types_u8", vec![1u8, 2, 3].into()),
            ("types_i32", vec![1i32, -2].into()),
            ("types_i64neg", vec![1i64, -2].into()),
        ];
        for (k, v) in pairs {
            assert!(m.insert(k.to_string(), v).is_ok());
        }
        m
    }

    #[test]
    fn integer_getters_accept_any_integer_that_fits() {
        let m = sample();
        assert_eq!(m.get_u32("u32"), Ok(7));
        assert_eq!(m.get_u64("i64"), Ok(123));
        assert_eq!(m.get_i32("i64"), Ok(123));
        assert_eq!(m.get_usize("u32"), Ok(7));
        assert_eq!(m.get_u8("u32"), Ok(7));
        assert_eq!(m.get_i64("i32neg"), Ok(-1));
    }

    #[test]
    fn integer_getters_report_out_of_range_with_key_and_value() {
        let m = sample();
        assert_eq!(
            m.get_u32("i32neg"),
            Err(MetadataError::OutOfRange { key: "i32neg".into(), expected: "u32", value: -1 })
        );
        assert!(matches!(m.get_i64("u64big"), Err(MetadataError::OutOfRange { .. })));
    }

    #[test]
    fn getters_report_expected_and_found_types() {
        let m = sample();
        assert_eq!(
            m.get_u32("str"),
            Err(MetadataError::WrongType { key: "str".into(), expected: "u32", found: "string".into() })
        );
        let err = m.get_str_array("scores").unwrap_err();
        assert_eq!(err.to_string(), "metadata key \"scores\": expected array of string, found array of f32");
        assert!(matches!(m.get_f32("u32"), Err(MetadataError::WrongType { .. })));
        assert!(matches!(m.get_bool("str"), Err(MetadataError::WrongType { .. })));
        assert_eq!(m.get_str("nope"), Err(MetadataError::Missing { key: "nope".into() }));
    }

    #[test]
    fn typed_scalar_and_array_getters() {
        let m = sample();
        assert_eq!(m.get_f32("f64"), Ok(2.5));
        assert_eq!(m.get_f64("f32"), Ok(1.5));
        assert_eq!(m.get_str("str"), Ok("hello"));
        assert_eq!(m.get_bool("bool"), Ok(true));
        assert_eq!(m.get_str_array("tokens").map(<[String]>::len), Ok(2));
        assert_eq!(m.get_f32_array("scores").as_deref(), Ok(&[0.5f32, -1.0][..]));
        assert!(matches!(m.get_i32_array("types_i32"), Ok(Cow::Borrowed(_))));
        assert_eq!(m.get_i32_array("types_u8").as_deref(), Ok(&[1, 2, 3][..]));
        assert_eq!(m.get_u64_array("types_u8").as_deref(), Ok(&[1u64, 2, 3][..]));
        assert!(matches!(m.get_u32_array("types_i64neg"), Err(MetadataError::OutOfRange { value: -2, .. })));
        assert!(matches!(m.get_i32_array("tokens"), Err(MetadataError::WrongType { .. })));
        assert_eq!(m.get_array("tokens").map(Array::len), Ok(2));
    }

    #[test]
    fn optional_maps_only_missing_to_none() {
        let m = sample();
        assert_eq!(m.get_u32("absent").optional(), Ok(None));
        assert_eq!(m.get_u32("u32").optional(), Ok(Some(7)));
        assert!(m.get_u32("str").optional().is_err());
    }

    #[test]
    fn insert_rejects_duplicates_and_keeps_order() {
        let mut m = sample();
        assert!(m.insert("u32".into(), Value::U8(1)).is_err());
        let keys: Vec<&str> = m.keys().collect();
        assert_eq!(keys[0], "u32");
        assert_eq!(keys.len(), 13);
        assert_eq!((&m).into_iter().count(), 13);
    }
}
