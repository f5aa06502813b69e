//! Connections that hold the server's resources: half-sent requests at a
//! shutdown, slow headers and bodies, idle kept-alive connections, and more
//! connections than the limit. Every case must end within a bound.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use baton_serve::http::listen::CLOSE_GRACE;
use baton_serve::http::ServerOptions;
use serde_json::Value;

use crate::server::*;

fn options(drain_ms: u64, header_ms: u64, body_ms: u64) -> ServerOptions {
    ServerOptions {
        body_limit: BODY_LIMIT,
        drain: Duration::from_millis(drain_ms),
        header_timeout: Duration::from_millis(header_ms),
        body_timeout: Duration::from_millis(body_ms),
        ..ServerOptions::default()
    }
}

/// Stops `server` on another thread; how long `serve` took to return, or
/// `None` past `bound` (the server is then leaked rather than hang the
/// test).
fn stop_within(mut server: Server, bound: Duration) -> Option<Duration> {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        server.stop();
        let _ = done.send(start.elapsed());
    });
    finished.recv_timeout(bound).ok()
}

/// Reads until the server closes the connection; what it sent and how long
/// that took, or `None` when it is still open after `bound`.
fn closed_within(stream: &mut TcpStream, bound: Duration) -> Option<(String, Duration)> {
    let start = Instant::now();
    stream.set_read_timeout(Some(bound)).expect("timeout");
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some((String::from_utf8_lossy(&seen).into_owned(), start.elapsed())),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some((String::from_utf8_lossy(&seen).into_owned(), start.elapsed()))
            }
            Err(_) => return None,
        }
        if start.elapsed() > bound {
            return None;
        }
    }
}

const HALF_HEAD: &[u8] = b"POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Le";

/// Starts a server with a 300 ms drain and timeouts far past the bound, has
/// a client send `sent` and wait, and checks that `serve` returns within
/// the drain, the grace for last events, and slack.
fn shutdown_ends_within_its_bound_while_a_client_holds(sent: &[u8]) {
    let server = Server::start_with(1, 1, 64, options(300, 60_000, 60_000));
    let mut client = server.connect();
    client.write_all(sent).expect("write part of a request");
    std::thread::sleep(Duration::from_millis(100));
    let bound = Duration::from_millis(300) + CLOSE_GRACE + Duration::from_secs(3);
    let took = stop_within(server, bound).unwrap_or_else(|| panic!("serve still runs {bound:?} after the signal"));
    assert!(took < bound, "took {took:?}");
}

#[test]
fn shutdown_ends_within_its_bound_while_a_client_holds_half_its_headers() {
    shutdown_ends_within_its_bound_while_a_client_holds(HALF_HEAD);
}

#[test]
fn shutdown_ends_within_its_bound_while_a_client_holds_half_its_body() {
    shutdown_ends_within_its_bound_while_a_client_holds(
        b"POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n{\"prompt\":",
    );
}

#[test]
fn a_client_that_never_finishes_its_headers_is_closed_after_the_header_timeout() {
    let server = Server::start_with(1, 1, 64, options(1000, 300, 60_000));
    let mut client = server.connect();
    client.write_all(HALF_HEAD).expect("write half a head");
    let (_, took) = closed_within(&mut client, Duration::from_secs(10)).expect("the server closes the connection");
    assert!(took >= Duration::from_millis(250), "closed after {took:?}, before the timeout");
}

#[test]
fn an_idle_kept_alive_connection_is_closed_after_the_header_timeout() {
    let server = Server::start_with(1, 1, 64, options(1000, 300, 60_000));
    let mut client = server.connect();
    client.write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n").expect("write a keep-alive request");
    let (answer, _) = closed_within(&mut client, Duration::from_secs(10)).expect("answered, then closed when idle");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn a_body_slower_than_the_body_timeout_gets_408() {
    let server = Server::start_with(1, 1, 64, options(1000, 10_000, 300));
    let mut client = server.connect();
    let head = "POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{";
    client.write_all(head.as_bytes()).expect("write the head");
    let (answer, _) = closed_within(&mut client, Duration::from_secs(10)).expect("an answer");
    let (status, body) = parse(answer.as_bytes());
    assert_eq!(status, 408, "{body}");
    let body: Value = serde_json::from_str(&body).expect("a JSON error");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("did not arrive")), "{body}");
}

#[test]
fn past_the_connection_limit_health_still_answers_once_slow_clients_time_out() {
    let limit = 4;
    let options = ServerOptions { max_connections: limit, ..options(1000, 400, 60_000) };
    let server = Server::start_with(1, 1, 64, options);
    // Twice the limit of clients that send half a head and wait.
    let mut holders: Vec<TcpStream> = (0..2 * limit)
        .map(|_| {
            let mut client = server.connect();
            client.write_all(HALF_HEAD).expect("write half a head");
            client
        })
        .collect();
    let start = Instant::now();
    let (status, body) = server.call("GET", "/health", b"");
    assert_eq!(status, 200, "{body}");
    // The health check waited for at most a few header timeouts, not for
    // the holders to give up.
    assert!(start.elapsed() < Duration::from_secs(10), "health took {:?}", start.elapsed());
    holders.clear();
}
