//! A running sequence: what it holds, how it takes its next token from a
//! row of logits, and, when it drafts, how its step's rows are walked
//! (each drawn from as one token a step would be, while the drafts hold).

use std::time::Instant;

use baton_gen::constraint::Constraint;
use baton_gen::speculative::{verify, Drawn, Speculation, StepTimes};
use baton_gen::{candidate_logprobs, token_logprobs, Sampler};
use baton_model::baton_tokenizer::TokenType;
use baton_model::Tokenizer;

use super::super::request::{Event, Finish, FinishReason};
use super::super::scope::CacheScope;
use super::super::shared::Shared;

/// A running sequence.
pub(super) struct Seq {
    /// Unique per request.
    pub(super) id: u64,
    pub(super) slot: usize,
    /// Its group: the sequences of one group share each step.
    pub(super) group: usize,
    pub(super) events: tokio::sync::mpsc::UnboundedSender<Event>,
    pub(super) prompt: Vec<u32>,
    /// Prompt tokens evaluated so far.
    pub(super) read: usize,
    /// The sampled token to evaluate next (after the prompt).
    pub(super) next: Option<u32>,
    /// Positions written to the cache.
    pub(super) past: usize,
    pub(super) generated: usize,
    pub(super) max_tokens: usize,
    pub(super) sampler: Sampler,
    pub(super) stop_at_eog: bool,
    /// When the request was submitted, and when its last token was sent.
    pub(super) submitted: Instant,
    pub(super) last_token: Option<Instant>,
    /// Alternatives to send log-probabilities of, when asked.
    pub(super) logprobs: Option<usize>,
    /// Whether they are the draw's ([`GenerateRequest::post_sampling`]).
    ///
    /// [`GenerateRequest::post_sampling`]: super::super::request::GenerateRequest::post_sampling
    pub(super) post_sampling: bool,
    /// Prompt tokens the slot's cache already held.
    pub(super) cached: usize,
    /// The tokens generated so far.
    pub(super) sent: Vec<u32>,
    /// The format its text is held to, if any.
    pub(super) constraint: Option<Constraint>,
    /// Whose cached prompts it may reuse and fills.
    pub(super) scope: CacheScope,
    /// Its speculation, if it drafts.
    pub(super) spec: Option<Speculation>,
    /// The tokens of its step in flight once decoding: `next`, then the
    /// drafts to verify (empty when it drafts nothing).
    pub(super) step: Vec<u32>,
    /// Generated tokens it reads again as part of `prompt`: a sequence
    /// preempted for the blocks of a full pool reads its prompt and the
    /// tokens it had generated again when it resumes (`pool.rs`).
    pub(super) replayed: usize,
}

impl Seq {
    pub(super) fn prefilling(&self) -> bool {
        self.read < self.prompt.len()
    }

    pub(super) fn finish(&self, reason: FinishReason) -> Event {
        let prompt_tokens = self.prompt.len() - self.replayed;
        let (completion_tokens, cached_tokens) = (self.generated, self.cached);
        Event::Done(Finish { reason, prompt_tokens, completion_tokens, cached_tokens })
    }

    /// The tokens whose keys and values its slot holds.
    pub(super) fn in_cache(&self) -> impl Iterator<Item = u32> + '_ {
        self.history().take(self.past)
    }

    /// Its prompt and the tokens it generated.
    pub(super) fn history(&self) -> impl Iterator<Item = u32> + '_ {
        self.prompt.iter().chain(&self.sent[self.replayed..]).copied()
    }
}

impl Seq {
    /// Prepares its step once decoding: `next`, then the drafts its
    /// speculation makes (at most `room`, within its context and its
    /// `max_tokens`, for a step of `rows` rows without them, steps costing
    /// what `times` says); nothing to prepare without speculation. With the
    /// engine's draft model (`by_model`) it returns how many tokens the
    /// model should draft for it ([`offer_drafts`](Self::offer_drafts)
    /// takes them), else 0.
    pub(super) fn prepare_step(
        &mut self,
        (room, rows, times): (usize, usize, &StepTimes),
        context: usize,
        by_model: bool,
    ) -> usize {
        self.step.clear();
        let (Some(spec), Some(next)) = (self.spec.as_mut(), self.next) else { return 0 };
        if self.read < self.prompt.len() {
            return 0;
        }
        // Each verified row draws a token: no more rows than tokens left.
        let left = self.max_tokens.saturating_sub(self.generated);
        let room = room.min(left.saturating_sub(1)).min(context.saturating_sub(self.past + 1));
        self.step.push(next);
        if by_model {
            return spec.model_drafts(room, (rows, times));
        }
        let history: Vec<u32> = self.prompt.iter().chain(&self.sent[self.replayed..]).copied().collect();
        // N-gram drafts, which cannot fail.
        if let Ok(drafts) = spec.draft(&history, room, (rows, times)) {
            self.step.extend_from_slice(drafts);
        }
        0
    }

    /// Takes the draft model's `tokens` for the step
    /// [`prepare_step`](Self::prepare_step) asked them for (`rows` rows
    /// without them, steps costing what `times` says): the ones worth
    /// verifying join the step.
    pub(super) fn offer_drafts(&mut self, tokens: Vec<u32>, (rows, times): (usize, &StepTimes)) {
        if let Some(spec) = self.spec.as_mut() {
            let drafts = spec.offer(tokens, (rows, times));
            self.step.extend_from_slice(drafts);
        }
    }

    /// Takes the rows its step gave (`rows`: one row, or with drafts one per
    /// evaluated token, `vocab` wide; `evaluated` tokens at `past`): each row's token is
    /// drawn and sent as [`next_token`] does for one, in order, while it
    /// confirms the draft; `past` ends after the accepted positions.
    /// Returns why the sequence ends, if it does, and the drafted and
    /// accepted counts.
    pub(super) fn take_rows(
        &mut self,
        rows: &[f32],
        evaluated: usize,
        (tokenizer, vocab, context, shared): (&Tokenizer, usize, usize, &Shared),
    ) -> Result<Option<FinishReason>, String> {
        let drafts: Vec<u32> = self.step.get(1..evaluated).unwrap_or_default().to_vec();
        let mut end = None;
        let verified = verify(rows.chunks_exact(vocab), &drafts, |row| {
            // The row's token is evaluated at `past`: the cache holds it.
            self.past += 1;
            match next_token(self, row, tokenizer, context, shared)? {
                Some(reason) => {
                    end = Some(reason);
                    Ok(Drawn::End)
                }
                None => self.next.map(Drawn::Token).ok_or_else(|| "a token was taken but not kept".to_string()),
            }
        });
        let verified = verified?;
        if let Some(spec) = self.spec.as_mut().filter(|_| !self.step.is_empty()) {
            spec.settle(verified.accepted, verified.next);
        }
        self.step.clear();
        shared.count_verified(drafts.len(), verified.accepted, self.past);
        Ok(end)
    }
}

/// Samples the sequence's next token from its logits and sends it; returns
/// why the sequence ends, if it does.
pub(super) fn next_token(
    seq: &mut Seq,
    logits: &[f32],
    tokenizer: &Tokenizer,
    context: usize,
    shared: &Shared,
) -> Result<Option<FinishReason>, String> {
    let sampling_failed = |e: baton_gen::SamplingError| format!("sampling failed: {e}");
    let mut token = seq.sampler.sample(logits).map_err(sampling_failed)?;
    if seq.constraint.as_ref().is_some_and(Constraint::is_free) {
        // Free text from here on (a tool choice answered in words).
        seq.constraint = None;
    }
    let refused = seq.constraint.as_mut().is_some_and(|c| !c.allows(token, tokenizer));
    if let Some(constraint) = seq.constraint.as_mut().filter(|_| refused) {
        // A token that cannot continue the constrained text: drawn again
        // among those that can. Drawing first and checking after costs one
        // check when the token fits; the token drawn in the end follows the
        // distribution restricted to the tokens that fit (a rejection
        // sampler), up to where the filters (top-k, top-p) apply.
        // The logit bias first, so that the tokens it bans are not the
        // candidates the mask keeps (all of them banned would leave the
        // sampler nothing); the sampler then adds it to the logits kept.
        let mut biased = logits.to_vec();
        for &(id, bias) in seq.sampler.params().logit_bias.entries() {
            if let Some(logit) = biased.get_mut(id as usize) {
                *logit += bias;
            }
        }
        if constraint.mask(&mut biased, tokenizer) == 0 {
            let why = constraint.error().unwrap_or_else(|| "no token can continue the constrained text".into());
            return Err(why);
        }
        let allowed: Vec<f32> =
            logits.iter().zip(&biased).map(|(&l, &b)| if b == f32::NEG_INFINITY { b } else { l }).collect();
        token = seq.sampler.sample(&allowed).map_err(sampling_failed)?;
    }
    if let Some(constraint) = &mut seq.constraint {
        if !constraint.accept(token, tokenizer) {
            return Err(format!("token {token} does not continue the constrained text"));
        }
    }
    let eog = Some(token) == tokenizer.eos_id() || tokenizer.token_type(token).is_ok_and(|t| t == TokenType::Control);
    if seq.stop_at_eog && eog {
        return Ok(Some(FinishReason::Stop));
    }
    if let Some(top) = seq.logprobs {
        let entry = match seq.post_sampling {
            // The candidates of the draw that gave `token` (the last one).
            true => candidate_logprobs(seq.sampler.candidates(), seq.sampler.params().temperature, token, top),
            false => token_logprobs(logits, token, top),
        };
        let _ = seq.events.send(Event::Logprobs(entry));
    }
    seq.sampler.accept(token);
    seq.generated += 1;
    seq.sent.push(token);
    seq.next = Some(token);
    // A client that went away is noticed (and its slot freed) before the
    // next step.
    let _ = seq.events.send(Event::Token(token));
    let now = Instant::now();
    match seq.last_token {
        None => shared.ttft.observe(now.duration_since(seq.submitted)),
        Some(last) => shared.itl.observe(now.duration_since(last)),
    }
    seq.last_token = Some(now);
    if seq.constraint.as_ref().is_some_and(Constraint::is_complete) {
        return Ok(Some(FinishReason::Stop));
    }
    if seq.generated >= seq.max_tokens || seq.past >= context {
        return Ok(Some(FinishReason::Length));
    }
    Ok(None)
}
