//! llama.cpp's flags that a command line copied from llama-server or
//! llama-cli carries and Baton takes without needing them: each is
//! accepted, and what it does here is said on standard error at start
//! (`-ngl` picks a Vulkan GPU; the rest change nothing, and the note says
//! why), so a command line that works there starts here. Flags that would
//! change the answers (LoRA adapters, RoPE overrides, a reasoning budget)
//! are not among them: those stay errors.

use clap::Args;

/// The flags `baton run` and `baton serve` both take (llama-cli's and
/// llama-server's).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "llama.cpp flags taken for compatibility")]
pub struct LlamaFlags {
    /// llama.cpp's `-ngl`: a number other than 0 (or `auto`, `all`) with
    /// `--devices` at its default `cpu` puts the whole model on this
    /// machine's first Vulkan GPU (not a Vulkan device run by the CPU,
    /// such as lavapipe, which llama.cpp leaves out too); without one the
    /// model stays on the CPU, as said at start.
    #[arg(long = "n-gpu-layers", visible_alias = "gpu-layers", value_name = "N")]
    pub n_gpu_layers: Option<String>,
    /// llama.cpp's `-fa on|off|auto`: Baton's attention is one fused op
    /// whatever it says.
    #[arg(long = "flash-attn", value_name = "on|off|auto", num_args = 0..=1, default_missing_value = "on")]
    pub flash_attn: Option<String>,
    /// llama.cpp's `--jinja`: Baton always renders the chat template as
    /// Jinja.
    #[arg(long)]
    pub jinja: bool,
    /// llama.cpp's `--no-jinja`: not applied (Baton has no other template
    /// renderer).
    #[arg(long = "no-jinja")]
    pub no_jinja: bool,
    /// llama.cpp's `--mlock`: not applied (the weights stay pageable).
    #[arg(long)]
    pub mlock: bool,
    /// llama.cpp's `-tb`: Baton reads prompts with `-t`'s threads.
    #[arg(long = "threads-batch", value_name = "N")]
    pub threads_batch: Option<String>,
    /// llama.cpp's `--no-warmup`: Baton runs no warm-up pass to skip.
    #[arg(long = "no-warmup")]
    pub no_warmup: bool,
    /// llama.cpp's `--log-disable`: Baton's log follows `RUST_LOG`.
    #[arg(long = "log-disable")]
    pub log_disable: bool,
    /// llama.cpp's `--swa-full`: Baton's sliding-window caches keep what
    /// their window and a step need.
    #[arg(long = "swa-full")]
    pub swa_full: bool,
    /// llama.cpp's `-v`: Baton's log follows `RUST_LOG`
    /// (`RUST_LOG=debug` for more).
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// llama.cpp's `--offline`: not applied (a known model's name, as
    /// `-m`, is fetched from PyPI when it is not cached; a file is read
    /// as it is).
    #[arg(long)]
    pub offline: bool,
    /// llama.cpp's `--defrag-thold` (deprecated there): Baton's paged
    /// cache needs no defragmenting.
    #[arg(long = "defrag-thold", value_name = "N")]
    pub defrag_thold: Option<String>,
    /// llama.cpp's `--prio`, `--poll` and `--numa`: thread priority,
    /// polling and NUMA placement are Baton's own (`--devices cpu:0,cpu:1`
    /// splits cores).
    #[arg(long = "prio", value_name = "N")]
    pub prio: Option<String>,
    /// See `--prio`.
    #[arg(long = "poll", value_name = "N")]
    pub poll: Option<String>,
    /// See `--prio`.
    #[arg(long = "numa", value_name = "TYPE")]
    pub numa: Option<String>,
}

/// The flags only `baton serve` takes (llama-server's).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "llama-server flags taken for compatibility")]
pub struct LlamaServerFlags {
    /// llama-server's `--metrics`: `/metrics` is always served (under
    /// Baton's names and llama-server's).
    #[arg(long)]
    pub metrics: bool,
    /// llama-server's `--slots`: `/slots` is served unless `--no-slots`.
    #[arg(long)]
    pub slots: bool,
    /// llama-server's `--props`: `/props` is served (read only).
    #[arg(long)]
    pub props: bool,
    /// llama-server's `--embeddings`: `/v1/embeddings` is always served.
    #[arg(long = "embeddings", visible_alias = "embedding")]
    pub embeddings: bool,
    /// llama-server's `-cb`: Baton always batches continuously.
    #[arg(long = "cont-batching")]
    pub cont_batching: bool,
    /// llama-server's `-nocb`: not applied (Baton always batches
    /// continuously; `--parallel 1` serves one request at a time).
    #[arg(long = "no-cont-batching")]
    pub no_cont_batching: bool,
    /// llama-server's `--no-webui`: Baton serves no web UI.
    #[arg(long = "no-webui")]
    pub no_webui: bool,
    /// llama-server's `--threads-http`: Baton's HTTP side runs on its own
    /// small pool (`--max-connections` bounds the clients).
    #[arg(long = "threads-http", value_name = "N")]
    pub threads_http: Option<String>,
    /// llama-server's `-to`: Baton's `--header-timeout` and
    /// `--body-timeout` bound a request's arrival; an answer is not cut.
    #[arg(long = "timeout", value_name = "SECONDS")]
    pub timeout: Option<String>,
    /// llama-server's `--cache-reuse`: Baton's prefix cache reuses a
    /// shared prefix (no KV shifting of a chunk found later).
    #[arg(long = "cache-reuse", value_name = "N")]
    pub cache_reuse: Option<String>,
}

/// This machine's first Vulkan GPU, by name and description: a device of
/// kind GPU that the CPU does not run (lavapipe says `(CPU)`).
fn first_gpu() -> Option<(String, String)> {
    let found = baton_load::registry::find("vulkan")?.enumerate().ok()?;
    found
        .into_iter()
        .find(|d| d.kind == baton_core::backend::DeviceKind::Gpu && !d.description.ends_with("(CPU)"))
        .map(|d| (d.name, d.description))
}

/// The notes of the flags given: each `(given, note)` whose flag was.
fn said(flags: &[(bool, &str)]) -> Vec<String> {
    flags.iter().filter(|(given, _)| *given).map(|(_, note)| note.to_string()).collect()
}

/// What `-ngl` asks: a number of layers other than 0, or `auto`/`all`.
/// `Err` names a value that is none of these.
pub fn wants_gpu(n_gpu_layers: &str) -> Result<bool, String> {
    match n_gpu_layers {
        "auto" | "all" => Ok(true),
        n => n
            .parse::<i64>()
            .map(|n| n != 0)
            .map_err(|_| format!("--n-gpu-layers {n:?}: a number of layers, `auto` or `all`")),
    }
}

impl LlamaFlags {
    /// Applies `-ngl` to `devices` (where it is `cpu`, the default: this
    /// machine's first Vulkan GPU, a device of kind GPU not run by the
    /// CPU) and says what every flag given does, one line each.
    ///
    /// # Errors
    /// An `-ngl` value that is not a count, `auto` or `all`.
    pub fn apply(&self, devices: &mut String) -> Result<Vec<String>, String> {
        let mut notes = Vec::new();
        if let Some(n) = &self.n_gpu_layers {
            match (wants_gpu(n)?, devices.as_str()) {
                (false, _) => notes.push(format!("--n-gpu-layers {n}: the model runs on {devices}")),
                (true, "cpu") => match first_gpu() {
                    Some((name, description)) => {
                        notes.push(format!("--n-gpu-layers {n}: the whole model on {name} ({description})"));
                        *devices = name;
                    }
                    None => notes.push(format!("--n-gpu-layers {n}: no Vulkan GPU here: the model runs on the CPU")),
                },
                (true, _) => {
                    notes.push(format!("--n-gpu-layers {n}: not applied (--devices {devices} places the model)"))
                }
            }
        }
        notes.extend(self.notes());
        Ok(notes)
    }

    /// What each flag given does here, one line each.
    pub fn notes(&self) -> Vec<String> {
        said(&[
            (self.flash_attn.is_some(), "--flash-attn: Baton's attention is one fused op whatever it says"),
            (self.jinja, "--jinja: the chat template is always rendered as Jinja"),
            (self.no_jinja, "--no-jinja: not applied (the chat template is rendered as Jinja)"),
            (self.mlock, "--mlock: not applied (the weights stay pageable)"),
            (self.threads_batch.is_some(), "--threads-batch: prompts are read with -t's threads"),
            (self.no_warmup, "--no-warmup: Baton runs no warm-up pass"),
            (self.log_disable, "--log-disable: the log follows RUST_LOG"),
            (self.swa_full, "--swa-full: sliding-window caches keep what their window and a step need"),
            (self.verbose, "--verbose: the log follows RUST_LOG (RUST_LOG=debug for more)"),
            (
                self.offline,
                "--offline: not applied (a known model's name is fetched when not cached; a file is read as it is)",
            ),
            (self.defrag_thold.is_some(), "--defrag-thold: the paged KV cache needs no defragmenting"),
            (
                self.prio.is_some() || self.poll.is_some() || self.numa.is_some(),
                "--prio/--poll/--numa: not applied (thread placement is Baton's own; --devices cpu:0,cpu:1 splits cores)",
            ),
        ])
    }
}

impl LlamaServerFlags {
    /// What each flag given does here, one line each.
    pub fn notes(&self) -> Vec<String> {
        said(&[
            (self.metrics, "--metrics: /metrics is always served"),
            (self.slots, "--slots: /slots is served (--no-slots closes it)"),
            (self.props, "--props: /props is served, read only"),
            (self.embeddings, "--embeddings: /v1/embeddings is always served"),
            (self.cont_batching, "--cont-batching: requests are always batched continuously"),
            (self.no_cont_batching, "--no-cont-batching: not applied (--parallel 1 serves one request at a time)"),
            (self.no_webui, "--no-webui: Baton serves no web UI"),
            (self.threads_http.is_some(), "--threads-http: not applied (--max-connections bounds the clients)"),
            (
                self.timeout.is_some(),
                "--timeout: not applied (--header-timeout and --body-timeout bound a request's arrival)",
            ),
            (self.cache_reuse.is_some(), "--cache-reuse: not applied (the prefix cache reuses shared prefixes)"),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ngl_takes_counts_auto_and_all_and_names_anything_else() {
        assert_eq!(["0", "99", "-1", "auto", "all"].map(|n| wants_gpu(n).ok()), [0, 1, 1, 1, 1].map(|w| Some(w == 1)));
        assert!(wants_gpu("many").is_err_and(|e| e.contains("--n-gpu-layers")));
    }

    #[test]
    fn ngl_leaves_named_devices_and_zero_alone() {
        let mut devices = "cpu:0,cpu:1".to_string();
        let flags = LlamaFlags { n_gpu_layers: Some("99".into()), ..LlamaFlags::default() };
        let notes = flags.apply(&mut devices).expect("a count");
        assert_eq!(devices, "cpu:0,cpu:1");
        assert!(notes[0].contains("not applied (--devices cpu:0,cpu:1"), "{notes:?}");
        let mut devices = "cpu".to_string();
        let zero = LlamaFlags { n_gpu_layers: Some("0".into()), ..LlamaFlags::default() };
        assert_eq!(zero.apply(&mut devices).expect("0"), ["--n-gpu-layers 0: the model runs on cpu"]);
        assert_eq!(devices, "cpu");
        let bad = LlamaFlags { n_gpu_layers: Some("lots".into()), ..LlamaFlags::default() };
        assert!(bad.apply(&mut devices).is_err());
    }

    #[test]
    fn each_flag_given_is_said_and_none_given_says_nothing() {
        assert!(LlamaFlags::default().notes().is_empty() && LlamaServerFlags::default().notes().is_empty());
        let flags = LlamaFlags {
            jinja: true,
            mlock: true,
            numa: Some("distribute".into()),
            offline: true,
            ..LlamaFlags::default()
        };
        let notes = flags.notes();
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(notes.iter().any(|n| n.starts_with("--offline: not applied")), "{notes:?}");
        assert!(notes.iter().any(|n| n.starts_with("--mlock: not applied")), "{notes:?}");
        let server = LlamaServerFlags { metrics: true, timeout: Some("600".into()), ..LlamaServerFlags::default() };
        assert_eq!(server.notes().len(), 2, "{:?}", server.notes());
    }
}
