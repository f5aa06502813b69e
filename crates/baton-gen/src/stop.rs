//! Stop strings matched on the decoded text, across token boundaries.
//!
//! Text is pushed in pieces as tokens decode. A piece is released only once
//! no stop string can start in it any more; the tail that could still be the
//! start of a stop string is held back until the next piece decides. When a
//! stop string appears, the text before it is released and the rest (the
//! stop string and anything after it) is never sent.

/// Finds stop strings in a stream of text pieces.
#[derive(Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    /// Text received but not released yet (a possible start of a stop).
    held: String,
}

/// What one [`StopMatcher::push`] gives.
#[derive(Debug, PartialEq, Eq)]
pub struct Released {
    /// Text safe to send now (may be empty).
    pub text: String,
    /// A stop string matched: the generation ends after `text`.
    pub stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops` (none: every piece is released at once).
    /// Empty strings must have been rejected by the caller.
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher { stops, held: String::new() }
    }

    /// Adds `piece`; returns the text that can be sent and whether a stop
    /// string ended the text.
    pub fn push(&mut self, piece: &str) -> Released {
        self.held.push_str(piece);
        let first = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min();
        if let Some(at) = first {
            let text = self.held[..at].to_string();
            self.held.clear();
            return Released { text, stopped: true };
        }
        let keep = self.possible_start();
        let text = self.held[..keep].to_string();
        self.held.drain(..keep);
        Released { text, stopped: false }
    }

    /// The text still held back, at the end of the generation (it holds
    /// no complete stop string: [`push`](Self::push) would have found it).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Where the longest suffix of `held` that begins some stop string
    /// starts (`held.len()` when none does).
    fn possible_start(&self) -> usize {
        let held = self.held.as_str();
        held.char_indices()
            .map(|(i, _)| i)
            .find(|&i| self.stops.iter().any(|s| s.starts_with(&held[i..])))
            .unwrap_or(held.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for piece in pieces {
            let r = m.push(piece);
            out.push_str(&r.text);
            if r.stopped {
                return (out, true);
            }
        }
        out.push_str(&m.finish());
        (out, false)
    }

    #[test]
    fn a_stop_split_over_pieces_is_found_and_not_sent() {
        assert_eq!(run(&["END"], &["hello E", "N", "D and more"]), ("hello ".to_string(), true));
    }

    #[test]
    fn a_held_back_start_that_does_not_complete_is_released() {
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(m.push("abc E"), Released { text: "abc ".into(), stopped: false });
        assert_eq!(m.push("Nx"), Released { text: "ENx".into(), stopped: false });
        assert_eq!(run(&["END"], &["a E", "N"]), ("a EN".to_string(), false));
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        assert_eq!(run(&["yz", "b"], &["axyzb"]), ("ax".to_string(), true));
        assert_eq!(run(&["\n\n", "."], &["one.\n\ntwo"]), ("one".to_string(), true));
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        assert_eq!(run(&["é!"], &["café", "é", "!x"]), ("café".to_string(), true));
        assert_eq!(run(&["🙂🙂"], &["a🙂", "b"]), ("a🙂b".to_string(), false));
    }

    #[test]
    fn without_stops_every_piece_is_released_at_once() {
        let mut m = StopMatcher::new(Vec::new());
        assert_eq!(m.push("abc"), Released { text: "abc".into(), stopped: false });
        assert_eq!(m.finish(), "");
    }
}
