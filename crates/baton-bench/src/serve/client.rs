//! A minimal HTTP/1.1 client for the load generator, on blocking std
//! sockets (one thread per simulated client, so no async runtime is needed):
//! one request per connection (`Connection: close`), a JSON body, and the
//! response read either whole or as server-sent events, each `data:` line
//! timed with [`Instant`] the moment it has arrived. Loopback addresses only.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use thiserror::Error;

/// Why a request to the server failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The URL is not `http://HOST:PORT[/]`.
    #[error("bad server URL {url:?}: {why} (expected http://127.0.0.1:PORT)")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The host resolves to an address that is not loopback.
    #[error(
        "{host} resolves to {addr}, which is not a loopback address: the load generator only talks to this machine"
    )]
    NotLoopback {
        /// The host given.
        host: String,
        /// The address it resolved to.
        addr: SocketAddr,
    },
    /// The connection or a read or write on it failed.
    #[error("{what} {addr}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The server's address.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// The response is not HTTP/1.x as expected.
    #[error("malformed response from {addr}: {why}")]
    Malformed {
        /// The server's address.
        addr: SocketAddr,
        /// What is wrong with it.
        why: String,
    },
    /// The response did not end before the deadline.
    #[error("no complete response from {addr} within {after:?}")]
    Timeout {
        /// The server's address.
        addr: SocketAddr,
        /// The time allowed.
        after: Duration,
    },
}

/// A loopback server's address.
#[derive(Clone, Copy, Debug)]
pub struct Endpoint {
    addr: SocketAddr,
}

/// A whole response.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The body, de-chunked.
    pub body: String,
}

/// What the event callback of [`Endpoint::stream`] wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// Close the connection now (a client that goes away mid-stream).
    Disconnect,
}

impl Endpoint {
    /// Parses `http://HOST:PORT[/]`, refusing any host that is not loopback.
    pub fn parse(url: &str) -> Result<Endpoint, ClientError> {
        let bad = |why| ClientError::BadUrl { url: url.to_owned(), why };
        let rest = url.strip_prefix("http://").ok_or_else(|| bad("only http:// is served"))?;
        let authority = rest.trim_end_matches('/');
        if authority.contains('/') {
            return Err(bad("a path is not expected"));
        }
        let addrs: Vec<SocketAddr> =
            authority.to_socket_addrs().map_err(|_| bad("the host or port does not resolve"))?.collect();
        let addr = *addrs.first().ok_or_else(|| bad("the host resolves to no address"))?;
        if let Some(outside) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(ClientError::NotLoopback { host: authority.to_owned(), addr: *outside });
        }
        Ok(Endpoint { addr })
    }

    /// The loopback endpoint on `port`.
    pub fn local(port: u16) -> Endpoint {
        Endpoint { addr: SocketAddr::from(([127, 0, 0, 1], port)) }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `GET path`, read whole.
    pub fn get(&self, path: &str, timeout: Duration) -> Result<Response, ClientError> {
        let mut reader = self.send("GET", path, None, timeout)?;
        self.read_whole(&mut reader, timeout)
    }

    /// `POST path` with a JSON body whose response is a stream of events:
    /// `on_event` gets each `data:` payload and the instant its line
    /// arrived. A status other than 200 returns the whole response instead.
    pub fn stream(
        &self,
        path: &str,
        body: &str,
        timeout: Duration,
        mut on_event: impl FnMut(&str, Instant) -> Flow,
    ) -> Result<Option<Response>, ClientError> {
        let start = Instant::now();
        let mut reader = self.send("POST", path, Some(body), timeout)?;
        let head = self.read_head(&mut reader)?;
        if head.status != 200 {
            let body = self.read_body(&mut reader, &head, timeout)?;
            return Ok(Some(Response { status: head.status, body }));
        }
        let mut events = BufReader::new(Body::new(reader, head.chunked, head.length));
        let mut line = String::new();
        loop {
            line.clear();
            let n = events.read_line(&mut line).map_err(|e| self.io_or_timeout("reading events from", e, timeout))?;
            if n == 0 {
                return Ok(None);
            }
            let now = Instant::now();
            if now.duration_since(start) > timeout {
                return Err(ClientError::Timeout { addr: self.addr, after: timeout });
            }
            let Some(data) = line.trim_end().strip_prefix("data:") else { continue };
            let data = data.trim_start();
            if data == "[DONE]" {
                return Ok(None);
            }
            if on_event(data, now) == Flow::Disconnect {
                return Ok(None);
            }
        }
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> Result<BufReader<TcpStream>, ClientError> {
        let io = |what| move |source| ClientError::Io { what, addr: self.addr, source };
        let mut stream = TcpStream::connect_timeout(&self.addr, timeout).map_err(io("connecting to"))?;
        stream.set_read_timeout(Some(timeout)).map_err(io("configuring"))?;
        stream.set_nodelay(true).map_err(io("configuring"))?;
        let body = body.unwrap_or("");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: */*\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream.write_all(request.as_bytes()).map_err(io("writing to"))?;
        Ok(BufReader::new(stream))
    }

    fn read_whole(&self, reader: &mut BufReader<TcpStream>, timeout: Duration) -> Result<Response, ClientError> {
        let head = self.read_head(reader)?;
        let body = self.read_body(reader, &head, timeout)?;
        Ok(Response { status: head.status, body })
    }

    fn read_head(&self, reader: &mut BufReader<TcpStream>) -> Result<Head, ClientError> {
        let malformed = |why: String| ClientError::Malformed { addr: self.addr, why };
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|source| ClientError::Io {
            what: "reading from",
            addr: self.addr,
            source,
        })?;
        let status = line
            .strip_prefix("HTTP/1.")
            .and_then(|s| s.get(2..5))
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| malformed(format!("status line {:?}", line.trim_end())))?;
        let mut head = Head { status, chunked: false, length: None };
        loop {
            line.clear();
            let n = reader.read_line(&mut line).map_err(|source| ClientError::Io {
                what: "reading headers from",
                addr: self.addr,
                source,
            })?;
            if n == 0 {
                return Err(malformed("the headers do not end".into()));
            }
            let header = line.trim_end();
            if header.is_empty() {
                return Ok(head);
            }
            let Some((name, value)) = header.split_once(':') else { continue };
            let value = value.trim();
            if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
                head.chunked = true;
            } else if name.eq_ignore_ascii_case("content-length") {
                head.length = Some(value.parse().map_err(|_| malformed(format!("content-length {value:?}")))?);
            }
        }
    }

    fn read_body(
        &self,
        reader: &mut BufReader<TcpStream>,
        head: &Head,
        timeout: Duration,
    ) -> Result<String, ClientError> {
        let mut bytes = Vec::new();
        Body::new(reader, head.chunked, head.length)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io_or_timeout("reading a body from", e, timeout))?;
        String::from_utf8(bytes)
            .map_err(|_| ClientError::Malformed { addr: self.addr, why: "the body is not UTF-8".into() })
    }

    fn io_or_timeout(&self, what: &'static str, source: io::Error, timeout: Duration) -> ClientError {
        match source.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                ClientError::Timeout { addr: self.addr, after: timeout }
            }
            _ => ClientError::Io { what, addr: self.addr, source },
        }
    }
}

/// What the response's head says about its body.
struct Head {
    status: u16,
    chunked: bool,
    length: Option<usize>,
}

/// A response body: chunked, of a known length, or up to the end of the
/// connection.
struct Body<R> {
    inner: R,
    chunked: bool,
    /// Bytes left of the current chunk, or of the whole body.
    left: Option<usize>,
    done: bool,
}

impl<R: BufRead> Body<R> {
    fn new(inner: R, chunked: bool, length: Option<usize>) -> Body<R> {
        Body { inner, chunked, left: if chunked { Some(0) } else { length }, done: false }
    }

    /// Reads the next chunk's size line; 0 ends the body.
    fn next_chunk(&mut self) -> io::Result<usize> {
        let mut line = String::new();
        // The CRLF that ends the previous chunk comes first, except before
        // the first chunk: skip empty lines.
        while line.trim().is_empty() {
            line.clear();
            if self.inner.read_line(&mut line)? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the chunked body ends early"));
            }
        }
        let size = line.trim().split(';').next().unwrap_or("");
        usize::from_str_radix(size, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("chunk size {:?}", line.trim())))
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.chunked && self.left == Some(0) {
            let size = self.next_chunk()?;
            if size == 0 {
                self.done = true;
                return Ok(0);
            }
            self.left = Some(size);
        }
        let want = match self.left {
            Some(left) => buf.len().min(left),
            None => buf.len(),
        };
        if want == 0 {
            self.done = true;
            return Ok(0);
        }
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            if self.left.is_some() {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the body ends early"));
            }
            self.done = true;
        }
        if let Some(left) = &mut self.left {
            *left -= n;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls() {
        assert_eq!(Endpoint::parse("http://127.0.0.1:8080").unwrap().addr().port(), 8080);
        assert!(Endpoint::parse("http://[::1]:9/").unwrap().addr().ip().is_loopback());
        assert!(matches!(Endpoint::parse("http://10.1.2.3:80"), Err(ClientError::NotLoopback { .. })));
        assert!(matches!(Endpoint::parse("https://127.0.0.1:80"), Err(ClientError::BadUrl { .. })));
        assert!(matches!(Endpoint::parse("http://127.0.0.1:80/v1"), Err(ClientError::BadUrl { .. })));
        assert!(matches!(Endpoint::parse("http://127.0.0.1"), Err(ClientError::BadUrl { .. })));
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        let mut out = String::new();
        Body::new(&wire[..], true, None).read_to_string(&mut out).unwrap();
        assert_eq!(out, "hello, world");
        let mut cut = String::new();
        assert!(Body::new(&b"5\r\nhel"[..], true, None).read_to_string(&mut cut).is_err());
    }

    #[test]
    fn bodies_of_known_length_stop_there() {
        let mut out = String::new();
        Body::new(&b"abcdef"[..], false, Some(4)).read_to_string(&mut out).unwrap();
        assert_eq!(out, "abcd");
    }

    #[test]
    fn events_are_read_from_a_live_server() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).unwrap();
            let events = "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: [DONE]\n\n";
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n0\r\n\r\n",
                events.len()
            );
            socket.write_all(reply.as_bytes()).unwrap();
        });
        let mut seen = Vec::new();
        let end = Endpoint::local(port)
            .stream("/v1/completions", "{}", Duration::from_secs(5), |data, _| {
                seen.push(data.to_owned());
                Flow::Continue
            })
            .unwrap();
        server.join().unwrap();
        assert!(end.is_none());
        assert_eq!(seen, ["{\"n\":1}", "{\"n\":2}"]);
    }
}
