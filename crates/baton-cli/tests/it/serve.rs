//! `baton serve` end to end: it prints where it listens, answers a
//! completion over HTTP, and exits 0 on Ctrl-C (SIGINT).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::tiny;

#[test]
fn serve_answers_and_exits_cleanly_on_ctrl_c() {
    let (_dir, model) = tiny("serve");
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["serve", "-m", &model, "--port", "0", "-np", "2", "-c", "128", "-t", "1", "--drain", "1"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start baton serve");
    let stderr = child.stderr.take().expect("stderr");
    let (lines, seen) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut log = Vec::new();
    let address = loop {
        let line = seen.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("no listening address; stderr: {log:?}")
        });
        if let Some(at) = line.find("listening on http://") {
            break line[at + "listening on http://".len()..].trim().to_string();
        }
        log.push(line);
    };

    let body = r#"{"model": "tiny", "prompt": "Hello", "max_tokens": 4, "ignore_eos": true}"#;
    let mut stream = TcpStream::connect(&address).expect("connect");
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""completion_tokens":4"#), "{answer}");

    // SAFETY: kill sends SIGINT to the child we started; no memory is involved.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "SIGINT sent");
    let status = child.wait().expect("wait");
    let rest: Vec<String> = seen.try_iter().collect();
    assert_eq!(status.code(), Some(0), "exit status; stderr after start: {rest:?}");
    assert!(rest.iter().any(|l| l.contains("server stopped")), "{rest:?}");
}
