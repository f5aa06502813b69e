//! A reasoning model's thinking told from its answer: the text inside
//! `<think>…</think>` at the start of a chat answer (Qwen3, DeepSeek-R1
//! and the models trained like them) goes to `reasoning_content`, the
//! rest to `content`, as llama-server's `--reasoning-format deepseek` and
//! vLLM's reasoning parsers split it. When the prompt already opened the
//! thinking (DeepSeek-R1's template ends the generation prompt with
//! `<think>\n`), the answer starts inside it. Whitespace after the opening
//! tag and after the closing one is dropped; an answer that does not
//! start with the tag is all content; thinking never closed is all
//! reasoning.
//!
//! gpt-oss's harmony format is split the same way: an answer that starts
//! with its analysis channel ([`HARMONY_THINK`]) thinks until the next
//! message opens ([`HARMONY_NEXT`]); that message's final-channel header
//! ([`HARMONY_FINAL`]) is dropped, and any other (a tool call on the
//! commentary channel) is content, where the tool calls are read. One
//! that starts on the final channel is all content (the tokenizer renders
//! the channel markers as text, as llama.cpp does).
//!
//! Gemma 4 thinks in a channel: an answer that starts with
//! [`GEMMA4_THINK`] (`<|channel>thought`, the markers user-defined tokens
//! rendered as text) thinks until [`GEMMA4_THINK_CLOSE`] (`<channel|>`).
//!
//! [`ReasoningSplit`] takes the text as it streams and holds back only
//! what may still be a tag, so a streamed answer splits exactly as the
//! whole one.

/// What opens the thinking.
pub const THINK_OPEN: &str = "<think>";

/// What closes it.
pub const THINK_CLOSE: &str = "</think>";

/// What opens gpt-oss's thinking: its analysis channel.
pub const HARMONY_THINK: &str = "<|channel|>analysis<|message|>";

/// What ends gpt-oss's thinking and opens its next message (the answer on
/// the final channel, or a tool call on the commentary channel).
pub const HARMONY_NEXT: &str = "<|end|><|start|>assistant";

/// An answer on gpt-oss's final channel from the start.
pub const HARMONY_FINAL: &str = "<|channel|>final<|message|>";

/// What opens Gemma 4's thinking: its thought channel.
pub const GEMMA4_THINK: &str = "<|channel>thought";

/// What closes Gemma 4's thought channel.
pub const GEMMA4_THINK_CLOSE: &str = "<channel|>";

/// Each way of opening the thinking, with what closes it.
const OPENINGS: [(&str, &str); 3] =
    [(THINK_OPEN, THINK_CLOSE), (HARMONY_THINK, HARMONY_NEXT), (GEMMA4_THINK, GEMMA4_THINK_CLOSE)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Before the first non-whitespace text: it may open the thinking.
    Start,
    /// Inside the thinking; `spoken`: some of it was given out.
    Thinking { spoken: bool },
    /// After the closing tag, before the answer's first non-whitespace.
    Closed,
    /// The answer.
    Content,
}

/// Splits a chat answer's text into its thinking and its answer.
#[derive(Clone, Debug)]
pub struct ReasoningSplit {
    part: Part,
    /// Text not given out yet (it may be a tag's start).
    pending: String,
    /// What closes the thinking (the `<think>` tag's or harmony's).
    close: &'static str,
}

/// Thinking and answer text, each possibly empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Of the thinking.
    pub reasoning: String,
    /// Of the answer.
    pub content: String,
}

impl ReasoningSplit {
    /// A split of an answer whose prompt ended inside the thinking
    /// (`opened`) or not.
    pub fn new(opened: bool) -> ReasoningSplit {
        let part = if opened { Part::Thinking { spoken: false } } else { Part::Start };
        ReasoningSplit { part, pending: String::new(), close: THINK_CLOSE }
    }

    /// Whether a prompt's text ends inside the thinking (its last
    /// non-whitespace is [`THINK_OPEN`]).
    pub fn prompt_opens(prompt_tail: &str) -> bool {
        prompt_tail.trim_end().ends_with(THINK_OPEN)
    }

    /// Takes the next piece of the answer; gives what is known of it.
    pub fn push(&mut self, piece: &str) -> Split {
        self.pending.push_str(piece);
        let mut out = Split::default();
        loop {
            match self.part {
                Part::Start => {
                    let text = self.pending.trim_start();
                    if let Some((rest, close)) = OPENINGS.iter().find_map(|(o, c)| Some((text.strip_prefix(o)?, *c))) {
                        self.pending = rest.to_string();
                        self.close = close;
                        self.part = Part::Thinking { spoken: false };
                    } else if let Some(rest) = text.strip_prefix(HARMONY_FINAL) {
                        self.pending = rest.to_string();
                        self.part = Part::Closed;
                    } else if OPENINGS
                        .iter()
                        .map(|(open, _)| *open)
                        .chain([HARMONY_FINAL])
                        .any(|tag| tag.starts_with(text))
                    {
                        return out;
                    } else {
                        self.part = Part::Content;
                    }
                }
                Part::Thinking { spoken } => {
                    if !spoken {
                        self.pending = self.pending.trim_start().to_string();
                    }
                    if let Some(at) = self.pending.find(self.close) {
                        out.reasoning.push_str(&self.pending[..at]);
                        self.pending = self.pending[at + self.close.len()..].to_string();
                        self.part = Part::Closed;
                        continue;
                    }
                    // Keep the longest end that may start the closing tag.
                    let keep = (0..self.pending.len())
                        .find(|&i| self.pending.is_char_boundary(i) && self.close.starts_with(&self.pending[i..]))
                        .unwrap_or(self.pending.len());
                    out.reasoning.push_str(&self.pending[..keep]);
                    self.pending.drain(..keep);
                    if !out.reasoning.is_empty() {
                        self.part = Part::Thinking { spoken: true };
                    }
                    return out;
                }
                Part::Closed => {
                    self.pending = self.pending.trim_start().to_string();
                    if self.pending.is_empty() {
                        return out;
                    }
                    if self.close == HARMONY_NEXT {
                        // The final channel's header is no part of the answer.
                        if let Some(rest) = self.pending.strip_prefix(HARMONY_FINAL) {
                            self.pending = rest.to_string();
                            self.close = THINK_CLOSE;
                            continue;
                        }
                        if HARMONY_FINAL.starts_with(self.pending.as_str()) {
                            return out;
                        }
                    }
                    self.part = Part::Content;
                }
                Part::Content => {
                    out.content.push_str(&self.pending);
                    self.pending.clear();
                    return out;
                }
            }
        }
    }

    /// At the end of the answer: what was held back.
    pub fn finish(&mut self) -> Split {
        let pending = std::mem::take(&mut self.pending);
        match self.part {
            Part::Thinking { .. } => Split { reasoning: pending, content: String::new() },
            Part::Start | Part::Closed | Part::Content => Split { reasoning: String::new(), content: pending },
        }
    }

    /// Bytes of `text` (a whole answer, as [`whole`](Self::whole) takes
    /// it) that its thinking spans, its tags included: 0 when it has none,
    /// all of it when the thinking never closes.
    pub fn thinking_len(text: &str, opened: bool) -> usize {
        let (start, close) = if opened {
            (0, THINK_CLOSE)
        } else {
            let lead = text.len() - text.trim_start().len();
            match OPENINGS.iter().find(|(open, _)| text[lead..].starts_with(open)) {
                Some((open, close)) => (lead + open.len(), *close),
                None => return 0,
            }
        };
        text[start..].find(close).map_or(text.len(), |at| start + at + close.len())
    }

    /// Generated tokens of `text`'s thinking (its tags included): the
    /// tokens up to the one whose text reaches [`thinking_len`](Self::thinking_len),
    /// `token_ends` holding each token's end in `text`'s bytes (as
    /// decoded, so a token inside a character ends where the character
    /// does).
    pub fn thinking_tokens(text: &str, opened: bool, token_ends: &[usize]) -> usize {
        match Self::thinking_len(text, opened) {
            0 => 0,
            len => token_ends.iter().position(|&end| end >= len).map_or(token_ends.len(), |i| i + 1),
        }
    }

    /// A whole answer split.
    pub fn whole(text: &str, opened: bool) -> Split {
        let mut split = ReasoningSplit::new(opened);
        let mut out = split.push(text);
        let rest = split.finish();
        out.reasoning.push_str(&rest.reasoning);
        out.content.push_str(&rest.content);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(reasoning: &str, content: &str) -> Split {
        Split { reasoning: reasoning.into(), content: content.into() }
    }

    #[test]
    fn thinking_at_the_start_is_reasoning_and_the_rest_content() {
        assert_eq!(
            ReasoningSplit::whole("<think>\nLet me see.\n</think>\n\nHello!", false),
            split("Let me see.\n", "Hello!")
        );
        assert_eq!(ReasoningSplit::whole("Hello <think>x</think>", false), split("", "Hello <think>x</think>"));
        assert_eq!(ReasoningSplit::whole("  <think>never closed", false), split("never closed", ""));
        assert_eq!(ReasoningSplit::whole("<thi", false), split("", "<thi"));
        assert_eq!(ReasoningSplit::whole("opened</think> done", true), split("opened", "done"));
        assert_eq!(ReasoningSplit::whole("all thought", true), split("all thought", ""));
        assert!(ReasoningSplit::prompt_opens("<|Assistant|><think>\n"));
        assert!(!ReasoningSplit::prompt_opens("<think>\n\n</think>\n\n"));
    }

    #[test]
    fn harmony_channels_split_as_think_tags_do() {
        let answer =
            "<|channel|>analysis<|message|>User asks. Say hi.<|end|><|start|>assistant<|channel|>final<|message|>Hi!";
        assert_eq!(ReasoningSplit::whole(answer, false), split("User asks. Say hi.", "Hi!"));
        assert_eq!(ReasoningSplit::whole("<|channel|>final<|message|>Hi!", false), split("", "Hi!"));
        assert_eq!(ReasoningSplit::whole("<|channel|>analysis<|message|>cut off", false), split("cut off", ""));
        assert_eq!(ReasoningSplit::whole("<|chan", false), split("", "<|chan"));
        // A tool call after the analysis is content (where calls are read).
        let call = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary \
                    to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}";
        let content = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}";
        assert_eq!(ReasoningSplit::whole(call, false), split("Need weather.", content));
        // A think tag inside harmony's analysis is text of it.
        let nested = "<|channel|>analysis<|message|>a </think> b<|end|><|start|>assistant<|channel|>final<|message|>c";
        assert_eq!(ReasoningSplit::whole(nested, false), split("a </think> b", "c"));
    }

    #[test]
    fn gemma4_thought_channel_is_reasoning() {
        let answer = "<|channel>thought\nThe user greets me.<channel|>Hello!";
        assert_eq!(ReasoningSplit::whole(answer, false), split("The user greets me.", "Hello!"));
        assert_eq!(ReasoningSplit::whole("<|channel>thought\ncut off", false), split("cut off", ""));
        assert_eq!(ReasoningSplit::whole("<|chann", false), split("", "<|chann"));
        assert_eq!(
            ReasoningSplit::whole("Hi <|channel>thought x<channel|>", false),
            split("", "Hi <|channel>thought x<channel|>")
        );
    }

    #[test]
    fn the_thinking_spans_its_tags_and_counts_the_tokens_that_reach_its_end() {
        let answer = "<think>ab</think>\n\nHi";
        assert_eq!(ReasoningSplit::thinking_len(answer, false), "<think>ab</think>".len());
        assert_eq!(ReasoningSplit::thinking_len("  <think>never", false), "  <think>never".len());
        assert_eq!(ReasoningSplit::thinking_len("Hi <think>x</think>", false), 0);
        assert_eq!(ReasoningSplit::thinking_len("x</think>y", true), "x</think>".len());
        let harmony = "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hi";
        // Harmony's thinking ends where the next message starts.
        let next = "<|channel|>final<|message|>Hi".len();
        assert_eq!(ReasoningSplit::thinking_len(harmony, false), harmony.len() - next);
        // Tokens "<think>", "ab", "</think>", "\n\n", "Hi": three of thinking.
        let ends = [7, 9, 17, 19, 21];
        assert_eq!(ReasoningSplit::thinking_tokens(answer, false, &ends), 3);
        // The close tag cut across tokens: the one that completes it counts.
        assert_eq!(ReasoningSplit::thinking_tokens(answer, false, &[7, 9, 12, 18, 21]), 4);
        assert_eq!(ReasoningSplit::thinking_tokens("Hi", false, &[2]), 0);
        assert_eq!(ReasoningSplit::thinking_tokens("all thought", true, &[3, 11]), 2);
        // Where the whole split's content starts, the thinking has ended.
        for (text, opened) in [(answer, false), (harmony, false), ("x</think> y", true), ("plain", false)] {
            let len = ReasoningSplit::thinking_len(text, opened);
            let split = ReasoningSplit::whole(&text[..len], opened);
            assert_eq!(split.content, "", "{text:?}: the thinking's bytes hold no answer");
            assert_eq!(split.reasoning, ReasoningSplit::whole(text, opened).reasoning, "{text:?}");
        }
    }

    #[test]
    fn any_cut_of_the_text_splits_as_the_whole() {
        let texts = [
            "<think>\nA é b.\n</think>\n\nThe answer: <think> stays.",
            " <think></think>x",
            "plain",
            "é</think>y",
            "<|channel|>analysis<|message|>é x<|end|><|start|>assistant<|channel|>final<|message|>y<|end|>",
            "<|channel|>final<|message|>z",
            "<|channel>thought\né a<channel|>\nb",
            "<|channel|>analysis<|message|>q<|end|><|start|>assistant<|channel|>commentary to=functions.f<|message|>{}",
            "<|channel|>analysis<|message|>q<|end|><|start|>assistant<|chan",
        ];
        for text in texts {
            for opened in [false, true] {
                let whole = ReasoningSplit::whole(text, opened);
                for cut in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
                    for step in 1..4 {
                        let mut splitter = ReasoningSplit::new(opened);
                        let mut got = splitter.push(&text[..cut]);
                        let mut rest = &text[cut..];
                        while !rest.is_empty() {
                            let mut at = step.min(rest.len());
                            while !rest.is_char_boundary(at) {
                                at += 1;
                            }
                            let part = splitter.push(&rest[..at]);
                            got.reasoning.push_str(&part.reasoning);
                            got.content.push_str(&part.content);
                            rest = &rest[at..];
                        }
                        let end = splitter.finish();
                        got.reasoning.push_str(&end.reasoning);
                        got.content.push_str(&end.content);
                        assert_eq!(got, whole, "{text:?} cut at {cut} by {step}, opened {opened}");
                    }
                }
            }
        }
    }
}
