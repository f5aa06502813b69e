//! Serving over ranks, in one process: the engine tells each model call to
//! a second model through a loopback [`Mirror`], which makes the same calls
//! ([`follow_with`]) and so computes the same logits; a mirror that fails
//! stops the engine with an error on every request, not a hang.

use std::sync::mpsc;
use std::time::Duration;

use baton_core::DType;
use baton_model::{LoadOptions, Model};
use baton_serve::engine::{
    follow_with, Engine, EngineOptions, EngineState, Event, GenerateRequest, Mirror, MirrorCall,
};
use baton_testkit::synth::tiny_model;

fn load(path: &std::path::Path) -> Model {
    let options = LoadOptions { context: Some(96), batch: 64, slots: 2, ..LoadOptions::default() };
    Model::load(path, baton_cpu::open(&["cpu"]).expect("cpu").remove(0), &options).expect("load")
}

/// Sends each call, as its words, to the follower's channel.
struct Loopback {
    calls: mpsc::Sender<Vec<u32>>,
    fail_after: Option<usize>,
    told: usize,
}

impl Mirror for Loopback {
    fn tell(&mut self, call: &MirrorCall) -> Result<(), String> {
        self.told += 1;
        if self.fail_after.is_some_and(|n| self.told > n) {
            return Err("rank 1: silent past the deadline".into());
        }
        self.calls.send(call.encode()).map_err(|_| "the follower is gone".to_string())
    }

    fn idle_interval(&self) -> Duration {
        Duration::from_millis(20)
    }
}

fn tokens_of(mut generation: baton_serve::engine::Generation) -> Result<Vec<u32>, String> {
    let mut tokens = Vec::new();
    loop {
        match generation.blocking_next().expect("an event") {
            Event::Token(t) => tokens.push(t),
            Event::Done(_) => return Ok(tokens),
            Event::Failed(why) => return Err(why),
            _ => {}
        }
    }
}

#[test]
fn a_follower_makes_the_engines_calls_and_gets_its_logits() {
    let (_dir, path) = tiny_model("mirror", DType::F32, 51);
    let (calls, inbox) = mpsc::channel::<Vec<u32>>();
    let mut follower_model = load(&path);
    let follower = std::thread::spawn(move || {
        let mut argmaxes = Vec::new();
        let mut idles = 0;
        let mut next = || {
            let words = inbox.recv().map_err(|_| "rank 0 is gone".to_string())?;
            let call = MirrorCall::decode(&words).map_err(|e| e.to_string())?;
            idles += usize::from(call == MirrorCall::Idle);
            Ok(call)
        };
        let result = follow_with(&mut follower_model, &mut next, &mut |logits| {
            argmaxes.push(baton_testkit::argmax(logits));
        });
        (result, argmaxes, idles)
    });
    let mirror = Box::new(Loopback { calls, fail_after: None, told: 0 });
    let options = EngineOptions { parallel: 1, queue: 4, prefill_chunk: 8, ..EngineOptions::default() };
    let engine = Engine::start_mirrored(load(&path), "tiny", options, mirror).expect("engine");
    let prompt: Vec<u32> = (1..20).collect();
    let tokens = tokens_of(engine.submit(GenerateRequest::greedy(prompt, 10)).expect("submit")).expect("generation");
    // Idle a while: the engine tells the follower it is alive.
    std::thread::sleep(Duration::from_millis(100));
    drop(engine);
    let (result, argmaxes, idles) = follower.join().expect("follower");
    assert_eq!(result, Ok(()), "the follower ends when the engine stops");
    assert!(idles >= 2, "{idles} idle calls in 100 ms of 20 ms intervals");
    // The prompt's chunks of 8 (the last chunk's logits give the first
    // token), then one step per token but the last.
    assert_eq!(argmaxes.len(), 3 + 9);
    assert_eq!(argmaxes[2..], tokens[..], "the follower's logits give the engine's greedy tokens");
}

#[test]
fn a_mirror_that_fails_stops_the_engine_with_an_error() {
    let (_dir, path) = tiny_model("mirror-fail", DType::F32, 52);
    let (calls, inbox) = mpsc::channel::<Vec<u32>>();
    let mirror = Box::new(Loopback { calls, fail_after: Some(4), told: 0 });
    let options = EngineOptions { parallel: 2, queue: 4, prefill_chunk: 8, ..EngineOptions::default() };
    let engine = Engine::start_mirrored(load(&path), "tiny", options, mirror).expect("engine");
    let running = engine.submit(GenerateRequest::greedy((1..20).collect(), 40)).expect("submit");
    let why = tokens_of(running).expect_err("the generation fails");
    assert!(why.contains("over ranks") && why.contains("silent"), "{why}");
    assert!(matches!(engine.state(), EngineState::Failed(_)), "{:?}", engine.state());
    assert!(engine.submit(GenerateRequest::greedy(vec![1, 2], 2)).is_err(), "no request is taken after");
    drop(inbox);
}
