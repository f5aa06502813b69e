//! Speculation on hybrid models with drafts that are accepted: the random
//! toys' text never repeats (n-grams draft nothing that holds), so the
//! drafts are given as the server's draft model gives them
//! (`Speculation::with_shared_model`, `offer`): plain decoding's own next
//! tokens, some of them spoiled, so that each step accepts a different
//! number of drafts and the sequence's recurrent state is cut back to each
//! position of a verification step. The output (tokens and each drawn row's
//! bits) is plain decoding's, greedy and sampled, with penalties.

use baton_core::DType;
use baton_gen::speculative::{
    prepare_model, verify, Drawn, SpecParams, SpecStats, SpecType, Speculation, StepCost, StepTimes,
};
use baton_gen::{Sampler, SamplingParams};
use baton_model::{Logits, Model};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::speculative::{decode, hash, load, samplings, synthetic_prompts, Output};

/// Decodes `n` tokens after `prompt` verifying, at step `s`, up to
/// `s % 5 + 1` of `oracle`'s next tokens (plain decoding's), the
/// `(s / 2) % k`-th spoiled at every other step. Returns the output, the
/// counts, and which drafts each verification step accepted.
fn decode_with_oracle(
    model: &mut Model,
    prompt: &[u32],
    sampling: &SamplingParams,
    oracle: &[u32],
    n: usize,
) -> (Output, SpecStats, Vec<usize>) {
    let vocab = model.config().vocab;
    let mut sampler = Sampler::new(sampling.clone());
    prompt.iter().for_each(|&t| sampler.accept(t));
    let mut out = Output { tokens: Vec::new(), rows: Vec::new(), stopped: false };
    let mut draw = |row: &[f32], out: &mut Output| {
        out.rows.push(hash(row));
        let token = sampler.sample(row).expect("sample");
        sampler.accept(token);
        out.tokens.push(token);
        Ok::<_, ()>(if out.tokens.len() == n { Drawn::End } else { Drawn::Token(token) })
    };
    let first = model.eval_prompt(prompt, 0).expect("prompt").to_vec();
    draw(&first, &mut out).expect("draw");
    let params = SpecParams { kind: SpecType::Ngram, draft_max: 5, cost: StepCost::FREE, ..SpecParams::default() };
    let mut spec = Speculation::with_shared_model(params);
    let times = StepTimes::new(params.cost);
    let mut past = prompt.len();
    let mut accepted = Vec::new();
    for s in 0.. {
        let done = out.tokens.len();
        if done >= n {
            break;
        }
        let room = (s % 5 + 1).min(n - done - 1).min(model.rewind_rows().expect("hybrid"));
        let mut drafts = oracle[done..done + room].to_vec();
        if s % 2 == 1 && !drafts.is_empty() {
            let spoiled = (s / 2) % drafts.len();
            drafts[spoiled] = (drafts[spoiled] + 1) % vocab as u32;
        }
        let k = spec.model_drafts(room, (1, &times));
        let drafts = match k {
            0 => Vec::new(),
            _ => spec.offer(drafts, (1, &times)).to_vec(),
        };
        let step: Vec<u32> = out.tokens[done - 1..done].iter().chain(&drafts).copied().collect();
        let logits = if step.len() > 1 { Logits::All } else { Logits::Last };
        let rows = model.eval_slot(0, &step, past, logits).expect("verify").to_vec();
        let verified = verify(rows.chunks_exact(vocab), &drafts, |row| draw(row, &mut out)).expect("draws");
        spec.settle(verified.accepted, verified.next);
        if !drafts.is_empty() {
            accepted.push(verified.accepted);
        }
        past += 1 + verified.accepted;
        model.cut_back(0, past).expect("cut back to the accepted drafts");
        if verified.next.is_none() {
            break;
        }
    }
    (out, spec.stats(), accepted)
}

/// Plain decoding's tokens as drafts, some spoiled: every number of
/// accepted drafts from none to all is cut back to, and the output holds.
#[test]
fn accepted_drafts_change_no_token_on_hybrid_models() {
    for (shape, dtype) in [(SynthShape::Qwen35, DType::F32), (SynthShape::Qwen35Moe, DType::Q8_0)] {
        let what = format!("{shape} {dtype}");
        let (_dir, path) = synth_model("spec-oracle-hybrid", shape, dtype, 8);
        let mut model = load(&path);
        prepare_model(&mut model, 5).expect("keeps states");
        let mut total = SpecStats::default();
        // Steps by the drafts they accepted (5 and more together).
        let mut by_accepted = [0usize; 6];
        for (p, prompt) in synthetic_prompts(model.config().vocab as u32).iter().enumerate() {
            for (name, sampling) in samplings() {
                let n = 40;
                let (plain, _) = decode(&mut model, prompt, &sampling, None, n, &[]);
                let (got, stats, accepted) = decode_with_oracle(&mut model, prompt, &sampling, &plain.tokens, n);
                assert!(
                    got == plain,
                    "{what}, prompt {p}, {name}: speculation changed the output\n  plain {:?}\n  spec  {:?}",
                    plain.tokens,
                    got.tokens
                );
                total.drafted += stats.drafted;
                total.accepted += stats.accepted;
                total.steps += stats.steps;
                accepted.iter().for_each(|&a| by_accepted[a.min(5)] += 1);
            }
        }
        eprintln!(
            "{what}: {} drafted tokens in {} steps, {} accepted ({:.0}%); steps by drafts accepted {by_accepted:?}",
            total.drafted,
            total.steps,
            total.accepted,
            100.0 * total.acceptance()
        );
        assert!(by_accepted[..5].iter().all(|&c| c > 0), "{what}: cut back to every position of a step");
        assert!(total.accepted > 0 && total.accepted < total.drafted, "{what}: drafts both accepted and rejected");
    }
}
