//! Small, valid vocabularies for random-weight test models: byte-level BPE
//! (GGUF `gpt2`) and SentencePiece-style BPE (GGUF `gemma4`), their merges
//! learned greedily from one built-in paragraph.

use std::collections::{BTreeMap, HashMap};

use crate::bytes::byte_map;
use crate::config::{TokenType, TokenizerConfig};
use crate::pretokenize::PreTokenizer;
use crate::spm::SPACE_MARKER;
use crate::spm_bpe::newline_runs;

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

/// The control tokens of the synthetic Gemma-4-style vocabulary, ids 0..:
/// padding, EOS, BOS, then the turn and thinking-channel markers. Id 3 is
/// `<unk>` (unknown).
pub const SYNTHETIC_GEMMA4_SPECIALS: [&str; 3] = ["<pad>", "<eos>", "<bos>"];

/// The Gemma-4-style chat markers that follow `<unk>`: a turn opens with
/// `<|turn>` and ends with `<turn|>`; a thought is `<|channel>` … `<channel|>`;
/// `<|think|>` in the system turn asks for one. The channel markers are
/// user-defined tokens (always rendered, as Gemma 4's converter types them),
/// the others control tokens.
pub const SYNTHETIC_GEMMA4_MARKERS: [&str; 5] = ["<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>"];

/// The Gemma-4-style tool markers that follow the chat markers: a tool's
/// declaration `<|tool>` … `<tool|>`, a call `<|tool_call>` … `<tool_call|>`,
/// a result `<|tool_response>` … `<tool_response|>`, and `<|"|>`, which
/// opens and closes a string in a call's arguments. User-defined tokens
/// (always rendered), as in Gemma 4's files; `<|tool_response>` is loaded
/// as a control token, as llama.cpp loads it (`end_of_generation.rs`: the
/// model writes it after a call for the results to follow, and the
/// generation ends there).
pub const SYNTHETIC_GEMMA4_TOOL_MARKERS: [&str; 7] =
    ["<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"];

/// The longest run of newlines the Gemma-4-style vocabulary holds as one
/// token (as Gemma 4's does), so that no run of newlines is merged.
const NEWLINE_RUNS: usize = 31;

/// A vocabulary under construction: texts, GGUF types and the id of each text.
struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    ids: HashMap<String, u32>,
}

impl Vocab {
    fn new() -> Self {
        Vocab { tokens: Vec::new(), types: Vec::new(), ids: HashMap::new() }
    }

    /// Adds `text` (or finds it) and returns its id.
    fn add(&mut self, text: String, kind: TokenType) -> u32 {
        if let Some(&id) = self.ids.get(&text) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.ids.insert(text.clone(), id);
        self.tokens.push(text);
        self.types.push(kind.to_gguf());
        id
    }

    /// Learns merges from `words` (distinct symbol sequences and their
    /// counts), most frequent adjacent pair first, until the vocabulary has
    /// `target` tokens or no pair is left; returns the merge rules.
    fn learn_merges(&mut self, mut words: Vec<(Vec<u32>, usize)>, target: usize) -> Vec<String> {
        let mut merges = Vec::new();
        while self.tokens.len() < target {
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
            let (left_text, right_text) = (&self.tokens[left as usize], &self.tokens[right as usize]);
            merges.push(format!("{left_text} {right_text}"));
            let merged = self.add(format!("{left_text}{right_text}"), TokenType::Normal);
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
        merges
    }

    /// Fills the vocabulary to `target` tokens with unused tokens named by `name`.
    fn fill_unused(&mut self, target: usize, name: impl Fn(usize) -> String) {
        let mut filler = 0;
        while self.tokens.len() < target {
            self.add(name(filler), TokenType::Unused);
            filler += 1;
        }
    }
}

/// Distinct words with their counts, in a fixed order, each as the symbol
/// ids `symbols` gives.
fn counted_words<'a>(
    words: impl IntoIterator<Item = &'a str>,
    mut symbols: impl FnMut(&str) -> Vec<u32>,
) -> Vec<(Vec<u32>, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for word in words {
        *counts.entry(word).or_default() += 1;
    }
    counts.into_iter().map(|(word, count)| (symbols(word), count)).collect()
}

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
    let mut vocab = Vocab::new();
    for special in SYNTHETIC_SPECIALS {
        vocab.add(special.to_owned(), TokenType::Control);
    }
    let byte_ids: Vec<u32> =
        (0..=255u8).map(|byte| vocab.add(map.char_of(byte).to_string(), TokenType::Normal)).collect();
    let mut split = Vec::new();
    PreTokenizer::SmolLm.split(TRAINING_TEXT, &mut split);
    let words = counted_words(split, |word| word.bytes().map(|b| byte_ids[usize::from(b)]).collect());
    let merges = vocab.learn_merges(words, target);
    vocab.fill_unused(target, |n| format!("<|unused_{n}|>"));

    TokenizerConfig {
        model: "gpt2".to_owned(),
        pre: Some("smollm".to_owned()),
        tokens: vocab.tokens,
        scores: None,
        token_types: Some(vocab.types),
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

/// Builds a valid Gemma-4-style configuration (`tokenizer.ggml.model =
/// gemma4`: SentencePiece-style BPE) of exactly `vocab_size` tokens (at
/// least what its fixed part needs, about 360), laid out as Gemma 4's:
///
/// - ids 0..3 `<pad>`, `<eos>`, `<bos>` (control), 3 `<unk>` (unknown),
///   then the chat markers [`SYNTHETIC_GEMMA4_MARKERS`] and the tool
///   markers [`SYNTHETIC_GEMMA4_TOOL_MARKERS`];
/// - the 256 byte tokens `<0x00>`..`<0xFF>` (type byte);
/// - runs of 1 to 31 newlines, each one token;
/// - every other character of the built-in English paragraph, spaces as `▁`;
/// - merges learned greedily from the paragraph's lines (as the encoder
///   splits them: at newline runs, spaces as `▁`), then `<unused_N>`
///   fillers.
///
/// BOS is added (`add_bos_token` true, as in Gemma 4's files); no scores,
/// no pre-tokenizer name (llama.cpp ignores both for `gemma4`).
pub fn synthetic_gemma4(vocab_size: usize) -> TokenizerConfig {
    let mut vocab = Vocab::new();
    for special in SYNTHETIC_GEMMA4_SPECIALS {
        vocab.add(special.to_owned(), TokenType::Control);
    }
    let unk = vocab.add("<unk>".to_owned(), TokenType::Unknown);
    for marker in SYNTHETIC_GEMMA4_MARKERS {
        let rendered = marker.contains("channel");
        vocab.add(marker.to_owned(), if rendered { TokenType::UserDefined } else { TokenType::Control });
    }
    for marker in SYNTHETIC_GEMMA4_TOOL_MARKERS {
        vocab.add(marker.to_owned(), TokenType::UserDefined);
    }
    for byte in 0..=255u8 {
        vocab.add(format!("<0x{byte:02X}>"), TokenType::Byte);
    }
    for run in 1..=NEWLINE_RUNS {
        vocab.add("\n".repeat(run), TokenType::Normal);
    }
    let escaped: String = TRAINING_TEXT.chars().map(|c| if c == ' ' { SPACE_MARKER } else { c }).collect();
    let mut chars: Vec<char> = escaped.chars().filter(|&c| c != '\n').collect();
    chars.sort_unstable();
    chars.dedup();
    for c in chars {
        vocab.add(c.to_string(), TokenType::Normal);
    }
    let target = vocab_size.max(vocab.tokens.len());
    let lines = newline_runs(&escaped).filter(|run| !run.starts_with('\n'));
    let words = counted_words(lines, |line| line.chars().map(|c| vocab.ids[&c.to_string()]).collect());
    let merges = vocab.learn_merges(words, target);
    vocab.fill_unused(target, |n| format!("<unused{n}>"));

    TokenizerConfig {
        model: "gemma4".to_owned(),
        pre: None,
        tokens: vocab.tokens,
        scores: None,
        token_types: Some(vocab.types),
        merges: Some(merges),
        bos_id: Some(2),
        eos_id: Some(1),
        unk_id: Some(unk),
        pad_id: Some(0),
        add_bos: Some(true),
        add_eos: Some(false),
        add_space_prefix: Some(false),
    }
}
