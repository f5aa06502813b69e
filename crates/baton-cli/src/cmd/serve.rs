//! `baton serve`: the OpenAI-compatible HTTP server
//! ([`baton_serve::http`]) over a continuously batching engine.
//!
//! The address it listens on is printed on stderr (`listening on
//! http://HOST:PORT`) once it accepts connections. Ctrl-C stops accepting,
//! lets the requests in flight finish for at most `--drain` seconds,
//! cancels the rest and exits 0; a second Ctrl-C exits at once.

use std::time::Duration;

use anyhow::{Context, Result};
use baton_serve::engine::{Engine, EngineOptions};
use baton_serve::http::{serve, ServerOptions};
use clap::Args;

use crate::cli::args::ModelArgs;
use crate::util::interrupt;

/// Arguments of `baton serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port; the one taken is printed).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests generated at once (`-np`): each has its sequence slot of
    /// `-c` positions in the KV cache.
    #[arg(long = "parallel", default_value_t = 4)]
    parallel: usize,
    /// Requests waiting for a slot at most; one more gets 429.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Most prompt tokens one step reads (a long prompt is read in chunks
    /// between the running requests' tokens).
    #[arg(long = "prefill-chunk", default_value_t = 64)]
    prefill_chunk: usize,
    /// Name of the served model (the `model` field requests must give, if
    /// any; default: the file's name without `.gguf`).
    #[arg(long)]
    alias: Option<String>,
    /// Largest request body in bytes (larger: 413).
    #[arg(long = "body-limit", default_value_t = 1 << 20)]
    body_limit: usize,
    /// Seconds the requests in flight may run on after Ctrl-C before they
    /// are cancelled.
    #[arg(long, default_value_t = 10.0)]
    drain: f64,
}

/// Runs `baton serve`.
pub fn run(args: ServeArgs) -> Result<()> {
    if !(args.drain.is_finite() && args.drain >= 0.0) {
        anyhow::bail!("--drain {}: a number of seconds, at least 0", args.drain);
    }
    let path = args.model.path()?;
    let name = match &args.alias {
        Some(alias) => alias.clone(),
        None => path.file_stem().map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned()),
    };
    let model = args.model.load_slots(args.parallel.max(1))?;
    let options = EngineOptions { parallel: args.parallel, queue: args.queue, prefill_chunk: args.prefill_chunk };
    let engine = Engine::start(model, name.clone(), options).context("starting the engine")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let server = ServerOptions { body_limit: args.body_limit, drain: Duration::from_secs_f64(args.drain) };
    runtime.block_on(async {
        let address = (args.host.as_str(), args.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("listening on {}:{}", args.host, args.port))?;
        let local = listener.local_addr()?;
        let info = engine.info();
        eprintln!(
            "serving `{name}` ({} positions per sequence, {} at once, queue {}); listening on http://{local}",
            info.context, args.parallel, args.queue
        );
        let ctrl_c = async {
            while !interrupt::requested() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            eprintln!("Ctrl-C: no new connections; finishing the requests in flight (Ctrl-C again exits at once)");
        };
        serve(listener, engine, server, ctrl_c).await.context("serving")
    })?;
    eprintln!("server stopped");
    Ok(())
}
