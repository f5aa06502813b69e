//! The tokens llama.cpp takes for ends of generation by their text, and
//! types as control tokens whatever the file says: a file that types one
//! otherwise (Gemma 4's files make `<|tool_response>`, which the model
//! writes after a call for the results to follow, a user-defined token)
//! has it re-typed as control at load, as llama.cpp does ("control-looking
//! token … was not control-type … its type will be overridden"). A
//! control token is then parsed from text only when asked, rendered only
//! when asked, and ends a generation (the server stops at it).

use crate::config::TokenType;

/// The texts llama.cpp's vocabulary loading marks as ends of generation,
/// typing them as control.
pub(crate) const END_OF_GENERATION_TEXTS: [&str; 22] = [
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

/// Re-types as control each token of `tokens` whose text is one of
/// [`END_OF_GENERATION_TEXTS`].
pub(crate) fn type_as_control(tokens: &[String], types: &mut [TokenType]) {
    for (text, kind) in tokens.iter().zip(types.iter_mut()) {
        if *kind != TokenType::Control && END_OF_GENERATION_TEXTS.contains(&text.as_str()) {
            *kind = TokenType::Control;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_of_generation_texts_become_control_tokens_and_others_keep_their_type() {
        let tokens: Vec<String> =
            ["<|tool_response>", "<tool_response|>", "<turn|>", "a", "</s>"].iter().map(|s| s.to_string()).collect();
        let mut types = vec![
            TokenType::UserDefined,
            TokenType::UserDefined,
            TokenType::Control,
            TokenType::Normal,
            TokenType::Normal,
        ];
        type_as_control(&tokens, &mut types);
        let want =
            [TokenType::Control, TokenType::UserDefined, TokenType::Control, TokenType::Normal, TokenType::Control];
        assert_eq!(types, want);
    }
}
