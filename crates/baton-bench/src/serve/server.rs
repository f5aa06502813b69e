//! `baton serve` as a child process of the benchmark: started on a free
//! loopback port with the model arguments given, ready once `/health`
//! answers 200, killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::client::Endpoint;

/// How to start `baton serve` (when no `--url` is given).
#[derive(Args, Clone, Debug)]
pub struct ServeCommand {
    /// Model file or known model name (default: as `baton serve`).
    #[arg(short = 'm', long = "model")]
    model: Option<String>,
    /// Devices of the server.
    #[arg(long)]
    devices: Option<String>,
    /// How the model is split over the devices (layer or tensor).
    #[arg(long = "split-mode", visible_alias = "sm")]
    split_mode: Option<String>,
    /// Threads per CPU device.
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Positions of each sequence's slot of the KV cache (`-c` of `baton serve`).
    #[arg(short = 'c', long = "ctx-size")]
    context: Option<usize>,
    /// Sequences the server runs at once (default: the most clients).
    #[arg(long)]
    pub parallel: Option<usize>,
    /// Another argument for `baton serve`, as is (repeatable).
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
    /// Seconds the server may take to load and answer `/health`.
    #[arg(long = "startup-timeout", default_value_t = 300)]
    startup_timeout: u64,
}

/// A `baton serve` this process started.
pub struct ChildServer {
    child: Child,
    endpoint: Endpoint,
}

impl ChildServer {
    /// Starts `baton serve` with `extra` arguments and waits until it serves.
    pub fn start(command: &ServeCommand, parallel: usize, extra: &[&str]) -> Result<ChildServer> {
        let port = free_port()?;
        let exe: PathBuf = std::env::current_exe().context("finding the baton executable")?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--host", "127.0.0.1", "--port", &port.to_string(), "--parallel", &parallel.to_string()]);
        if let Some(model) = &command.model {
            cmd.args(["-m", model]);
        }
        if let Some(devices) = &command.devices {
            cmd.args(["--devices", devices]);
        }
        if let Some(split) = &command.split_mode {
            cmd.args(["--split-mode", split]);
        }
        if let Some(threads) = command.threads {
            cmd.args(["-t", &threads.to_string()]);
        }
        if let Some(context) = command.context {
            cmd.args(["-c", &context.to_string()]);
        }
        cmd.args(&command.serve_args).args(extra);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        eprintln!("starting {cmd:?}");
        let mut child = cmd.spawn().context("starting baton serve")?;
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        if let Some(stderr) = child.stderr.take() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                    log.push(line);
                    let excess = log.len().saturating_sub(20);
                    log.drain(..excess);
                }
            });
        }
        let server = ChildServer { child, endpoint: Endpoint::local(port) };
        server.wait_ready(Duration::from_secs(command.startup_timeout), &log)
    }

    /// Where it listens.
    pub fn endpoint(&self) -> Endpoint {
        self.endpoint
    }

    fn wait_ready(mut self, timeout: Duration, log: &Mutex<Vec<String>>) -> Result<ChildServer> {
        let start = Instant::now();
        let tail = || log.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
        loop {
            if let Some(status) = self.child.try_wait().context("watching baton serve")? {
                // Let the stderr reader catch the last lines.
                std::thread::sleep(Duration::from_millis(100));
                bail!("baton serve exited ({status}) before serving:\n{}", tail());
            }
            if let Ok(response) = self.endpoint.get("/health", Duration::from_secs(5)) {
                if response.status == 200 {
                    return Ok(self);
                }
            }
            if start.elapsed() > timeout {
                bail!("baton serve did not answer /health within {timeout:?}:\n{}", tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // An error here means the child has exited already: nothing to stop.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on now (the OS picks it; a race with another
/// process taking it in between is possible and shows as a start failure).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr().context("finding a free port")?.port())
}
