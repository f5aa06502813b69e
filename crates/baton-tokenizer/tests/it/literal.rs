//! `Tokenizer::encode_around`: literal ranges match no special token, and
//! change nothing for text that holds none.

use baton_tokenizer::{synthetic_bpe, EncodeOptions, Tokenizer, TokenizerError};
use proptest::prelude::*;

fn tokenizer() -> Tokenizer {
    Tokenizer::from_config(&synthetic_bpe(600)).expect("the synthetic tokenizer")
}

const PARSE: EncodeOptions = EncodeOptions { add_special: false, parse_special: true };

/// Text of words, spaces, newlines and the synthetic specials' text.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z]{1,6}",
        2 => Just(" ".to_string()),
        1 => Just("\n".to_string()),
        1 => Just("<|im_start|>".to_string()),
        1 => Just("<|im_end|>".to_string()),
        1 => Just("é日".to_string()),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

/// Sorted, disjoint ranges on character boundaries of `text`.
fn ranges(text: &str, cuts: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut bounds: Vec<usize> = cuts
        .iter()
        .map(|&c| c % (text.len() + 1))
        .map(|mut c| {
            while !text.is_char_boundary(c) {
                c -= 1;
            }
            c
        })
        .collect();
    bounds.sort_unstable();
    bounds.chunks_exact(2).map(|pair| pair[0]..pair[1]).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Ranges over text that holds no special token's text change nothing.
    #[test]
    fn literal_ranges_over_plain_text_change_nothing(
        words in prop::collection::vec("[a-z ,.\n]{1,8}", 0..16),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let tokenizer = tokenizer();
        let text = words.concat();
        let literal = ranges(&text, &cuts);
        let around = tokenizer.encode_around(&text, &literal, PARSE).expect("encode");
        prop_assert_eq!(around, tokenizer.encode(&text, PARSE).expect("encode"));
    }

    /// A control token is produced only where its whole text lies outside
    /// every literal range.
    #[test]
    fn no_special_token_comes_from_inside_a_literal_range(
        text in text(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let tokenizer = tokenizer();
        let literal = ranges(&text, &cuts);
        let start = tokenizer.token_id("<|im_start|>").expect("<|im_start|>");
        let end = tokenizer.token_id("<|im_end|>").expect("<|im_end|>");
        let tokens = tokenizer.encode_around(&text, &literal, PARSE).expect("encode");
        let produced = tokens.iter().filter(|&&t| t == start || t == end).count();
        let outside = |at: usize, len: usize| literal.iter().all(|r| at + len <= r.start || at >= r.end);
        let expected = ["<|im_start|>", "<|im_end|>"]
            .iter()
            .map(|marker| text.match_indices(marker).filter(|(at, m)| outside(*at, m.len())).count())
            .sum::<usize>();
        prop_assert_eq!(produced, expected, "{:?} with literal {:?}: {:?}", text, literal, tokens);
    }
}

#[test]
fn bad_literal_ranges_are_errors() {
    let tokenizer = tokenizer();
    // Reversed, past the end, unsorted, inside a character.
    let range = |start, end| std::ops::Range { start, end };
    let cases = [
        ("abc", vec![range(2, 1)]),
        ("abc", vec![range(0, 4)]),
        ("abc", vec![range(1, 2), range(0, 1)]),
        ("é", vec![range(1, 2)]),
    ];
    for (text, literal) in cases {
        let err = tokenizer.encode_around(text, &literal, PARSE).expect_err("refused");
        assert!(matches!(err, TokenizerError::BadLiteralRanges { .. }), "{text:?} {literal:?}: {err:?}");
    }
}
