//! GPT-2's reversible byte <-> character mapping, and `<0xXX>` byte tokens.
//!
//! Byte-level BPE vocabularies store every byte as a printable character:
//! the bytes `!`..=`~`, `¡`..=`¬` and `®`..=`ÿ` stand for themselves, and the
//! other 68 bytes (controls, space, DEL, NBSP, soft hyphen) take the code
//! points U+0100 onwards in byte order (so space is `Ġ`, newline is `Ċ`).

use std::sync::OnceLock;

/// Both directions of the GPT-2 byte mapping.
pub(crate) struct ByteMap {
    to_char: [char; 256],
    /// Indexed by code point; every mapped char is below U+0144.
    from_char: [Option<u8>; 0x144],
}

fn keeps_itself(byte: u8) -> bool {
    matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The process-wide byte map.
pub(crate) fn byte_map() -> &'static ByteMap {
    static MAP: OnceLock<ByteMap> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut to_char = ['\0'; 256];
        let mut from_char = [None; 0x144];
        let mut next_shifted = 0x100u32;
        for byte in 0..=255u8 {
            let cp = if keeps_itself(byte) {
                u32::from(byte)
            } else {
                let cp = next_shifted;
                next_shifted += 1;
                cp
            };
            // Every value is below U+0144, a valid scalar value.
            let c = char::from_u32(cp).unwrap_or('\0');
            to_char[usize::from(byte)] = c;
            from_char[cp as usize] = Some(byte);
        }
        ByteMap { to_char, from_char }
    })
}

impl ByteMap {
    /// The character that stands for `byte`.
    pub(crate) fn char_of(&self, byte: u8) -> char {
        self.to_char[usize::from(byte)]
    }

    /// The byte a mapped character stands for, or `None` for other chars.
    pub(crate) fn byte_of(&self, c: char) -> Option<u8> {
        self.from_char.get(c as usize).copied().flatten()
    }

    /// Maps raw bytes to their byte-level text.
    pub(crate) fn encode_str(&self, bytes: &[u8]) -> String {
        bytes.iter().map(|&b| self.char_of(b)).collect()
    }

    /// Maps byte-level text back to bytes; characters outside the mapping
    /// (possible in hand-made vocabularies) keep their UTF-8 bytes.
    pub(crate) fn decode_str(&self, text: &str, out: &mut Vec<u8>) {
        for c in text.chars() {
            match self.byte_of(c) {
                Some(b) => out.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }
}

/// Parses a SentencePiece byte token `<0xXX>` (two hex digits).
pub(crate) fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection_with_gpt2_landmarks() {
        let map = byte_map();
        assert_eq!(map.char_of(b' '), 'Ġ');
        assert_eq!(map.char_of(b'\n'), 'Ċ');
        assert_eq!(map.char_of(b'\t'), 'ĉ');
        assert_eq!(map.char_of(b'a'), 'a');
        assert_eq!(map.char_of(0xAD), 'Ń');
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = map.char_of(b);
            assert!(seen.insert(c), "{c:?} used twice");
            assert_eq!(map.byte_of(c), Some(b));
        }
        assert_eq!(map.byte_of('€'), None);
    }

    #[test]
    fn byte_tokens_parse_only_the_exact_form() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xff>"), Some(255));
        assert_eq!(parse_byte_token("<0xA>"), None);
        assert_eq!(parse_byte_token("0x0A"), None);
    }
}
