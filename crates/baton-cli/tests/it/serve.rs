//! `baton serve` end to end: it prints where it listens, answers a
//! completion over HTTP, and exits 0 on Ctrl-C (SIGINT) and on SIGTERM,
//! within its bound even while a client holds half a request; under a low
//! open-file limit, clients that never finish their headers do not keep
//! `/health` out; API keys from the flag, its variable and a file close
//! every route but `/health`, and a bad key file stops it at the start.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::tiny;

/// A running `baton serve`, its address and its stderr lines.
struct Served {
    child: Child,
    /// The first address it listens on.
    address: String,
    /// Every address it listens on (`--host a,b`), the first first.
    addresses: Vec<String>,
    lines: mpsc::Receiver<String>,
    /// What it wrote to stderr before it listened.
    startup: Vec<String>,
}

impl Served {
    /// Starts `baton serve` on the tiny model with `extra` flags, through
    /// `bash -c` after `shell_prefix` (such as `ulimit -n 64;`) when given.
    fn start(model: &str, extra: &[&str], shell_prefix: Option<&str>) -> Served {
        let mut args: Vec<String> =
            ["serve", "-m", model, "--port", "0", "-np", "2", "-c", "128", "-t", "1"].map(String::from).to_vec();
        args.extend(extra.iter().map(|a| a.to_string()));
        let binary = env!("CARGO_BIN_EXE_baton");
        let mut command = match shell_prefix {
            Some(prefix) => {
                let mut c = Command::new("bash");
                c.arg("-c").arg(format!("{prefix} exec \"$0\" \"$@\"")).arg(binary).args(&args);
                c
            }
            None => {
                let mut c = Command::new(binary);
                c.args(&args);
                c
            }
        };
        let mut child = command.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("start baton serve");
        let stderr = child.stderr.take().expect("stderr");
        let (lines, seen) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let mut log = Vec::new();
        let addresses: Vec<String> = loop {
            let line = seen.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("no listening address; stderr: {log:?}")
            });
            if let Some(at) = line.find("listening on ") {
                let listed = line[at + "listening on ".len()..].split(", ");
                break listed.map(|url| url.trim().trim_start_matches("http://").to_string()).collect();
            }
            log.push(line);
        };
        Served { child, address: addresses[0].clone(), addresses, lines: seen, startup: log }
    }

    /// Sends `signal`; the exit code and the stderr lines since the start,
    /// or a panic when the process still runs after `bound`.
    fn signal_and_wait(mut self, signal: libc::c_int, bound: Duration) -> (Option<i32>, Vec<String>) {
        // SAFETY: kill sends a signal to the child we started; no memory is
        // involved.
        let sent = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(sent, 0, "signal {signal} sent");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return (status.code(), self.lines.try_iter().collect());
            }
            if start.elapsed() > bound {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "baton serve still ran {bound:?} after signal {signal}: {:?}",
                    self.lines.try_iter().collect::<Vec<_>>()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn request(&self, request: &str) -> String {
        self.request_at(&self.address, request)
    }

    fn request_at(&self, address: &str, request: &str) -> String {
        let mut stream = TcpStream::connect(address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        answer
    }
}

fn completion(served: &Served) -> String {
    let body = r#"{"model": "tiny", "prompt": "Hello", "max_tokens": 4, "ignore_eos": true}"#;
    served.request(&format!(
        "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ))
}

#[test]
fn serve_answers_and_exits_cleanly_on_ctrl_c() {
    let (_dir, model) = tiny("serve");
    let served = Served::start(&model, &["--drain", "1"], None);
    let answer = completion(&served);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""completion_tokens":4"#), "{answer}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    assert!(rest.iter().any(|l| l.contains("server stopped")), "{rest:?}");
}

/// `baton serve --spec-type mtp` on the qwen35 toy (its file holds an MTP
/// block) drafts with the model's head: it answers, `/metrics` counts the
/// head's drafts, and it exits cleanly. On a file without the block, and
/// beside `-md`, it refuses to start, by name.
#[test]
fn serve_drafts_with_the_models_head_and_refuses_it_by_name() {
    let (dir, tiny) = tiny("serve-mtp");
    let model = dir.file("qwen35.gguf").to_string_lossy().into_owned();
    let out = super::baton(&["model", "synth", "--shape", "qwen35", "--type", "f32", "-o", &model]);
    assert!(out.status.success(), "synth: {}", String::from_utf8_lossy(&out.stderr));
    let served = Served::start(&model, &["--drain", "1", "--spec-type", "mtp", "--draft-max", "4"], None);
    let answer = completion(&served);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains(r#""completion_tokens":4"#), "{answer}");
    let metrics = served.request("GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(metrics.contains("baton_drafted_tokens_total"), "{metrics}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    let without = ["serve", "-m", &tiny, "--port", "0", "--spec-type", "mtp"];
    super::assert_clean_error(&super::baton(&without), "holds none");
    let both = ["serve", "-m", &model, "--port", "0", "--spec-type", "mtp", "--model-draft", &tiny];
    super::assert_clean_error(&super::baton(&both), "one drafter at a time");
}

#[test]
fn sigterm_drains_like_ctrl_c() {
    let (_dir, model) = tiny("serve-term");
    let served = Served::start(&model, &["--drain", "1"], None);
    assert!(completion(&served).starts_with("HTTP/1.1 200"));
    let (code, rest) = served.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("SIGTERM")) && rest.iter().any(|l| l.contains("server stopped")),
        "{rest:?}"
    );
}

#[test]
fn a_client_holding_half_a_request_does_not_hold_the_exit() {
    let (_dir, model) = tiny("serve-half");
    // A header timeout far beyond the bound: the drain must end it.
    let served = Served::start(&model, &["--drain", "1", "--header-timeout", "600"], None);
    let mut held = TcpStream::connect(&served.address).expect("connect");
    held.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Le").expect("half a head");
    std::thread::sleep(Duration::from_millis(200));
    // The drain (1 s), the grace for last events (2 s), and slack.
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(10));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
}

#[test]
fn under_a_low_open_file_limit_slow_clients_do_not_keep_health_out() {
    let (_dir, model) = tiny("serve-fds");
    let served = Served::start(&model, &["--header-timeout", "1"], Some("ulimit -n 64;"));
    // More clients than the server has descriptors, each holding half a head.
    let holders: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut client = TcpStream::connect(&served.address).expect("connect");
            let _ = client.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Sl");
            client
        })
        .collect();
    let start = Instant::now();
    let answer = served.request("GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(start.elapsed() < Duration::from_secs(20), "health took {:?}", start.elapsed());
    assert!(completion(&served).starts_with("HTTP/1.1 200"), "a normal request is served too");
    drop(holders);
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
}

/// A request for `path` with `headers` (whole lines, each ending `\r\n`).
fn get(served: &Served, path: &str, headers: &str) -> String {
    served.request(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n"))
}

#[test]
fn api_keys_from_the_flag_its_variable_and_a_file_close_every_route_but_health() {
    let (dir, model) = tiny("serve-keys");
    let file = dir.file("keys");
    std::fs::write(&file, "\n  gamma  \n\n").expect("write the key file");
    let file = file.to_string_lossy().into_owned();
    let served =
        Served::start(&model, &["--api-key", "alpha,beta", "--api-key", "delta", "--api-key-file", &file], None);
    assert!(completion(&served).starts_with("HTTP/1.1 401"), "a completion without a key");
    for (path, headers, status) in [
        ("/health", "", "200"),
        ("/metrics", "", "401"),
        ("/v1/models", "Authorization: Bearer alpha-not\r\n", "401"),
        ("/v1/models", "Authorization: Bearer alpha\r\n", "200"),
        ("/v1/models", "Authorization: Bearer beta\r\n", "200"),
        ("/metrics", "x-api-key: delta\r\n", "200"),
        ("/metrics", "x-api-key: gamma\r\n", "200"),
    ] {
        let answer = get(&served, path, headers);
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{path} with {headers:?}: {answer}");
    }
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");

    // llama-server's variable, when the flag is not given.
    let served = Served::start(&model, &[], Some("export LLAMA_API_KEY=epsilon;"));
    assert!(get(&served, "/v1/models", "").starts_with("HTTP/1.1 401"));
    assert!(get(&served, "/v1/models", "x-api-key: epsilon\r\n").starts_with("HTTP/1.1 200"));
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
}

#[test]
fn a_bad_key_file_or_an_empty_key_is_a_startup_error() {
    let (dir, model) = tiny("serve-bad-keys");
    let absent = dir.file("absent").to_string_lossy().into_owned();
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--api-key-file", &absent]);
    super::assert_clean_error(&out, "reading the API key file");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&absent), "the file is named");
    let blank = dir.file("blank");
    std::fs::write(&blank, "\n   \n").expect("write");
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--api-key-file", &blank.to_string_lossy()]);
    super::assert_clean_error(&out, "holds no key");
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--api-key", " , "]);
    super::assert_clean_error(&out, "holds no key");
}

/// A completion naming `model`: the answer's first line.
fn completion_named(served: &Served, model: &str) -> String {
    let body = format!(r#"{{"model": "{model}", "prompt": "Hello", "max_tokens": 2}}"#);
    let answer = served.request(&format!(
        "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    answer.lines().next().unwrap_or_default().to_string()
}

#[test]
fn any_model_name_is_served_unless_strict_model_name_and_no_slots_closes_slots() {
    let (_dir, model) = tiny("serve-model-name");
    let served = Served::start(&model, &["--alias", "mine"], None);
    assert!(completion_named(&served, "gpt-3.5-turbo").starts_with("HTTP/1.1 200"));
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    // Several names (llama-server's `-a`): sorted, each once, the first the
    // id; tags only listed.
    let names = ["-a", " yours,mine,, yours", "--tags", "small,chat", "--strict-model-name", "--no-slots"];
    let served = Served::start(&model, &names, None);
    assert!(completion_named(&served, "gpt-3.5-turbo").starts_with("HTTP/1.1 404"));
    assert!(completion_named(&served, "mine").starts_with("HTTP/1.1 200"));
    assert!(completion_named(&served, "yours").starts_with("HTTP/1.1 200"), "every alias is the model's name");
    assert!(completion_named(&served, "chat").starts_with("HTTP/1.1 404"), "a tag is not a name");
    let models = get(&served, "/v1/models", "");
    let body: serde_json::Value = serde_json::from_str(models.split("\r\n\r\n").nth(1).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {models}"));
    let entry = &body["data"][0];
    assert_eq!(entry["id"], "mine", "{body}");
    assert_eq!(entry["aliases"], serde_json::json!(["mine", "yours"]), "{body}");
    assert_eq!(entry["tags"], serde_json::json!(["chat", "small"]), "{body}");
    // `--no-slots`: `/slots` answers 501, as llama-server's.
    let slots = get(&served, "/slots", "");
    assert!(slots.starts_with("HTTP/1.1 501") && slots.contains("--no-slots"), "{slots}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
}

#[test]
fn several_hosts_are_each_served() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    }
    let (_dir, model) = tiny("serve-hosts");
    let served = Served::start(&model, &["--host", "127.0.0.1, ::1"], None);
    assert_eq!(served.addresses.len(), 2, "{:?}", served.addresses);
    assert!(served.addresses[1].starts_with("[::1]:"), "{:?}", served.addresses);
    for address in &served.addresses {
        let health = served.request_at(address, "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert!(health.starts_with("HTTP/1.1 200"), "{address}: {health}");
        let body = r#"{"prompt": "Hello", "max_tokens": 2}"#;
        let request = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = served.request_at(address, &request);
        assert!(answer.starts_with("HTTP/1.1 200"), "{address}: {answer}");
    }
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--host", " , "]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("no address to listen on"), "{stderr}");
}

/// A command line copied from llama-server starts: its flags that Baton
/// does not need are taken, each said at start (`-ngl` without a Vulkan
/// GPU: the CPU), and the server serves; `baton run` takes llama-cli's.
#[test]
fn llama_servers_flags_are_taken_and_said() {
    let (_dir, model) = tiny("serve-llama-flags");
    let flags = ["-ngl", "99", "-fa", "on", "--jinja", "--metrics", "-cb", "--mlock", "--slots", "-to", "600"];
    let served = Served::start(&model, &flags, None);
    let startup = served.startup.join("\n");
    for said in
        ["--n-gpu-layers 99:", "--flash-attn:", "--jinja:", "--metrics:", "--cont-batching:", "--mlock: not applied"]
    {
        assert!(startup.contains(said), "{said} not said: {startup}");
    }
    let health = served.request("GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    let out = super::baton(&["run", "-m", &model, "-p", "hi", "-n", "2", "-ngl", "0", "-fa", "--no-warmup"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("--n-gpu-layers 0: the model runs on cpu"), "{stderr}");
    let out = super::baton(&["run", "-m", &model, "-p", "hi", "-ngl", "some"]);
    crate::assert_clean_error(&out, "--n-gpu-layers");
}

#[test]
fn cors_origins_allow_listed_pages_and_refuse_a_bad_list() {
    let (_dir, model) = tiny("serve-cors");
    let served = Served::start(&model, &["--cors-origins", "https://app.example"], None);
    let preflight = "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: t\r\nOrigin: https://app.example\r\n\
                     Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n";
    let answer = served.request(preflight);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("access-control-allow-origin: https://app.example"), "{answer}");
    let answer = served.request(&preflight.replace("app.example", "other.example"));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("access-control-allow-origin"), "{answer}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--cors-origins", "app.example"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error: {stderr}");
    assert!(stderr.contains("`app.example` is not an origin"), "{stderr}");
}

#[test]
fn bench_serve_prints_one_json_object() {
    let (_dir, model) = tiny("bench-serve-json");
    let args = ["bench", "serve", "-m", &model, "-c", "128", "-t", "1", "--clients", "1,2"];
    let rest = ["--requests-per-client", "1", "--max-tokens", "4", "--stall-streams", "0", "--json"];
    let out = super::baton(&[&args[..], &rest[..]].concat());
    assert!(out.status.success(), "bench serve: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let phases = report["phases"].as_array().expect("phases");
    assert_eq!(phases.iter().map(|p| p["clients"].as_u64()).collect::<Vec<_>>(), [Some(1), Some(2)], "{report}");
    assert!(phases.iter().all(|p| p["tokens_per_s"].as_f64().is_some_and(|r| r > 0.0)), "{report}");
    assert_eq!(report["max_tokens"], 4);
    assert_eq!(report["stalls"], serde_json::json!([]));
}

/// `--chat-template-file` replaces the file's template (`/apply-template`
/// renders with it); a template file that cannot be read is a startup error
/// that names it.
#[test]
fn a_chat_template_file_replaces_the_models_template() {
    let (dir, model) = tiny("serve-template");
    let file = dir.file("template.jinja");
    let template = "{% for m in messages %}<<{{ m.role }}|{{ m.content }}>>{% endfor %}{% if add_generation_prompt %}<<assistant|{% endif %}";
    std::fs::write(&file, template).expect("write the template");
    let file = file.to_string_lossy().into_owned();
    let served = Served::start(&model, &["--chat-template-file", &file], None);
    let body = r#"{"messages": [{"role": "user", "content": "hi there"}]}"#;
    let answer = served.request(&format!(
        "POST /apply-template HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("<<user|hi there>><<assistant|"), "{answer}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    let absent = dir.file("absent.jinja").to_string_lossy().into_owned();
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--chat-template-file", &absent]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("absent.jinja"), "{stderr}");
}

/// `--chat-template NAME` takes a format by name (`/apply-template`
/// renders with it); a name it does not know is a startup error that
/// lists the names.
#[test]
fn a_named_chat_template_replaces_the_models_template() {
    let (_dir, model) = tiny("serve-named-template");
    let served = Served::start(&model, &["--chat-template", "command-r"], None);
    let body = r#"{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}"#;
    let answer = served.request(&format!(
        "POST /apply-template HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let expected = "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Be brief.<|END_OF_TURN_TOKEN|>\
                    <|START_OF_TURN_TOKEN|><|USER_TOKEN|>hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
    assert!(answer.contains(&format!(r#""prompt":"{expected}""#)), "{answer}");
    let (code, rest) = served.signal_and_wait(libc::SIGINT, Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; stderr after start: {rest:?}");
    let out = super::baton(&["serve", "-m", &model, "--port", "0", "--chat-template", "llama-3"]);
    super::assert_clean_error(&out, "chatml, llama3, command-r");
}
