//! Serving a model split over the ranks of an MPI job: rank 0 runs the
//! engine, and every model call it makes that the ranks take together (a
//! step, reading a step's logits, a single pass) is told to the other
//! ranks first, which make the same call ([`follow`]). The calls carry the
//! tokens, so the other ranks need neither the requests nor the sampler.
//! While idle, rank 0 tells [`MirrorCall::Idle`] every
//! [`Mirror::idle_interval`], and the other ranks answer it: a rank that
//! stopped or went silent is found within the deadline even with no
//! request running, and ends the server with an error.

use std::time::Duration;

use baton_model::{Model, Pooling, SeqStep};

use super::passes::{score, PassJob};

/// A model call every rank makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MirrorCall {
    /// `submit_batch` of a step of group `group`: per sequence, its slot,
    /// its first position and its tokens.
    Step {
        /// The group (a run in flight) whose step it is.
        group: u32,
        /// (slot, past, tokens) per sequence, in row order.
        steps: Vec<(u32, u32, Vec<u32>)>,
    },
    /// `batch_logits` of group `group`'s step in flight.
    Logits {
        /// The group.
        group: u32,
    },
    /// An embedding's pass on slot `slot`.
    Embed {
        /// The slot.
        slot: u32,
        /// Mean (0) or last-token (1) pooling.
        last: bool,
        /// The text's tokens.
        tokens: Vec<u32>,
    },
    /// A prompt's scoring pass on slot `slot` (`echo` with logprobs).
    Score {
        /// The slot.
        slot: u32,
        /// Alternatives per token.
        top: u32,
        /// The prompt's tokens.
        tokens: Vec<u32>,
    },
    /// Nothing to do: the ranks are alive.
    Idle,
    /// The engine stopped: the other ranks end.
    Stop,
}

/// A message that is not a [`MirrorCall`].
#[derive(Debug, thiserror::Error)]
#[error("a mirrored call that does not decode: {0}")]
pub struct DecodeError(String);

impl MirrorCall {
    /// The call as words (what travels between ranks).
    pub fn encode(&self) -> Vec<u32> {
        let with = |kind: u32, head: &[u32], tokens: &[u32]| {
            let mut out = vec![kind];
            out.extend_from_slice(head);
            out.push(tokens.len() as u32);
            out.extend_from_slice(tokens);
            out
        };
        match self {
            MirrorCall::Step { group, steps } => {
                let mut out = vec![0, *group, steps.len() as u32];
                for (slot, past, tokens) in steps {
                    out.extend([*slot, *past, tokens.len() as u32]);
                    out.extend_from_slice(tokens);
                }
                out
            }
            MirrorCall::Logits { group } => vec![1, *group],
            MirrorCall::Embed { slot, last, tokens } => with(2, &[*slot, u32::from(*last)], tokens),
            MirrorCall::Score { slot, top, tokens } => with(3, &[*slot, *top], tokens),
            MirrorCall::Idle => vec![4],
            MirrorCall::Stop => vec![5],
        }
    }

    /// The call `words` encode.
    pub fn decode(words: &[u32]) -> Result<MirrorCall, DecodeError> {
        let mut at = 0;
        let mut next = || -> Result<u32, DecodeError> {
            let word = words.get(at).copied().ok_or_else(|| DecodeError(format!("{} words end early", words.len())))?;
            at += 1;
            Ok(word)
        };
        let call = match next()? {
            0 => {
                let group = next()?;
                let count = next()?;
                let mut steps = Vec::with_capacity((count as usize).min(words.len()));
                for _ in 0..count {
                    let (slot, past, len) = (next()?, next()?, next()?);
                    let tokens = (0..len).map(|_| next()).collect::<Result<Vec<_>, _>>()?;
                    steps.push((slot, past, tokens));
                }
                MirrorCall::Step { group, steps }
            }
            1 => MirrorCall::Logits { group: next()? },
            kind @ (2 | 3) => {
                let (slot, arg, len) = (next()?, next()?, next()?);
                let tokens = (0..len).map(|_| next()).collect::<Result<Vec<_>, _>>()?;
                match kind {
                    2 => MirrorCall::Embed { slot, last: arg != 0, tokens },
                    _ => MirrorCall::Score { slot, top: arg, tokens },
                }
            }
            4 => MirrorCall::Idle,
            5 => MirrorCall::Stop,
            other => return Err(DecodeError(format!("kind {other}"))),
        };
        if at != words.len() {
            return Err(DecodeError(format!("{} words left over", words.len() - at)));
        }
        Ok(call)
    }

    /// The step of `group` that `steps` make.
    pub(super) fn step(group: usize, steps: &[SeqStep<'_>]) -> MirrorCall {
        let steps = steps.iter().map(|s| (s.slot as u32, s.past as u32, s.tokens.to_vec())).collect();
        MirrorCall::Step { group: group as u32, steps }
    }
}

impl PassJob {
    /// The call the other ranks make for this pass (serving over ranks).
    pub(super) fn mirror_call(&self, slot: usize) -> MirrorCall {
        let slot = slot as u32;
        match self {
            PassJob::Embed { tokens, pooling, .. } => {
                MirrorCall::Embed { slot, last: *pooling == Pooling::Last, tokens: tokens.clone() }
            }
            PassJob::Score { tokens, top, .. } => MirrorCall::Score { slot, top: *top as u32, tokens: tokens.clone() },
        }
    }
}

/// Rank 0's side: tells the other ranks each call before rank 0 makes it.
pub trait Mirror: Send {
    /// Tells every other rank `call`; for [`MirrorCall::Idle`], waits for
    /// each one's answer. An error (a rank stopped, went silent or
    /// failed) ends the engine.
    fn tell(&mut self, call: &MirrorCall) -> Result<(), String>;

    /// How long the engine may be idle before it tells
    /// [`MirrorCall::Idle`].
    fn idle_interval(&self) -> Duration;
}

/// The other ranks' side: makes each call `next` gives, as rank 0 does,
/// until [`MirrorCall::Stop`]. A call that fails is an error (the ranks
/// are no longer in step).
pub fn follow(model: &mut Model, next: &mut dyn FnMut() -> Result<MirrorCall, String>) -> Result<(), String> {
    follow_with(model, next, &mut |_| {})
}

/// As [`follow`], giving each step's logits (one row per sequence) to
/// `on_logits`.
pub fn follow_with(
    model: &mut Model,
    next: &mut dyn FnMut() -> Result<MirrorCall, String>,
    on_logits: &mut dyn FnMut(&[f32]),
) -> Result<(), String> {
    let mut flights: Vec<Option<baton_model::BatchTicket>> = Vec::new();
    loop {
        match next()? {
            MirrorCall::Step { group, steps } => {
                let seqs: Vec<SeqStep<'_>> = steps
                    .iter()
                    .map(|(slot, past, tokens)| SeqStep { slot: *slot as usize, past: *past as usize, tokens })
                    .collect();
                let ticket = model.submit_batch(&seqs).map_err(|e| format!("a step: {e}"))?;
                let group = group as usize;
                if flights.len() <= group {
                    flights.resize_with(group + 1, || None);
                }
                flights[group] = Some(ticket);
            }
            MirrorCall::Logits { group } => {
                let ticket = flights
                    .get_mut(group as usize)
                    .and_then(Option::take)
                    .ok_or_else(|| format!("the logits of group {group}, which has no step in flight"))?;
                on_logits(model.batch_logits(ticket).map_err(|e| format!("a step's logits: {e}"))?);
            }
            MirrorCall::Embed { slot, last, tokens } => {
                let pooling = if last { Pooling::Last } else { Pooling::Mean };
                model.embed(slot as usize, &tokens, pooling).map_err(|e| format!("an embedding: {e}"))?;
            }
            MirrorCall::Score { slot, top, tokens } => {
                score(model, slot as usize, &tokens, top as usize).map_err(|e| format!("a prompt's scores: {e}"))?;
            }
            MirrorCall::Idle => {}
            MirrorCall::Stop => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_round_trip_and_bad_words_are_errors() {
        let calls = [
            MirrorCall::Step { group: 1, steps: vec![(0, 5, vec![1, 2, 3]), (3, 0, vec![]), (2, 9, vec![7])] },
            MirrorCall::Step { group: 0, steps: vec![] },
            MirrorCall::Logits { group: 2 },
            MirrorCall::Embed { slot: 1, last: true, tokens: vec![4, 5] },
            MirrorCall::Score { slot: 0, top: 20, tokens: vec![9; 40] },
            MirrorCall::Idle,
            MirrorCall::Stop,
        ];
        for call in calls {
            let words = call.encode();
            assert_eq!(MirrorCall::decode(&words).expect("decodes"), call);
            assert!(MirrorCall::decode(&words[..words.len() - 1]).is_err(), "{call:?} cut short");
            let mut longer = words.clone();
            longer.push(0);
            assert!(MirrorCall::decode(&longer).is_err(), "{call:?} with a word more");
        }
        assert!(MirrorCall::decode(&[]).is_err());
        assert!(MirrorCall::decode(&[6]).is_err());
        assert!(MirrorCall::decode(&[0, 0, u32::MAX]).is_err(), "a count beyond the words");
    }
}
