//! gpt-oss's harmony format (the `o200k_harmony` vocabulary): its answers
//! are channels, `<|channel|>analysis<|message|>…<|end|><|start|>assistant
//! <|channel|>final<|message|>…<|return|>`. The files mark every one of
//! those tokens as control tokens, which would end a generation at its
//! first token; so, as llama.cpp does, the channel markers (and `<|end|>`,
//! which closes a channel, not the answer) are taken as user-defined
//! tokens: rendered as text, never an end of generation. `<|return|>` and
//! `<|call|>` stay control tokens and end it. The vocabulary is told by its
//! having both of those.

use crate::config::TokenType;

/// The harmony tokens rendered as text.
const RENDERED: [&str; 5] = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", "<|end|>"];

/// Re-types the harmony markers of `tokens` as user-defined, when the
/// vocabulary is harmony's.
pub(crate) fn render_channel_markers(tokens: &[String], types: &mut [TokenType]) {
    let has = |text: &str| tokens.iter().any(|t| t == text);
    if !(has("<|return|>") && has("<|call|>")) {
        return;
    }
    for (text, kind) in tokens.iter().zip(types.iter_mut()) {
        if *kind == TokenType::Control && RENDERED.contains(&text.as_str()) {
            *kind = TokenType::UserDefined;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harmony_markers_are_rendered_where_the_vocabulary_is_harmonys() {
        let mut tokens: Vec<String> =
            ["a", "<|channel|>", "<|message|>", "<|end|>", "<|return|>"].iter().map(|s| s.to_string()).collect();
        let control = TokenType::Control;
        let mut types = vec![TokenType::Normal, control, control, control, control];
        render_channel_markers(&tokens, &mut types);
        assert_eq!(types, [TokenType::Normal, control, control, control, control], "no <|call|>: not harmony");
        tokens.push("<|call|>".into());
        types.push(control);
        render_channel_markers(&tokens, &mut types);
        let user = TokenType::UserDefined;
        assert_eq!(types, [TokenType::Normal, user, user, user, control, control]);
    }
}
