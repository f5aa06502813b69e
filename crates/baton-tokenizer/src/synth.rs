//! A small, valid GPT-2-style vocabulary for random-weight test models.

use std::collections::{BTreeMap, HashMap};

use crate::bytes::byte_map;
use crate::config::{TokenType, TokenizerConfig};
use crate::pretokenize::PreTokenizer;

/// Text the synthetic merges are learned from (written for this crate).
const TRAINING_TEXT: &str = "\
The little robot woke up before the sun. It checked its battery, counted \
the tools on the shelf, and went outside to water the garden. There were \
twelve rows of beans, nine rows of carrots and one long row of tomatoes. \
\"Good morning,\" said the old gardener. \"Did you sleep well?\" The robot \
didn't sleep, but it liked the question, so it answered: \"I rested for \
8 hours and 15 minutes.\" They worked together until noon; then they sat \
in the shade and talked about the weather, the price of seeds in 2024, and \
whether the river would rise again this spring.\n\n\
Later that afternoon a storm came over the hills. The wind bent the young \
trees and the rain filled every bucket in the yard. The robot carried the \
chickens into the barn, one by one, while the gardener closed the windows. \
When the storm had passed, they walked along the fence to see what was \
broken. Only three posts had fallen, and the garden was still there. \
\"We're lucky,\" the gardener said. \"It could have been worse.\" The robot \
wrote a short note in its log: repair fence, check roof, buy 40 nails.\n\
That evening they ate soup by the fire and read an old book about ships, \
islands and the people who sailed between them a long time ago.\n";

/// The GPT-2-style special tokens of the synthetic vocabulary, ids 0, 1, 2.
pub const SYNTHETIC_SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// Builds a valid byte-level BPE configuration of exactly `vocab_size`
/// tokens (at least 259), for test models with random weights.
///
/// Ids 0..3 are the control tokens `<|endoftext|>` (BOS and EOS),
/// `<|im_start|>` and `<|im_end|>`; then the 256 byte tokens; then merges
/// learned greedily (most frequent adjacent pair first) from a built-in
/// English paragraph, pre-tokenized as `smollm`. When the paragraph runs out
/// of pairs, the rest is filled with `<|unused_N|>` tokens of type unused,
/// which no merge produces. Deterministic; well under a second for 32000.
pub fn synthetic_bpe(vocab_size: usize) -> TokenizerConfig {
    let target = vocab_size.max(SYNTHETIC_SPECIALS.len() + 256);
    let map = byte_map();
    let mut tokens: Vec<String> = SYNTHETIC_SPECIALS.iter().map(|s| (*s).to_owned()).collect();
    let mut types = vec![TokenType::Control.to_gguf(); tokens.len()];
    let first_byte_id = tokens.len() as u32;
    for byte in 0..=255u8 {
        tokens.push(map.char_of(byte).to_string());
        types.push(TokenType::Normal.to_gguf());
    }
    let mut ids: HashMap<String, u32> = tokens.iter().enumerate().map(|(id, t)| (t.clone(), id as u32)).collect();

    // Distinct words with their counts, in a fixed order.
    let mut split = Vec::new();
    PreTokenizer::SmolLm.split(TRAINING_TEXT, &mut split);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for word in split {
        *counts.entry(word).or_default() += 1;
    }
    let mut words: Vec<(Vec<u32>, usize)> = counts
        .into_iter()
        .map(|(word, count)| (word.bytes().map(|b| first_byte_id + u32::from(b)).collect(), count))
        .collect();

    let mut merges = Vec::new();
    while tokens.len() < target {
        let mut pairs: HashMap<(u32, u32), usize> = HashMap::new();
        for (word, count) in &words {
            for pair in word.windows(2) {
                *pairs.entry((pair[0], pair[1])).or_default() += count;
            }
        }
        // Most frequent, then smallest ids: independent of hash order.
        let Some((&(left, right), _)) = pairs.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))) else {
            break;
        };
        let (left_text, right_text) = (&tokens[left as usize], &tokens[right as usize]);
        merges.push(format!("{left_text} {right_text}"));
        let merged_text = format!("{left_text}{right_text}");
        let merged = match ids.get(&merged_text) {
            Some(&id) => id,
            None => {
                let id = tokens.len() as u32;
                ids.insert(merged_text.clone(), id);
                tokens.push(merged_text);
                types.push(TokenType::Normal.to_gguf());
                id
            }
        };
        for (word, _) in &mut words {
            let mut out = Vec::with_capacity(word.len());
            let mut i = 0;
            while i < word.len() {
                if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                    out.push(merged);
                    i += 2;
                } else {
                    out.push(word[i]);
                    i += 1;
                }
            }
            *word = out;
        }
    }
    let mut filler = 0;
    while tokens.len() < target {
        tokens.push(format!("<|unused_{filler}|>"));
        types.push(TokenType::Unused.to_gguf());
        filler += 1;
    }

    TokenizerConfig {
        model: "gpt2".to_owned(),
        pre: Some("smollm".to_owned()),
        tokens,
        scores: None,
        token_types: Some(types),
        merges: Some(merges),
        bos_id: Some(0),
        eos_id: Some(0),
        unk_id: None,
        pad_id: None,
        add_bos: Some(false),
        add_eos: Some(false),
        add_space_prefix: Some(false),
    }
}
