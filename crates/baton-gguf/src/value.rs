//! Metadata values: the thirteen GGUF value types, scalars and (nested) arrays.

use std::fmt;

/// The type tag of a metadata value, as stored in the file (`u32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// `uint8`
    U8 = 0,
    /// `int8`
    I8 = 1,
    /// `uint16`
    U16 = 2,
    /// `int16`
    I16 = 3,
    /// `uint32`
    U32 = 4,
    /// `int32`
    I32 = 5,
    /// `float32`
    F32 = 6,
    /// `bool`, one byte, 0 or 1
    Bool = 7,
    /// UTF-8 string: `u64` length, then bytes
    String = 8,
    /// array: element type `u32`, `u64` length, then elements
    Array = 9,
    /// `uint64`
    U64 = 10,
    /// `int64`
    I64 = 11,
    /// `float64`
    F64 = 12,
}

impl ValueType {
    /// The type with this tag, if it is one of the thirteen.
    pub fn from_u32(tag: u32) -> Option<Self> {
        Some(match tag {
            0 => Self::U8,
            1 => Self::I8,
            2 => Self::U16,
            3 => Self::I16,
            4 => Self::U32,
            5 => Self::I32,
            6 => Self::F32,
            7 => Self::Bool,
            8 => Self::String,
            9 => Self::Array,
            10 => Self::U64,
            11 => Self::I64,
            12 => Self::F64,
            _ => return None,
        })
    }

    /// The tag stored in the file.
    pub fn as_u32(self) -> u32 {
        self as u32
    }

    /// The fewest bytes one value of this type takes in a file (an empty
    /// string or array still has its header); used to bound counts.
    pub fn min_encoded_bytes(self) -> u64 {
        match self {
            Self::U8 | Self::I8 | Self::Bool => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 | Self::String => 8,
            Self::Array => 12,
        }
    }

    /// Lower-case name used in messages (`"u32"`, `"string"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::U8 => "u8",
            Self::I8 => "i8",
            Self::U16 => "u16",
            Self::I16 => "i16",
            Self::U32 => "u32",
            Self::I32 => "i32",
            Self::F32 => "f32",
            Self::Bool => "bool",
            Self::String => "string",
            Self::Array => "array",
            Self::U64 => "u64",
            Self::I64 => "i64",
            Self::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `uint8`
    U8(u8),
    /// `int8`
    I8(i8),
    /// `uint16`
    U16(u16),
    /// `int16`
    I16(i16),
    /// `uint32`
    U32(u32),
    /// `int32`
    I32(i32),
    /// `float32`
    F32(f32),
    /// `bool`
    Bool(bool),
    /// UTF-8 string
    String(String),
    /// homogeneous array
    Array(Array),
    /// `uint64`
    U64(u64),
    /// `int64`
    I64(i64),
    /// `float64`
    F64(f64),
}

/// A homogeneous array; each variant holds the elements of one value type.
///
/// Arrays of arrays hold inner arrays that may each have a different element
/// type, as in the file format.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// `uint8` elements
    U8(Vec<u8>),
    /// `int8` elements
    I8(Vec<i8>),
    /// `uint16` elements
    U16(Vec<u16>),
    /// `int16` elements
    I16(Vec<i16>),
    /// `uint32` elements
    U32(Vec<u32>),
    /// `int32` elements
    I32(Vec<i32>),
    /// `float32` elements
    F32(Vec<f32>),
    /// `bool` elements
    Bool(Vec<bool>),
    /// string elements
    String(Vec<String>),
    /// nested arrays
    Array(Vec<Array>),
    /// `uint64` elements
    U64(Vec<u64>),
    /// `int64` elements
    I64(Vec<i64>),
    /// `float64` elements
    F64(Vec<f64>),
}

impl Value {
    /// The value's type tag.
    pub fn value_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    /// The value widened to `i128` if it is an integer of any width.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Self::U8(v) => v.into(),
            Self::I8(v) => v.into(),
            Self::U16(v) => v.into(),
            Self::I16(v) => v.into(),
            Self::U32(v) => v.into(),
            Self::I32(v) => v.into(),
            Self::U64(v) => v.into(),
            Self::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The value as `f64` if it is `f32` or `f64`.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A description of the type for messages: `"u32"`, `"array of string"`.
    pub fn describe_type(&self) -> String {
        match self {
            Self::Array(a) => format!("array of {}", a.element_type()),
            other => other.value_type().name().to_string(),
        }
    }

    /// How deeply arrays nest in this value (0 for scalars, 1 for a flat array).
    pub fn nesting_depth(&self) -> usize {
        match self {
            Self::Array(a) => a.nesting_depth(),
            _ => 0,
        }
    }
}

impl Array {
    /// The element type.
    pub fn element_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::String(v) => v.len(),
            Self::Array(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements widened to `i128`, if the element type is an integer.
    pub fn integers(&self) -> Option<Vec<i128>> {
        fn widen<T: Copy + Into<i128>>(v: &[T]) -> Vec<i128> {
            v.iter().map(|&x| x.into()).collect()
        }
        Some(match self {
            Self::U8(v) => widen(v),
            Self::I8(v) => widen(v),
            Self::U16(v) => widen(v),
            Self::I16(v) => widen(v),
            Self::U32(v) => widen(v),
            Self::I32(v) => widen(v),
            Self::U64(v) => widen(v),
            Self::I64(v) => widen(v),
            _ => return None,
        })
    }

    /// How deeply arrays nest (1 for a flat array).
    pub fn nesting_depth(&self) -> usize {
        match self {
            Self::Array(inner) => 1 + inner.iter().map(Array::nesting_depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(
            impl From<$t> for Value {
                fn from(v: $t) -> Self {
                    Value::$variant(v)
                }
            }
            impl From<Vec<$t>> for Array {
                fn from(v: Vec<$t>) -> Self {
                    Array::$variant(v)
                }
            }
            impl From<Vec<$t>> for Value {
                fn from(v: Vec<$t>) -> Self {
                    Value::Array(Array::$variant(v))
                }
            }
        )*
    };
}

value_from! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64,
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::String(v.to_string())
    }
}

impl From<Array> for Value {
    fn from(v: Array) -> Self {
        Value::Array(v)
    }
}

impl From<Vec<Array>> for Array {
    fn from(v: Vec<Array>) -> Self {
        Array::Array(v)
    }
}

impl From<Vec<&str>> for Value {
    fn from(v: Vec<&str>) -> Self {
        Value::Array(Array::String(v.into_iter().map(str::to_string).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_tags_round_trip() {
        for tag in 0..13 {
            let ty = ValueType::from_u32(tag).expect("tags 0..13 are defined");
            assert_eq!(ty.as_u32(), tag);
        }
        assert_eq!(ValueType::from_u32(13), None);
    }

    #[test]
    fn integers_widen_and_describe() {
        assert_eq!(Value::I8(-3).as_integer(), Some(-3));
        assert_eq!(Value::U64(u64::MAX).as_integer(), Some(u64::MAX.into()));
        assert_eq!(Value::F32(1.0).as_integer(), None);
        assert_eq!(Value::from(vec!["a", "b"]).describe_type(), "array of string");
        let nested = Value::Array(Array::Array(vec![Array::U8(vec![]), Array::Array(vec![])]));
        assert_eq!(nested.nesting_depth(), 2);
    }
}
