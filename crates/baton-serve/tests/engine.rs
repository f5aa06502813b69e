//! The engine on a synthetic model: concurrent greedy requests give each
//! request's tokens as served alone (batch invariance through continuous
//! batching, chunked prefill and slots), on one device and over a layer
//! split; cancellation frees slots; the queue's limit and bad requests are
//! errors; shutdown ends every generation.

mod kit;

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::backend::{Device, IntoDevice};
use baton_core::DType;
use baton_gen::SamplingParams;
use baton_model::{LoadOptions, Logits, Model};
use baton_serve::engine::{
    Engine, EngineOptions, Event, FinishReason, GenerateRequest, Shutdown, SubmitError, TokenLogprobs,
};
use baton_synth::SynthShape;
use baton_testkit::synth::{synth_model, tiny_model};

fn devices(names: &[&str]) -> Vec<Arc<dyn Device>> {
    baton_cpu::open(names).expect("devices").into_iter().map(IntoDevice::into_device).collect()
}

fn engine(path: &std::path::Path, names: &[&str], parallel: usize, queue: usize, chunk: usize) -> Engine {
    pipelined(path, names, parallel, queue, chunk, 1, DType::F16)
}

/// An engine whose model has `copies` runs in flight (groups of sequences
/// pipelined through a layer split).
fn pipelined(
    path: &std::path::Path,
    names: &[&str],
    parallel: usize,
    queue: usize,
    chunk: usize,
    copies: usize,
    cache: DType,
) -> Engine {
    let options = LoadOptions {
        context: Some(96),
        batch: 64,
        slots: parallel,
        n_copies: copies,
        cache_type: cache,
        ..LoadOptions::default()
    };
    let model = Model::load_split(path, devices(names), &options).expect("load");
    Engine::start(model, "tiny", EngineOptions { parallel, queue, prefill_chunk: chunk, ..EngineOptions::default() })
        .expect("engine")
}

/// An engine over a tensor split of `cpu:0,cpu:1` (exact sums: one
/// device's logits bit for bit).
fn tensor_split(path: &std::path::Path, parallel: usize, chunk: usize, cache: DType) -> Engine {
    let options = LoadOptions {
        context: Some(96),
        batch: 64,
        slots: parallel,
        tensor_exact: true,
        cache_type: cache,
        ..LoadOptions::default()
    };
    let composite = baton_composite::CompositeDevice::new(devices(&["cpu:0", "cpu:1"]), Default::default());
    let model = Model::load_tensor_parallel(path, Arc::new(composite.expect("composite")), &options).expect("load");
    Engine::start(
        model,
        "tiny",
        EngineOptions { parallel, queue: 16, prefill_chunk: chunk, ..EngineOptions::default() },
    )
    .expect("engine")
}

fn greedy(prompt: Vec<u32>, max_tokens: usize) -> GenerateRequest {
    GenerateRequest::greedy(prompt, max_tokens)
}

/// Every event of a generation, blocking.
fn collect(mut generation: baton_serve::engine::Generation) -> (Vec<u32>, Event) {
    let mut tokens = Vec::new();
    loop {
        match generation.blocking_next().expect("a last event") {
            Event::Token(t) => tokens.push(t),
            Event::Started { .. } | Event::Progress { .. } | Event::Logprobs(_) => {}
            last => return (tokens, last),
        }
    }
}

fn requests() -> Vec<GenerateRequest> {
    (0..8u32)
        .map(|i| {
            let len = [3, 40, 1, 17, 9, 60, 5, 25][i as usize];
            greedy((0..len).map(|j| (i * 131 + j * 17 + 3) % 512).collect(), 6 + i as usize)
        })
        .collect()
}

/// A prompt's score (`echo` with `logprobs`) gives each of its tokens the
/// log-probability and alternatives its generation had: the prompt and the
/// greedy tokens after it, scored in one pass, against the entries the
/// generation sent (the same logits rows, bit for bit: row invariance).
#[test]
fn a_scored_prompt_gives_its_tokens_the_logprobs_of_their_generation() {
    let (_dir, path) = synth_model("engine-score", SynthShape::Tiny, DType::Q8_0, 37);
    let served = engine(&path, &["cpu"], 2, 4, 16);
    let prompt = vec![4, 8, 15, 16, 23, 42];
    let generation = served.submit(GenerateRequest { logprobs: Some(3), ..greedy(prompt.clone(), 5) }).expect("submit");
    let (tokens, entries, _) = kit::drain(generation);
    let all: Vec<u32> = prompt.iter().chain(&tokens).copied().collect();
    let scored = served.score(all.clone(), 3).expect("score").blocking_wait().expect("scored");
    assert_eq!(scored.len(), all.len() - 1, "every token but the first");
    assert_eq!(&scored[prompt.len() - 1..], &entries[..], "the generated tokens' entries, bit for bit");
    for (entry, &token) in scored.iter().zip(&all[1..]) {
        assert_eq!(entry.token, token);
    }
    assert!(matches!(served.score(vec![], 1), Err(SubmitError::EmptyPrompt)));
    assert!(matches!(served.score(vec![1], 21), Err(SubmitError::TooManyLogprobs { .. })));
    assert!(matches!(served.score(vec![1; 97], 1), Err(SubmitError::TextTooLong { .. })));
}

/// A prompt's score is read a chunk of the prefill budget per step, in
/// the steps of the running sequences (as a prompt is): a generation beside
/// gets a token in each of the score's steps, and the score has the bits
/// of the same text scored on an idle engine.
#[test]
fn a_score_rides_the_steps_a_chunk_at_a_time() {
    let (_dir, path) = synth_model("engine-score-steps", SynthShape::Tiny, DType::F32, 53);
    let text: Vec<u32> = (0..90u32).map(|j| (j * 37 + 5) % 500).collect();
    let chunk = 8;
    let idle = engine(&path, &["cpu"], 2, 4, chunk);
    let alone = idle.score(text.clone(), 4).expect("score").blocking_wait().expect("scored alone");
    idle.shutdown(Shutdown::Drain);
    assert_eq!(alone.len(), text.len() - 1);

    let served = engine(&path, &["cpu"], 2, 4, chunk);
    let mut running = served.submit(greedy(vec![1, 2, 3], 90)).expect("submit");
    loop {
        match running.blocking_next() {
            Some(Event::Token(_)) => break,
            Some(Event::Started { .. } | Event::Progress { .. }) => {}
            other => panic!("the generation ended before its first token: {other:?}"),
        }
    }
    let before = served.stats().generated_tokens;
    let beside = served.score(text.clone(), 4).expect("score").blocking_wait().expect("scored beside");
    let during = served.stats().generated_tokens - before;
    let steps = text.len().div_ceil(chunk) as u64;
    assert!(
        during + 1 >= steps,
        "the generation beside got {during} tokens while the score was read; {steps} steps read it"
    );
    assert!(beside == alone, "the score beside a generation differs from the score alone");
    drop(running);
    served.shutdown(Shutdown::Drain);
}

/// Each generated token comes after its log-probabilities: the
/// log-softmax (over the whole vocabulary, in f64) of the logits the same
/// model gives when it evaluates the prompt and the tokens itself, the
/// drawn token among the alternatives, the alternatives most likely first.
#[test]
fn logprobs_are_the_log_softmax_of_the_model_logits() {
    let (_dir, path) = synth_model("engine-logprobs", SynthShape::Tiny, DType::F32, 31);
    let served = engine(&path, &["cpu"], 2, 4, 16);
    let prompt = vec![1, 5, 9];
    let request = GenerateRequest { logprobs: Some(4), ..greedy(prompt.clone(), 6) };
    let mut generation = served.submit(request).expect("submit");
    let (mut entries, mut tokens) = (Vec::new(), Vec::new());
    loop {
        match generation.blocking_next().expect("an event") {
            Event::Logprobs(entry) => {
                assert_eq!(entries.len(), tokens.len(), "one entry before each token");
                entries.push(entry);
            }
            Event::Token(t) => tokens.push(t),
            Event::Started { .. } | Event::Progress { .. } => {}
            Event::Done(_) => break,
            Event::Failed(why) => panic!("{why}"),
        }
    }
    assert_eq!(entries.len(), 6);
    let options = LoadOptions { context: Some(96), batch: 64, ..LoadOptions::default() };
    let mut model = Model::load_split(&path, devices(&["cpu"]), &options).expect("load");
    let mut seen = prompt.clone();
    for (entry, &token) in entries.iter().zip(&tokens) {
        assert_eq!(entry.token, token);
        let logits = model.eval(&seen, 0, Logits::Last).expect("eval").to_vec();
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let norm = max + logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln();
        let want = |id: u32| logits[id as usize] as f64 - norm;
        assert!((entry.logprob as f64 - want(token)).abs() < 1e-5, "{} vs {}", entry.logprob, want(token));
        assert_eq!(entry.top.len(), 4);
        assert_eq!(entry.top[0].0, token, "greedy draws the most likely token");
        for pair in entry.top.windows(2) {
            assert!(pair[0].1 >= pair[1].1, "most likely first: {:?}", entry.top);
        }
        for &(id, logprob) in &entry.top {
            assert!((logprob as f64 - want(id)).abs() < 1e-5);
        }
        seen.push(token);
    }
    served.shutdown(Shutdown::Drain);
}

/// A generation's tokens, log-probabilities (20 alternatives) and the
/// cached prompt tokens its end reports.
fn with_logprobs(engine: &Engine, prompt: Vec<u32>, max_tokens: usize) -> (Vec<u32>, Vec<TokenLogprobs>, usize) {
    let request = GenerateRequest { logprobs: Some(20), ..greedy(prompt, max_tokens) };
    drain(engine.submit(request).expect("submit"))
}

/// Every token and log-probability of a generation, and the cached
/// prompt tokens its end reports.
fn drain(generation: baton_serve::engine::Generation) -> (Vec<u32>, Vec<TokenLogprobs>, usize) {
    let (tokens, entries, finish) = kit::drain(generation);
    (tokens, entries, finish.cached_tokens)
}

/// The prefix cache: a request whose prompt starts with what a free slot
/// holds evaluates only the rest, and gets the bits (tokens and
/// log-probabilities of 20 alternatives) of an engine that evaluates it
/// all: the same request again, a second turn that extends the first, and
/// both behind other sequences.
#[test]
fn a_cached_prefix_gives_the_bits_of_evaluating_it() {
    let (_dir, path) = synth_model("engine-prefix", SynthShape::Tiny, DType::F32, 37);
    let first: Vec<u32> = (1..30).collect();
    let fresh = || engine(&path, &["cpu"], 4, 4, 8);
    let cold = fresh();
    let (answer, logprobs, cached) = with_logprobs(&cold, first.clone(), 6);
    assert_eq!(cached, 0);
    let mut second = first.clone();
    second.extend(&answer);
    second.extend([40, 41, 42]);
    let cold_second = fresh();
    let want_second = with_logprobs(&cold_second, second.clone(), 6);
    assert_eq!(want_second.2, 0);
    for (i, warm) in [fresh(), fresh()].into_iter().enumerate() {
        // The second time, other sequences run beside.
        let busy: Vec<_> = [vec![3, 3, 3], vec![7; 20]]
            .into_iter()
            .filter(|_| i == 1)
            .map(|p| warm.submit(greedy(p, 60)).expect("submit"))
            .collect();
        let again = with_logprobs(&warm, first.clone(), 6);
        assert_eq!((&again.0, &again.1), (&answer, &logprobs), "the first turn");
        for _ in 0..2 {
            let (tokens, entries, cached) = with_logprobs(&warm, first.clone(), 6);
            assert_eq!(cached, first.len() - 1, "the whole prompt but its last token from the cache");
            assert_eq!((tokens, entries), (answer.clone(), logprobs.clone()), "the same request again");
        }
        let (tokens, entries, cached) = with_logprobs(&warm, second.clone(), 6);
        // The first turn's prompt and answer but the last answer token
        // (drawn, never evaluated).
        assert_eq!(cached, first.len() + answer.len() - 1, "the second turn reuses the first");
        assert_eq!((tokens, entries), (want_second.0.clone(), want_second.1.clone()), "the second turn");
        assert!(warm.metrics().prompt_tokens_cached > 0);
        if i == 1 {
            assert_eq!(warm.stats().running, 2, "the other sequences ran beside");
        }
        drop(busy);
    }
}

/// A hybrid model (recurrent state that holds exactly what its slot
/// evaluated): the same prompt again, and a prompt that shares the first
/// but not its answer (a template that rewrote the answer), resume at the
/// checkpoint taken one token before the first prompt's end, with the bits
/// of evaluating them; a turn that extends the first resumes at the
/// state's end; with no checkpoints kept, the first two start at 0.
#[test]
fn a_hybrid_models_checkpoints_resume_prompts_with_their_bits() {
    let (_dir, path) = synth_model("engine-checkpoints", SynthShape::Qwen35, DType::Q8_0, 43);
    let start = |checkpoints: usize| {
        let options = LoadOptions { context: Some(96), batch: 64, slots: 2, ..LoadOptions::default() };
        let model = Model::load(&path, devices(&["cpu"]).remove(0), &options).expect("load");
        let options =
            EngineOptions { parallel: 2, ctx_checkpoints: checkpoints, prefill_chunk: 8, ..EngineOptions::default() };
        Engine::start(model, "hybrid", options).expect("engine")
    };
    let first: Vec<u32> = (1..30).collect();
    let (answer, logprobs, _) = with_logprobs(&start(8), first.clone(), 6);
    let rewritten: Vec<u32> = first.iter().copied().chain([200, 201, 202]).collect();
    let extended: Vec<u32> = first.iter().chain(&answer[..answer.len() - 1]).copied().chain([90, 91]).collect();
    let cold = |prompt: &Vec<u32>| with_logprobs(&start(8), prompt.clone(), 6);
    let (want_rewritten, want_extended) = (cold(&rewritten), cold(&extended));
    for (checkpoints, resumed) in [(8, first.len() - 1), (0, 0)] {
        let warm = start(checkpoints);
        with_logprobs(&warm, first.clone(), 6);
        let again = with_logprobs(&warm, first.clone(), 6);
        assert_eq!((&again.0, &again.1, again.2), (&answer, &logprobs, resumed), "{checkpoints}: the same prompt");
        let got = with_logprobs(&warm, rewritten.clone(), 6);
        assert_eq!(
            (&got.0, &got.1, got.2),
            (&want_rewritten.0, &want_rewritten.1, resumed),
            "{checkpoints}: rewritten"
        );
    }
    let warm = start(8);
    with_logprobs(&warm, first.clone(), 6);
    let got = with_logprobs(&warm, extended.clone(), 6);
    let held = first.len() + answer.len() - 1;
    assert_eq!((&got.0, &got.1, got.2), (&want_extended.0, &want_extended.1, held), "a turn that extends the first");
}

/// A request whose prompt starts with what a running sequence has
/// evaluated takes those positions by a copy from its slot, and gets the
/// bits of evaluating them: a shared system prompt, once per layer split.
#[test]
fn a_running_sequences_prefix_is_copied_with_the_bits_of_evaluating_it() {
    let (_dir, path) = synth_model("engine-running-prefix", SynthShape::Tiny, DType::F32, 41);
    let system: Vec<u32> = (100..130).collect();
    let mut asked = system.clone();
    asked.extend([7, 8, 9, 10, 11]);
    let cold = engine(&path, &["cpu"], 2, 4, 8);
    let want = with_logprobs(&cold, asked.clone(), 8);
    assert_eq!(want.2, 0);
    for names in [&["cpu"][..], &["cpu:0", "cpu:1"][..]] {
        let warm = engine(&path, names, 3, 4, 8);
        let mut long = system.clone();
        long.extend([60, 61]);
        let mut running = warm.submit(greedy(long.clone(), 50)).expect("submit");
        // Its prompt is evaluated once its first token comes.
        let first = loop {
            if let Some(Event::Token(t)) = running.blocking_next() {
                break t;
            }
        };
        let copied_before = warm.metrics().prompt_tokens_cached;
        let (tokens, entries, cached) = with_logprobs(&warm, asked.clone(), 8);
        assert_eq!(cached, system.len(), "{names:?}: the system prompt is copied from the running sequence");
        assert_eq!((tokens, entries), (want.0.clone(), want.1.clone()), "{names:?}: the bits of evaluating it");
        assert_eq!(warm.metrics().prompt_tokens_cached - copied_before, system.len() as u64);
        assert_eq!(warm.stats().running, 1, "{names:?}: the other sequence still runs");
        // It goes on with its own tokens too.
        let (rest, _) = collect(running);
        let alone = collect(cold.submit(greedy(long, 50)).expect("submit")).0;
        assert_eq!([vec![first], rest].concat(), alone, "{names:?}: the source sequence's tokens");
    }
}

/// Requests that arrive together with a long start in common: the first
/// reads it, the others wait for that and take its blocks (a paged
/// cache), each with the tokens it gets served alone.
#[test]
fn requests_arriving_together_read_their_shared_start_once() {
    let (_dir, path) = synth_model("engine-shared-start", SynthShape::Tiny, DType::F32, 43);
    let system: Vec<u32> = (200..280).collect();
    let prompts: Vec<Vec<u32>> = (0..4u32).map(|i| [system.clone(), vec![10 + i, 20, 30 + i]].concat()).collect();
    let alone = engine(&path, &["cpu"], 1, 4, 16);
    let want: Vec<Vec<u32>> =
        prompts.iter().map(|p| collect(alone.submit(greedy(p.clone(), 8)).expect("submit")).0).collect();
    let served = engine(&path, &["cpu"], 4, 4, 16);
    let generations: Vec<_> = prompts.iter().map(|p| served.submit(greedy(p.clone(), 8)).expect("submit")).collect();
    let mut cached = Vec::new();
    for (i, generation) in generations.into_iter().enumerate() {
        let (tokens, last) = collect(generation);
        assert_eq!(tokens, want[i], "request {i}");
        let Event::Done(finish) = last else { panic!("request {i} ended with {last:?}") };
        cached.push(finish.cached_tokens);
    }
    cached.sort_unstable();
    assert_eq!(cached, [0, system.len(), system.len(), system.len()], "the shared start read once");
    let blocks = served.metrics().kv_blocks;
    assert!(blocks[2] >= 1, "the shared start's whole block is held once: {blocks:?}");
}

/// `--cache-ram`: a prompt whose slot another request took is saved to
/// host memory and written back for a request that starts the same way,
/// with the bits of evaluating it; the budget holds, and a budget smaller
/// than a prompt keeps nothing and changes nothing.
#[test]
fn a_prompt_saved_in_host_memory_comes_back_with_its_bits() {
    let (_dir, path) = synth_model("engine-cache-ram", SynthShape::Tiny, DType::F32, 43);
    let first: Vec<u32> = (200..260).collect();
    let mut again = first.clone();
    again.extend([3, 4, 5]);
    let cold = engine(&path, &["cpu"], 2, 4, 8);
    let want = with_logprobs(&cold, again.clone(), 6);
    for budget in [64 << 20, 1024] {
        let options = LoadOptions { context: Some(96), batch: 64, slots: 2, ..LoadOptions::default() };
        let model = Model::load_split(&path, devices(&["cpu"]), &options).expect("load");
        let options =
            EngineOptions { parallel: 2, queue: 4, prefill_chunk: 8, cache_ram: budget, ..EngineOptions::default() };
        let warm = Engine::start(model, "tiny", options).expect("engine");
        with_logprobs(&warm, first.clone(), 4);
        // Two other prompts take both slots: the first prompt's is reused.
        for other in [vec![9; 40], vec![11; 40]] {
            with_logprobs(&warm, other, 4);
        }
        let metrics = warm.metrics();
        assert!(metrics.cache_ram_bytes <= budget as u64, "{budget}: {} bytes held", metrics.cache_ram_bytes);
        let (tokens, entries, cached) = with_logprobs(&warm, again.clone(), 6);
        assert_eq!((tokens, entries), (want.0.clone(), want.1.clone()), "{budget}: the bits of evaluating it");
        if budget > 1024 {
            assert!(metrics.cache_ram_prompts >= 1, "the first prompt was saved");
            assert_eq!(cached, first.len(), "the first prompt from host memory");
        } else {
            assert_eq!((metrics.cache_ram_prompts, metrics.cache_ram_bytes), (0, 0), "nothing fits in 1 KiB");
            assert_eq!(cached, 0);
        }
    }
}

/// Embeddings ride the decode steps (their tokens in the steps' rows, in
/// chunks of the prefill budget): each is the text's alone bit for bit
/// (`Model::embed`), and a generation beside keeps its tokens and
/// log-probabilities.
#[test]
fn embeddings_in_the_steps_are_the_texts_alone_and_change_no_generation() {
    let (_dir, path) = synth_model("engine-embed-steps", SynthShape::Tiny, DType::F32, 47);
    let texts: Vec<Vec<u32>> =
        (0..6u32).map(|i| (0..(5 + 7 * i)).map(|j| (i * 31 + j * 7 + 1) % 500).collect()).collect();
    let options = LoadOptions { context: Some(96), batch: 64, slots: 1, ..LoadOptions::default() };
    let mut alone = Model::load_split(&path, devices(&["cpu"]), &options).expect("load");
    let want: Vec<Vec<f32>> =
        texts.iter().map(|t| alone.embed(0, t, baton_model::Pooling::Mean).expect("embed")).collect();
    let prompt: Vec<u32> = (1..25).collect();
    let cold = engine(&path, &["cpu"], 4, 8, 8);
    let generation = with_logprobs(&cold, prompt.clone(), 30);
    for names in [&["cpu"][..], &["cpu:0", "cpu:1"][..]] {
        let served = engine(&path, names, 4, 16, 8);
        let running =
            served.submit(GenerateRequest { logprobs: Some(20), ..greedy(prompt.clone(), 30) }).expect("submit");
        let tickets: Vec<_> =
            texts.iter().map(|t| served.embed(t.clone(), baton_model::Pooling::Mean).expect("embed")).collect();
        for (i, (ticket, want)) in tickets.into_iter().zip(&want).enumerate() {
            let got = ticket.blocking_wait().expect("an embedding");
            assert!(got == *want, "{names:?}: text {i} differs from its embedding alone");
        }
        let (tokens, entries, _) = drain(running);
        assert_eq!((tokens, entries), (generation.0.clone(), generation.1.clone()), "{names:?}: the generation beside");
    }
}

#[test]
fn concurrent_greedy_requests_match_each_served_alone() {
    // Weights and KV cache types; Qwen 3's heads of 32 take a cache of
    // 8-bit blocks (`-ctk q8_0 -ctv q8_0`).
    let models = [(SynthShape::Tiny, DType::F32, DType::F16), (SynthShape::Tiny, DType::Q4_1, DType::F16)];
    for (shape, dtype, cache) in models.into_iter().chain([(SynthShape::Qwen3, DType::Q8_0, DType::Q8_0)]) {
        let (_dir, path) = synth_model(&format!("engine-bits-{shape}"), shape, dtype, 31);
        let alone = pipelined(&path, &["cpu"], 1, 16, 16, 1, cache);
        let expected: Vec<_> = requests().into_iter().map(|r| collect(alone.submit(r).expect("submit")).0).collect();
        alone.shutdown(Shutdown::Drain);
        let cases = [(8, 7, 1), (3, 64, 1), (8, 5, 2), (5, 64, 3)];
        let layer_splits = [&["cpu"][..], &["cpu:0", "cpu:1"][..]]
            .into_iter()
            .flat_map(|names| cases.iter().map(move |&(parallel, chunk, copies)| (names, parallel, chunk, copies)));
        // The tensor split (exact sums), named "tensor" in the messages.
        let tensor = [(&["tensor"][..], 8, 6, 1)];
        for (names, parallel, chunk, copies) in layer_splits.chain(tensor) {
            let served = if names == ["tensor"] {
                tensor_split(&path, parallel, chunk, cache)
            } else {
                pipelined(&path, names, parallel, 16, chunk, copies, cache)
            };
            let generations: Vec<_> = requests().into_iter().map(|r| served.submit(r).expect("submit")).collect();
            for (i, (generation, want)) in generations.into_iter().zip(&expected).enumerate() {
                let (tokens, last) = collect(generation);
                let case = format!(
                    "{shape} {dtype}, {cache} cache, on {names:?}, parallel {parallel}, chunk {chunk}, {copies} in flight"
                );
                assert_eq!(&tokens, want, "{case}: request {i} (ended with {last:?})");
                let Event::Done(finish) = last else { panic!("request {i} ended with {last:?}") };
                assert_eq!(finish.reason, FinishReason::Length);
                assert_eq!(finish.completion_tokens, 6 + i);
                assert_eq!(finish.prompt_tokens, requests()[i].prompt.len());
            }
            let stats = served.stats();
            assert_eq!((stats.running, stats.queued), (0, 0));
            assert_eq!(stats.generated_tokens, (6..14).sum::<u64>());
            served.shutdown(Shutdown::Drain);
        }
    }
}

/// Waits until `what` holds of the engine's counters (bounded).
fn eventually(engine: &Engine, what: impl Fn(&baton_serve::engine::EngineStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !what(&engine.stats()) {
        assert!(Instant::now() < deadline, "the engine never got there: {:?}", engine.stats());
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_dropped_generation_frees_its_slot_and_the_queue_has_a_limit() {
    let (_dir, path) = tiny_model("engine-cancel", DType::F32, 3);
    let served = engine(&path, &["cpu"], 1, 1, 16);
    // Runs until its context is full unless dropped.
    let mut long = served.submit(GenerateRequest { max_tokens: None, ..greedy(vec![1, 2, 3], 1) }).expect("submit");
    assert!(matches!(long.blocking_next(), Some(Event::Started { cached_tokens: 0 })));
    // The prompt read in one chunk: all 3 of its tokens.
    assert!(matches!(long.blocking_next(), Some(Event::Progress { read: 3 })));
    assert!(matches!(long.blocking_next(), Some(Event::Token(_))));
    let waiting = served.submit(greedy(vec![4, 5], 3)).expect("queued");
    eventually(&served, |s| s.queued == 1);
    let refused = served.submit(greedy(vec![6], 3)).expect_err("the queue is full");
    assert!(matches!(refused, SubmitError::QueueFull { running: 1, queued: 1 }), "{refused:?}");
    drop(long);
    // No queue: a request is taken only when a slot is free.
    let none = engine(&path, &["cpu"], 1, 0, 16);
    let first = none.submit(greedy(vec![1, 2], 2)).expect("a free slot takes it");
    let (tokens, _) = collect(first);
    assert_eq!(tokens.len(), 2);
    let mut busy = none.submit(GenerateRequest { max_tokens: None, ..greedy(vec![1, 2, 3], 1) }).expect("free again");
    assert!(matches!(busy.blocking_next(), Some(Event::Started { .. })));
    assert!(matches!(busy.blocking_next(), Some(Event::Progress { .. })));
    assert!(matches!(busy.blocking_next(), Some(Event::Token(_))));
    assert!(matches!(none.submit(greedy(vec![4], 2)), Err(SubmitError::QueueFull { .. })));
    drop(busy);
    none.shutdown(Shutdown::Drain);
    // The waiting request gets the freed slot and finishes.
    let (tokens, last) = collect(waiting);
    assert_eq!(tokens.len(), 3);
    assert!(matches!(last, Event::Done(_)), "{last:?}");
    eventually(&served, |s| s.cancelled == 1 && s.running == 0);
    served.shutdown(Shutdown::Drain);
}

#[test]
fn bad_requests_are_refused_before_queueing() {
    let (_dir, path) = tiny_model("engine-bad", DType::F32, 4);
    let served = engine(&path, &["cpu"], 2, 4, 16);
    let cases: Vec<(GenerateRequest, &str)> = vec![
        (greedy(vec![], 3), "empty"),
        (greedy(vec![600], 3), "outside the vocabulary"),
        (greedy(vec![1; 96], 3), "a sequence's context holds 96"),
        (greedy(vec![1; 90], 7), "exceed a sequence's context of 96"),
        (greedy(vec![1], 0), "at least 1"),
        (
            GenerateRequest {
                sampling: SamplingParams { top_p: 0.0, ..SamplingParams::default() },
                ..greedy(vec![1], 3)
            },
            "top_p",
        ),
        (GenerateRequest { logprobs: Some(21), ..greedy(vec![1], 3) }, "at most 20 alternatives"),
    ];
    for (request, why) in cases {
        let err = served.submit(request).expect_err(why).to_string();
        assert!(err.contains(why), "{err:?} should say {why:?}");
    }
    assert_eq!(served.stats().queued, 0);
    // Still serving.
    assert_eq!(collect(served.submit(greedy(vec![1, 2], 2)).expect("good")).0.len(), 2);
    served.shutdown(Shutdown::Drain);
}

#[test]
fn shutdown_cancel_ends_every_generation_and_refuses_new_ones() {
    let (_dir, path) = tiny_model("engine-shutdown", DType::F32, 5);
    let served = engine(&path, &["cpu"], 1, 4, 16);
    let running = served.submit(GenerateRequest { max_tokens: None, ..greedy(vec![1, 2], 1) }).expect("submit");
    let waiting = served.submit(greedy(vec![3], 2)).expect("queued");
    served.shutdown(Shutdown::Cancel);
    for generation in [running, waiting] {
        let (_, last) = collect(generation);
        assert!(matches!(&last, Event::Failed(why) if why.contains("shutting down")), "{last:?}");
    }
    assert!(matches!(served.submit(greedy(vec![1], 1)), Err(SubmitError::ShuttingDown)));
}

/// An engine over a paged cache of `pool` blocks of 64 positions (`None`:
/// a slot per sequence), context 512.
fn pooled(path: &std::path::Path, parallel: usize, pool: Option<usize>) -> Engine {
    let model = Model::load_split(path, devices(&["cpu"]), &kit::paged(parallel, pool)).expect("load");
    let options = EngineOptions { parallel, queue: 32, prefill_chunk: 32, ..EngineOptions::default() };
    Engine::start(model, "tiny", options).expect("engine")
}

/// A pool far smaller than every slot's context under load: requests wait
/// for blocks and running ones are preempted and read again, and every
/// request still ends with the tokens and log-probabilities it gets served
/// alone, greedy and sampled with a seed and penalties (its sampler goes
/// on where it stopped); with sliding-window rings and recurrent state
/// beside the paged layers too.
#[test]
fn a_full_pool_preempts_and_every_request_gets_its_tokens() {
    for shape in [SynthShape::Tiny, SynthShape::Gemma3, SynthShape::Qwen35] {
        let (_dir, path) = synth_model("engine-pool", shape, DType::F32, 47);
        let system: Vec<u32> = (300..370).collect();
        let requests: Vec<GenerateRequest> = (0..8u32)
            .map(|i| {
                let own = (0..[20, 90, 5, 130, 45, 70, 10, 110][i as usize]).map(|j| (i * 37 + j * 11 + 5) % 500);
                let prompt = if i % 2 == 0 { system.iter().copied().chain(own).collect() } else { own.collect() };
                let sampling = SamplingParams { seed: 7 + i as u64, repeat_penalty: 1.1, ..SamplingParams::default() };
                let request = GenerateRequest { logprobs: Some(3), ..greedy(prompt, 100 + 20 * i as usize) };
                if i % 3 == 0 {
                    GenerateRequest { sampling, ..request }
                } else {
                    request
                }
            })
            .collect();
        let alone = pooled(&path, 1, None);
        let want: Vec<_> = requests.iter().map(|r| drain(alone.submit(r.clone()).expect("submit"))).collect();
        // 8 blocks (512 positions) for 4 slots of 512: about a quarter of
        // what the requests hold at once.
        let served = pooled(&path, 4, Some(8));
        let generations: Vec<_> = requests.iter().map(|r| served.submit(r.clone()).expect("submit")).collect();
        for (i, generation) in generations.into_iter().enumerate() {
            let (tokens, entries, _) = drain(generation);
            assert_eq!(tokens, want[i].0, "{shape} request {i}: its tokens");
            assert!(entries == want[i].1, "{shape} request {i}: its log-probabilities");
        }
        let metrics = served.metrics();
        assert!(metrics.kv_preemptions > 0, "{shape}: the pool was too small not to preempt");
        assert_eq!((metrics.ended_failed, metrics.stats.running), (0, 0), "{shape}");
        assert!(metrics.kv_blocks[1] <= 8, "{shape}: never more than the pool: {:?}", metrics.kv_blocks);
    }
}

/// A sequence that alone needs more blocks than the pool holds ends as at
/// the end of its context (`length`, the tokens it had); a prompt longer
/// than the pool fails naming the flag; the engine serves on.
#[test]
fn a_sequence_longer_than_the_pool_ends_there() {
    let (_dir, path) = synth_model("engine-pool-end", SynthShape::Tiny, DType::F32, 47);
    let prompt: Vec<u32> = (0..100).map(|j| (j * 13 + 1) % 500).collect();
    let whole = drain(pooled(&path, 1, None).submit(greedy(prompt.clone(), 100)).expect("submit")).0;
    let served = pooled(&path, 2, Some(2));
    let (tokens, last) = collect(served.submit(greedy(prompt.clone(), 100)).expect("submit"));
    assert!(matches!(last, Event::Done(ref f) if f.reason == FinishReason::Length), "{last:?}");
    // 128 positions: the prompt's 100 and the first 28 tokens generated;
    // the 29th is sent, its keys never written.
    assert_eq!(tokens, whole[..29], "the tokens up to the pool's end");
    let long: Vec<u32> = (0..200).map(|j| (j * 7 + 2) % 500).collect();
    let (_, last) = collect(served.submit(greedy(long, 4)).expect("submit"));
    assert!(matches!(last, Event::Failed(ref why) if why.contains("--kv-pool")), "{last:?}");
    let (tokens, _) = collect(served.submit(greedy(prompt, 8)).expect("submit"));
    assert_eq!(tokens, whole[..8], "served on");
}

/// A request sharing only the start of an idle slot's cached prompt takes
/// another free slot and shares that start's blocks, so the idle slot's
/// whole prompt stays cached for the request that repeats it (before, the
/// request took that slot and dropped its tail); every answer has the bits
/// of evaluating it.
#[test]
fn a_request_sharing_an_idle_slots_start_keeps_that_slots_prompt() {
    let (_dir, path) = synth_model("engine-idle-share", SynthShape::Tiny, DType::F32, 47);
    let system: Vec<u32> = (300..380).collect();
    let first = [system.clone(), vec![5, 6, 7, 8]].concat();
    let other = [system.clone(), vec![9, 10, 11]].concat();
    let cold = pooled(&path, 1, None);
    let want: Vec<_> = [&first, &other].iter().map(|p| with_logprobs(&cold, p.to_vec(), 6)).collect();
    let served = pooled(&path, 3, Some(24));
    with_logprobs(&served, first.clone(), 6);
    let (tokens, entries, cached) = with_logprobs(&served, other.clone(), 6);
    assert_eq!(cached, system.len(), "the shared start from the idle slot");
    assert_eq!((tokens, entries), (want[1].0.clone(), want[1].1.clone()));
    let (tokens, entries, cached) = with_logprobs(&served, first.clone(), 6);
    assert_eq!(cached, first.len() - 1, "the first prompt is still cached whole");
    assert_eq!((tokens, entries), (want[0].0.clone(), want[0].1.clone()));
    assert!(served.metrics().kv_blocks[2] >= 1, "the start's block is held once by both slots");
}

/// Work lent the model (`Engine::lend`, the Python package's token-level
/// session) runs on the slot reserved after the `parallel` ones, beside
/// running generations: its logits are the model's alone, what it leaves
/// in the slot is there for the next lend, and the generations' tokens are
/// those they get without it. A slot not reserved, or a model without the
/// reserved slot, is refused.
#[test]
fn lent_work_runs_on_its_own_slot_and_changes_no_generation() {
    let (_dir, path) = synth_model("engine-lend", SynthShape::Tiny, DType::F32, 53);
    let tokens: Vec<u32> = (0..30u32).map(|j| (j * 13 + 5) % 500).collect();
    let options = LoadOptions { context: Some(96), batch: 64, slots: 1, ..LoadOptions::default() };
    let mut alone = Model::load_split(&path, devices(&["cpu"]), &options).expect("load");
    let want = alone.eval_slot(0, &tokens, 0, Logits::Last).expect("eval").to_vec();
    let prompt: Vec<u32> = (1..25).collect();
    let cold = engine(&path, &["cpu"], 2, 8, 8);
    let generation = collect(cold.submit(greedy(prompt.clone(), 30)).expect("submit")).0;
    let lending = EngineOptions { parallel: 2, queue: 8, prefill_chunk: 8, lent_slots: 1, ..EngineOptions::default() };
    let model =
        Model::load_split(&path, devices(&["cpu"]), &LoadOptions { slots: 3, ..options.clone() }).expect("load");
    let served = Engine::start(model, "tiny", lending.clone()).expect("engine");
    let running: Vec<_> = (0..2).map(|_| served.submit(greedy(prompt.clone(), 30)).expect("submit")).collect();
    let (head, tail) = (tokens[..12].to_vec(), tokens[12..].to_vec());
    let first = served.lend(0, move |model, slot| {
        model.eval_slot(slot, &head, 0, Logits::Last).map(|_| slot).map_err(|e| e.to_string())
    });
    let slot = first.expect("lend").blocking_wait().expect("lent").expect("eval");
    assert_eq!(slot, 2, "the slot after the two parallel ones");
    let rest = served.lend(0, move |model, slot| {
        model.eval_slot(slot, &tail, 12, Logits::Last).map(<[f32]>::to_vec).map_err(|e| e.to_string())
    });
    let got = rest.expect("lend").blocking_wait().expect("lent").expect("eval");
    assert!(got == want, "the lent slot's logits after two lends differ from the text evaluated alone");
    for (i, generation_beside) in running.into_iter().enumerate() {
        assert_eq!(collect(generation_beside).0, generation, "generation {i} beside the lent work");
    }
    let refused = served.lend(1, |_, _| ()).map(drop);
    assert!(matches!(refused, Err(SubmitError::NoLentSlot { index: 1, lent: 1 })), "{refused:?}");
    let short = Model::load_split(&path, devices(&["cpu"]), &LoadOptions { slots: 2, ..options }).expect("load");
    assert!(Engine::start(short, "tiny", lending).is_err(), "a model without the reserved slot is refused");
}
