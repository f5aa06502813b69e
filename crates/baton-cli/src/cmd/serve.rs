//! `baton serve`: the OpenAI-compatible HTTP server
//! ([`baton_serve::http`]) over a continuously batching engine.
//!
//! The address it listens on is printed on stderr (`listening on
//! http://HOST:PORT`) once it accepts connections. Ctrl-C or SIGTERM (what
//! container runtimes and systemd send) stops accepting, lets the requests
//! in flight finish for at most `--drain` seconds, cancels the rest and
//! exits 0; a second signal exits at once. An engine that stops for good
//! (repeated panics of the model) ends the server with the cause and a
//! non-zero exit.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use baton_serve::engine::{Engine, EngineOptions};
use baton_serve::http::{serve, ApiKeys, CorsOrigins, ReasoningFormat, RequestDefaults, ServerOptions};
use clap::Args;

use crate::cli::args::ModelArgs;
use crate::cli::llama_flags::{LlamaFlags, LlamaServerFlags};
use crate::cli::spec::{DraftArgs, SpecArgs};
use crate::util::interrupt;

/// Arguments of `baton serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    draft: DraftArgs,
    /// Addresses to listen on, comma-separated (`127.0.0.1,::1`: both, on
    /// the same port, as llama-server's `--host`).
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
    /// Names of the served model, comma-separated (as llama-server's
    /// `--alias`): the first in sorted order is its `id` in `/v1/models`,
    /// which lists them all as its `aliases` (default: the file's name
    /// without `.gguf`). Requests may give any `model` name (as
    /// llama-server's), unless `--strict-model-name`: then one of these.
    #[arg(short = 'a', long)]
    alias: Option<String>,
    /// Tags of the served model, comma-separated: listed by `/v1/models`,
    /// nothing else (as llama-server's `--tags`).
    #[arg(long)]
    tags: Option<String>,
    /// Refuse (404) a request whose `model` is not the served model's name
    /// (as vLLM and OpenAI do); without it any name is served.
    #[arg(long = "strict-model-name")]
    strict_model_name: bool,
    /// Answer `GET /slots` (each slot's state) with 501, as llama-server's
    /// `--no-slots`.
    #[arg(long = "no-slots")]
    no_slots: bool,
    /// The origins whose web pages may call the server, separated by
    /// commas (`https://app.example,http://localhost:3000`; `localhost`
    /// for every page of this machine), or `*` for any (the default, as
    /// llama-server). Their answers carry `Access-Control-Allow-Origin`; a
    /// browser's preflight (`OPTIONS`) is answered without an API key.
    #[arg(long = "cors-origins", value_name = "ORIGINS", default_value = "*")]
    cors_origins: CorsOrigins,
    /// What becomes of a reasoning model's `<think>…</think>` (llama-server's
    /// flag): `deepseek` (the default) returns it as
    /// `message.reasoning_content` on chat completions
    /// (`delta.reasoning_content` streamed), as a `thinking` block on
    /// `/v1/messages` and a `reasoning` item on `/v1/responses`, and the
    /// rest as the text; `none` leaves it in the text.
    #[arg(long = "reasoning-format", value_name = "none|deepseek", default_value = "deepseek")]
    reasoning_format: ReasoningFormat,
    /// A chat template (Jinja) to use in place of the model file's
    /// (llama-server's flag): chat requests, `/apply-template` and `/props`
    /// use it.
    #[arg(long = "chat-template-file", value_name = "FILE", conflicts_with = "chat_template")]
    chat_template_file: Option<PathBuf>,
    /// A chat format by name (`chatml`, `llama3`, `command-r`; written
    /// from each format's documented turn markers), or a Jinja template's
    /// text, in place of the model file's (llama-server's flag).
    #[arg(long = "chat-template", value_name = "NAME|JINJA")]
    chat_template: Option<String>,
    /// Variables every chat rendering is given, as a JSON object
    /// (llama-server's flag), e.g. '{"enable_thinking": false}'; a
    /// request's `chat_template_kwargs` go over them.
    #[arg(long = "chat-template-kwargs", value_name = "JSON", value_parser = template_kwargs)]
    chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Sampling temperature of a request that gives none (llama-server's
    /// flag; default: llama.cpp's 0.8).
    #[arg(long = "temp")]
    temp: Option<f32>,
    /// Seed of a request that gives none (llama-server's flag; default: a
    /// fresh one per request).
    #[arg(long)]
    seed: Option<u64>,
    /// Most tokens of an answer whose request gives no `max_tokens`
    /// (llama-server's `-n`; cut to what the context leaves; default: the
    /// context's end).
    #[arg(short = 'n', long = "n-predict")]
    n_predict: Option<usize>,
    /// Largest request body in bytes (larger: 413).
    #[arg(long = "body-limit", default_value_t = 1 << 20)]
    body_limit: usize,
    /// Seconds the requests in flight may run on after Ctrl-C before they
    /// are cancelled.
    #[arg(long, default_value_t = 10.0)]
    drain: f64,
    /// Seconds a connection may take to send a request's headers, and may
    /// stay idle between kept-alive requests; then it is closed.
    #[arg(long = "header-timeout", default_value_t = 10.0)]
    header_timeout: f64,
    /// Seconds a request's body may take to arrive (slower: 408).
    #[arg(long = "body-timeout", default_value_t = 30.0)]
    body_timeout: f64,
    /// Connections served at once; more wait until one closes (default:
    /// 512, or less to stay under the open-file limit, `ulimit -n`).
    #[arg(long = "max-connections")]
    max_connections: Option<usize>,
    /// How `/v1/embeddings` pools a text's hidden states: `mean` over its
    /// tokens or the `last` token's (llama-server's `--pooling`).
    #[arg(long, default_value = "mean", value_parser = ["mean", "last"])]
    pooling: String,
    /// Evaluate every prompt whole: no reuse of the keys and values of
    /// earlier or running sequences that began the same way (to measure
    /// what the prefix cache saves).
    #[arg(long = "no-prefix-cache")]
    no_prefix_cache: bool,
    /// MiB of host memory for the keys and values of prompts whose slot was
    /// taken by another request (llama-server's `--cache-ram`); a later
    /// request that starts the same way gets them back instead of
    /// evaluating them. 0 keeps none.
    #[arg(long = "cache-ram", value_name = "MiB", default_value_t = 8192)]
    cache_ram: usize,
    /// Checkpoints of a hybrid model's recurrent state (Qwen 3.5) each slot
    /// keeps, at the ends of the prompts it evaluated (llama-server's
    /// `--ctx-checkpoints`, `-ctxcp`): a prompt that shares a slot's earlier prompt
    /// but not what followed it resumes there instead of at 0. 0 keeps none.
    #[arg(
        long = "ctx-checkpoints",
        visible_alias = "swa-checkpoints",
        short_alias = 'C',
        value_name = "N",
        default_value_t = 8
    )]
    ctx_checkpoints: usize,
    /// An API key every route but `/health` then needs, sent as
    /// `Authorization: Bearer KEY` or `x-api-key: KEY` (else 401); several:
    /// repeat the flag or separate them with commas. Each key reuses only
    /// its own cached prompts. Also read from `LLAMA_API_KEY`
    /// (llama-server's variable), which keeps it out of the process list.
    #[arg(long = "api-key", value_name = "KEY", env = "LLAMA_API_KEY", hide_env_values = true)]
    api_key: Vec<String>,
    /// A file of API keys, one a line (spaces around a key and blank lines
    /// ignored), besides those of `--api-key`.
    #[arg(long = "api-key-file", value_name = "FILE")]
    api_key_file: Option<PathBuf>,
    #[command(flatten)]
    llama: LlamaFlags,
    #[command(flatten)]
    llama_server: LlamaServerFlags,
}

/// Descriptors kept for everything but connections: the model file, the
/// listener, logs, the runtime's own.
const RESERVED_DESCRIPTORS: u64 = 32;

/// `--max-connections` when not given: 512, or the open-file limit less
/// what the process needs besides connections.
fn default_max_connections() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through the valid pointer it is
    // given and reads nothing else.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let room = if known { limit.rlim_cur.saturating_sub(RESERVED_DESCRIPTORS) } else { 512 };
    usize::try_from(room).unwrap_or(512).clamp(1, 512)
}

/// A number of seconds given for `flag`: finite and at least 0.
/// The names of a comma-separated list, trimmed, empty ones left out,
/// sorted and each once (llama-server keeps `--alias` and `--tags` in a
/// sorted set).
fn comma_list(given: Option<&str>) -> Vec<String> {
    let names: std::collections::BTreeSet<String> =
        given.unwrap_or("").split(',').map(str::trim).filter(|name| !name.is_empty()).map(String::from).collect();
    names.into_iter().collect()
}

fn seconds(flag: &str, value: f64) -> Result<Duration> {
    if !(value.is_finite() && value >= 0.0) {
        anyhow::bail!("{flag} {value}: a number of seconds, at least 0");
    }
    Ok(Duration::from_secs_f64(value))
}

/// The keys of `--api-key` (each value split at commas, as llama-server
/// does) and `--api-key-file`.
fn api_keys(flags: &[String], file: Option<&std::path::Path>) -> Result<ApiKeys> {
    let mut keys: Vec<String> =
        flags.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|k| !k.is_empty()).map(String::from).collect();
    if !flags.is_empty() && keys.is_empty() {
        anyhow::bail!("--api-key (or LLAMA_API_KEY) is given but holds no key");
    }
    if let Some(file) = file {
        keys.extend(ApiKeys::read_file(file)?);
    }
    ApiKeys::new(keys).context("--api-key")
}

/// The Jinja source `--chat-template` names: a built-in format's, or the
/// text itself when it is a template (it holds `{{` or `{%`); anything
/// else is refused with the names served.
/// `--chat-template-kwargs`: a JSON object.
fn template_kwargs(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("{other} is not a JSON object")),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

fn chat_template_source(given: &str) -> Result<String> {
    if let Some(source) = baton_gen::named_template(given) {
        return Ok(source.to_string());
    }
    if given.contains("{{") || given.contains("{%") {
        return Ok(given.to_string());
    }
    let names = baton_gen::TEMPLATE_NAMES.join(", ");
    anyhow::bail!("--chat-template {given:?}: not a template's name ({names}) nor a Jinja template")
}

/// Runs `baton serve`.
pub fn run(mut args: ServeArgs) -> Result<()> {
    let mut notes = args.llama.apply(&mut args.model.devices).map_err(anyhow::Error::msg)?;
    notes.extend(args.llama_server.notes());
    notes.iter().for_each(|note| eprintln!("{note}"));
    let api_keys = api_keys(&args.api_key, args.api_key_file.as_deref())?;
    let chat_template = match (&args.chat_template_file, &args.chat_template) {
        (Some(file), _) => Some(
            std::fs::read_to_string(file).with_context(|| format!("reading the chat template {}", file.display()))?,
        ),
        (None, Some(given)) => Some(chat_template_source(given)?),
        (None, None) => None,
    };
    let drain = seconds("--drain", args.drain)?;
    let header_timeout = seconds("--header-timeout", args.header_timeout)?;
    let body_timeout = seconds("--body-timeout", args.body_timeout)?;
    if args.max_connections == Some(0) {
        anyhow::bail!("--max-connections 0: at least one connection must be served");
    }
    let max_connections = args.max_connections.unwrap_or_else(default_max_connections);
    let path = args.model.path()?;
    let aliases = comma_list(args.alias.as_deref());
    let name = match aliases.first() {
        Some(first) => first.clone(),
        None => path.file_stem().map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned()),
    };
    // The pool's default budget leaves the saved prompts' host memory aside.
    args.model.kv_reserve = (args.cache_ram as u64).saturating_mul(1 << 20);
    #[cfg(feature = "mpi")]
    let (mut model, link) = args.model.load_slots_linked(args.parallel.max(1))?;
    #[cfg(not(feature = "mpi"))]
    let mut model = args.model.load_slots(args.parallel.max(1))?;
    if let Some(pool) = model.kv_pool_size().filter(|p| p.blocks < p.whole) {
        // A smaller pool than every slot's context: requests wait for
        // blocks, and a step that finds none preempts (`engine/worker/pool.rs`).
        let (parallel, context) = (args.parallel.max(1), model.context());
        let why = match pool.budget {
            Some(budget) => format!(
                "what the memory budget holds ({} MiB: 90% of the host memory available at load less the file and \
                 --cache-ram; --kv-pool sets it)",
                budget >> 20
            ),
            None => "as --kv-pool says".into(),
        };
        eprintln!(
            "KV pool of {} blocks of 64 positions ({} MiB) for {} (--parallel {parallel} -c {context}), {why}: \
             requests wait for blocks when it is full, and the newest running sequence is preempted (read again later)",
            pool.blocks,
            (pool.blocks * pool.block_bytes) >> 20,
            pool.whole,
        );
    }
    #[cfg(feature = "mpi")]
    if let Some(link) = link.as_ref().filter(|l| l.rank != 0) {
        // Rank 0 serves; this rank makes its model calls with it.
        return super::serve_ranks::follow_rank_0(&mut model, link);
    }
    let mut spec = args.spec.params()?;
    // The model's own head drafts for every request unless it says
    // otherwise (`speculative.n_max: 0`).
    let heads = spec.kind == baton_gen::speculative::SpecType::Mtp;
    if heads && args.draft.model_draft.is_some() {
        anyhow::bail!("--model-draft and --spec-type mtp: one drafter at a time (the draft model or the head)");
    }
    // A draft model drafts for every request unless it says otherwise (as
    // llama-server's `-md`).
    let drafter = args.draft.load(&model, args.model.threads, args.parallel.max(1), spec)?.map(|(drafter, params)| {
        spec = baton_gen::speculative::SpecParams { kind: baton_gen::speculative::SpecType::Ngram, ..params };
        drafter
    });
    let drafting = spec.kind != baton_gen::speculative::SpecType::None;
    let options = EngineOptions {
        parallel: args.parallel,
        queue: args.queue,
        prefill_chunk: args.prefill_chunk,
        prefix_cache: !args.no_prefix_cache,
        cache_ram: args.cache_ram.saturating_mul(1 << 20),
        ctx_checkpoints: args.ctx_checkpoints,
        spec,
        lent_slots: 0,
    };
    // A hybrid model keeps its recurrent states after the drafted rows of a
    // step (the engine does it too; here for the message).
    let verifies = options.prepare_model(&mut model).map_err(|e| e.to_string()).and_then(|()| {
        match model.hidden_in_steps() && baton_gen::speculative::check_model(&model).is_ok() {
            true => Ok(()),
            false => Err("tensor parallelism or ranks".to_string()),
        }
    });
    #[cfg(feature = "mpi")]
    let verifies = verifies.and_then(|()| link.is_none().then_some(()).ok_or_else(|| "ranks".to_string()));
    if let (true, Err(why)) = (drafting, &verifies) {
        eprintln!(
            "--spec-type {}: this model or split cannot verify drafts in a step ({why}); requests decode \
             without drafts",
            spec.kind.name()
        );
    }
    #[cfg(feature = "mpi")]
    let engine = match (link, drafter) {
        (Some(_), _) if heads => anyhow::bail!("--spec-type mtp: drafts are not verified over ranks"),
        (None, None) if heads => Engine::start_mtp(model, &path, name.clone(), options),
        (Some(_), Some(_)) => anyhow::bail!("--model-draft: drafts are not verified over ranks"),
        (Some(link), None) => {
            let mirror = Box::new(super::serve_ranks::RankMirror::new(link));
            Engine::start_mirrored(model, name.clone(), options, mirror)
        }
        (None, Some(drafter)) => Engine::start_drafting(model, drafter, name.clone(), options),
        (None, None) => Engine::start(model, name.clone(), options),
    };
    #[cfg(not(feature = "mpi"))]
    let engine = match drafter {
        Some(drafter) => Engine::start_drafting(model, drafter, name.clone(), options),
        None if heads => Engine::start_mtp(model, &path, name.clone(), options),
        None => Engine::start(model, name.clone(), options),
    };
    let engine = engine.context("starting the engine")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let server = ServerOptions {
        body_limit: args.body_limit,
        drain,
        header_timeout,
        body_timeout,
        max_connections,
        stop_when_the_engine_fails: true,
        pooling: args.pooling.parse()?,
        api_keys,
        strict_model_name: args.strict_model_name,
        model_aliases: aliases,
        model_tags: comma_list(args.tags.as_deref()),
        slots_endpoint: !args.no_slots,
        cors_origins: args.cors_origins,
        model_path: path.display().to_string(),
        reasoning_format: args.reasoning_format,
        chat_template,
        chat_template_kwargs: args.chat_template_kwargs.clone().unwrap_or_default(),
        defaults: RequestDefaults { temperature: args.temp, seed: args.seed, max_tokens: args.n_predict },
    };
    interrupt::install_terminate();
    let result = runtime.block_on(async {
        let hosts: Vec<&str> = args.host.split(',').map(str::trim).filter(|host| !host.is_empty()).collect();
        if hosts.is_empty() {
            anyhow::bail!("--host {:?}: no address to listen on", args.host);
        }
        let mut listeners = Vec::with_capacity(hosts.len());
        let mut locals = Vec::with_capacity(hosts.len());
        for host in hosts {
            let listener = tokio::net::TcpListener::bind((host, args.port))
                .await
                .with_context(|| format!("listening on {host}:{}", args.port))?;
            locals.push(format!("http://{}", listener.local_addr()?));
            listeners.push(listener);
        }
        let local = locals.join(", ");
        let info = engine.info();
        let keys = match server.api_keys.len() {
            0 => "no API key".to_string(),
            1 => "1 API key".to_string(),
            n => format!("{n} API keys"),
        };
        eprintln!(
            "serving `{name}` ({} positions per sequence, {} at once, queue {}, at most {max_connections} \
             connections, {keys}); listening on {local}",
            info.context, args.parallel, args.queue
        );
        let signal = async {
            while !interrupt::requested() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            eprintln!(
                "{}: no new connections; finishing the requests in flight (a second signal exits at once)",
                interrupt::signal_name()
            );
        };
        serve(listeners, engine, server, signal).await.context("serving")
    });
    // Blocking tasks the server left behind (each bounded) must not hold
    // the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result?;
    eprintln!("server stopped");
    Ok(())
}
