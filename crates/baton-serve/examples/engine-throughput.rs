//! Aggregate decode speed of the engine with 1 to N concurrent greedy
//! requests, without HTTP: `cargo run --release -p baton-serve --example
//! engine-throughput -- MODEL.gguf [DEVICES] [N_COPIES] [CLIENTS,…]`.

use std::time::Instant;

use baton_model::{EncodeOptions, LoadOptions, Model};
use baton_serve::engine::{Engine, EngineOptions, Event, GenerateRequest, Shutdown};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: engine-throughput MODEL.gguf [DEVICES] [N_COPIES] [CLIENTS,…]")?;
    let names: Vec<String> = args.next().unwrap_or_else(|| "cpu".into()).split(',').map(str::to_string).collect();
    let copies: usize = args.next().map_or(Ok(1), |c| c.parse())?;
    let counts: Vec<usize> =
        args.next().unwrap_or_else(|| "1,2,4,8,16".into()).split(',').map(str::parse).collect::<Result<_, _>>()?;
    let max_tokens = 64;
    for clients in counts {
        let devices = baton_cpu::open(&names.iter().map(String::as_str).collect::<Vec<_>>())?;
        let options = LoadOptions { context: Some(512), slots: clients, n_copies: copies, ..LoadOptions::default() };
        let model = Model::load_split(&path, devices, &options)?;
        let prompt_text = "Once upon a time, in a small village by the sea, there lived";
        let prompt =
            model.tokenizer().encode(prompt_text, EncodeOptions { add_special: true, parse_special: false })?;
        let engine = Engine::start(
            model,
            "m",
            EngineOptions { parallel: clients, queue: 64, prefill_chunk: 256, ..EngineOptions::default() },
        )?;
        // Warm up (plans).
        let mut warm = engine.submit(request(&prompt, 4, 0))?;
        while !matches!(warm.blocking_next(), Some(Event::Done(_)) | None) {}
        let start = Instant::now();
        let (steps0, waits0) = (engine.stats().steps, engine.stats().host_waits);
        let gens: Vec<_> =
            (0..clients).map(|i| engine.submit(request(&prompt, max_tokens, i as u32))).collect::<Result<_, _>>()?;
        let mut tokens = 0;
        for mut g in gens {
            while let Some(event) = g.blocking_next() {
                match event {
                    Event::Token(_) => tokens += 1,
                    Event::Logprobs(_) | Event::Started { .. } | Event::Progress { .. } => {}
                    Event::Done(_) => break,
                    Event::Failed(why) => return Err(why.into()),
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let stats = engine.stats();
        let steps = stats.steps - steps0;
        println!(
            "{clients:>2} clients: {tokens} tokens in {secs:.2} s = {:.1} t/s ({steps} steps, {:.2} host waits per step)",
            tokens as f64 / secs,
            (stats.host_waits - waits0) as f64 / steps.max(1) as f64
        );
        engine.shutdown(Shutdown::Drain);
    }
    Ok(())
}

fn request(prompt: &[u32], max_tokens: usize, i: u32) -> GenerateRequest {
    // A different first token per client, so the sequences differ.
    let mut prompt = prompt.to_vec();
    prompt.push(1000 + i);
    GenerateRequest::greedy(prompt, max_tokens)
}
