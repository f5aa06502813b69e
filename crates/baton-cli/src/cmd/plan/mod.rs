//! `baton plan`: how a model's graph is split over devices.

mod expert_split;
mod hosts;
mod tensor;

use anyhow::Result;
use baton_model::{GraphShape, Logits};
use clap::Args;

use crate::cli::args::ModelArgs;

/// Arguments of `baton plan`.
#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Tokens of the evaluation to plan (1 = a decode step).
    #[arg(short = 'p', long = "n-tokens", default_value_t = 1)]
    tokens: usize,
    /// Cached positions before them.
    #[arg(long, default_value_t = 0)]
    past: usize,
    /// Predict layer and tensor splits over these host counts (e.g.
    /// `2,3,4,8`) from this host's measured speed and the link's
    /// (`--link-gbps`, `--link-us`), instead of printing the plan.
    #[arg(long, value_delimiter = ',')]
    hosts: Vec<usize>,
    /// The link's bandwidth in Gbit/s (with `--hosts`).
    #[arg(long = "link-gbps", default_value_t = 10.0)]
    link_gbps: f64,
    /// The link's one-way latency in µs (with `--hosts`).
    #[arg(long = "link-us", default_value_t = 20.0)]
    link_us: f64,
    /// More shapes to predict (with `--hosts`): `llama-7b`, `llama-70b`.
    #[arg(long, value_delimiter = ',', default_value = "llama-7b,llama-70b")]
    shapes: Vec<String>,
    /// Bits per weight of those shapes (Q4_K_M is about 4.9).
    #[arg(long, default_value_t = 4.9)]
    bits: f64,
    /// Prompt length of the prompt-speed prediction (with `--hosts`).
    #[arg(long = "prompt-tokens", default_value_t = 512)]
    prompt_tokens: usize,
}

/// Runs `baton plan`.
pub fn run(args: PlanArgs) -> Result<()> {
    if !args.hosts.is_empty() {
        return predict_hosts(&args);
    }
    let mut margs = args.model.clone();
    margs.context = Some(margs.context.unwrap_or(0).max(args.tokens + args.past).max(1));
    margs.batch = margs.batch.max(args.tokens);
    let mut model = margs.load()?;
    let (devices, layers) = model.placement();
    let names: Vec<String> = devices.iter().map(|d| d.info().name.clone()).collect();
    let experts_of = model.expert_placement();
    println!("layers per device:");
    for (d, name) in names.iter().enumerate() {
        let mine: Vec<usize> = layers.iter().enumerate().filter(|(_, &x)| x == d).map(|(l, _)| l).collect();
        // The experts this device holds: its layers', or others' placed here.
        // (Under an expert split, every device's share is described below.)
        let experts: Vec<usize> = match model.expert_split() {
            Some(_) => Vec::new(),
            None => experts_of.iter().enumerate().filter(|(_, &x)| x == d).map(|(l, _)| l).collect(),
        };
        let (held, read) = experts.iter().map(|&l| model.expert_bytes(l)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let experts = if held > 0 {
            let mib = |b: usize| b as f64 / f64::from(1 << 20);
            let whose = if experts != mine { format!(" of {} layers", experts.len()) } else { String::new() };
            format!("experts{whose} {:.1} MiB held, {:.1} MiB read a token", mib(held), mib(read))
        } else {
            String::new()
        };
        match (mine.first(), mine.last()) {
            (Some(first), Some(last)) if experts.is_empty() => {
                println!("  {name}: layers {first}..={last} ({} layers)", mine.len())
            }
            (Some(first), Some(last)) => {
                println!("  {name}: layers {first}..={last} ({} layers); {experts}", mine.len())
            }
            _ if !experts.is_empty() => println!("  {name}: no layers; {experts}"),
            _ => {}
        }
    }
    if let Some(split) = model.expert_split() {
        print!("{}", expert_split::describe(&model, split, &names));
    }
    let shape = GraphShape::new(args.tokens, args.past, Logits::Last, model.context());
    if let Some(partition) = model.tensor_partition(shape)? {
        let inner: Vec<String> = match model.tensor_parallel() {
            Some((device, _)) => device.inner().iter().map(|d| d.info().name.clone()).collect(),
            None => names,
        };
        let plan = model.plan(shape)?;
        print!("{}", tensor::describe(&plan.graph, &partition, &inner));
        return Ok(());
    }
    let plan = model.plan(shape)?;
    print!("{plan}");
    Ok(())
}

/// `--hosts`: measures this host, then prints the cost model's table.
fn predict_hosts(args: &PlanArgs) -> Result<()> {
    use std::time::Instant;
    anyhow::ensure!(
        args.link_gbps > 0.0 && args.link_us >= 0.0,
        "--link-gbps must be above 0 and --link-us at least 0"
    );
    anyhow::ensure!(args.hosts.iter().all(|&n| n >= 1), "--hosts counts start at 1");
    let mut margs = args.model.clone();
    margs.context = Some(margs.context.unwrap_or(256).max(192));
    let mut model = margs.load()?;
    let c = model.config().clone();
    let tokens: Vec<u32> = (0..64u32).map(|i| (i * 7 + 1) % c.vocab as u32).collect();
    // Warm up, then the best of 3: a 64-token prompt and 16 decode steps.
    model.eval_prompt(&tokens, 0)?;
    let (mut pp, mut tg) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let start = Instant::now();
        model.eval_prompt(&tokens, 0)?;
        pp = pp.min(start.elapsed().as_secs_f64() / tokens.len() as f64);
        let start = Instant::now();
        for (i, &t) in tokens[..16].iter().enumerate() {
            model.eval(&[t], 64 + i, Logits::Last)?;
        }
        tg = tg.min(start.elapsed().as_secs_f64() / 16.0);
    }
    let local = hosts::Shape {
        name: "this model".into(),
        dim: c.dim,
        layers: c.layers,
        ffn: c.ffn_dim,
        kv_dim: c.kv_heads * c.head_dim,
        vocab: c.vocab,
        decode_bytes: model.decode_weight_bytes() as f64,
    };
    let measured =
        hosts::Measured { decode_s_per_byte: tg / local.decode_bytes, prompt_s_per_param_token: pp / local.params() };
    println!(
        "measured on this host ({}): decode {:.1} t/s ({:.1} GB/s of weights), prompt {:.1} t/s",
        args.model.devices,
        1.0 / tg,
        local.decode_bytes / tg / 1e9,
        1.0 / pp
    );
    let link = hosts::Link { bytes_per_s: args.link_gbps * 1e9 / 8.0, latency_s: args.link_us * 1e-6 };
    println!("link: {} Gbit/s, {} µs; each host as fast as this one\n", args.link_gbps, args.link_us);
    let mut shapes = vec![local];
    for name in &args.shapes {
        shapes.push(
            hosts::Shape::named(name, args.bits)
                .ok_or_else(|| anyhow::anyhow!("unknown shape {name:?}: llama-7b or llama-70b"))?,
        );
    }
    let mut counts = vec![1];
    counts.extend(args.hosts.iter().copied().filter(|&n| n > 1));
    print!("{}", hosts::table(&shapes, &counts, link, measured, args.prompt_tokens, margs.batch.min(64)));
    Ok(())
}
