//! `baton plan`: how a model's graph is split over devices.

mod tensor;

use anyhow::Result;
use baton_llama::{GraphShape, Logits};
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
}

/// Runs `baton plan`.
pub fn run(args: PlanArgs) -> Result<()> {
    let mut margs = args.model.clone();
    margs.context = Some(margs.context.unwrap_or(0).max(args.tokens + args.past).max(1));
    margs.batch = margs.batch.max(args.tokens);
    let mut model = margs.load()?;
    let (devices, layers) = model.placement();
    let names: Vec<String> = devices.iter().map(|d| d.info().name.clone()).collect();
    println!("layers per device:");
    for (d, name) in names.iter().enumerate() {
        let mine: Vec<usize> = layers.iter().enumerate().filter(|(_, &x)| x == d).map(|(l, _)| l).collect();
        if let (Some(first), Some(last)) = (mine.first(), mine.last()) {
            println!("  {name}: layers {first}..={last} ({} layers)", mine.len());
        }
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
