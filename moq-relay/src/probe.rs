//! `moqx-relay health`: asks a running relay's `/health` (or `/ready`) and exits 0 if it
//! answers 200 (the binary's module). For container health checks and exec probes in
//! images that have no HTTP client: plain HTTP/1.0 over TCP, as the relay serves it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long the whole probe may take.
const PATIENCE: Duration = Duration::from_secs(3);

/// Asks `address` for `path` and returns the status line, or why it could not.
pub(crate) fn probe(address: &str, path: &str) -> Result<String, String> {
    let target: SocketAddr = address
        .to_socket_addrs()
        .map_err(|e| format!("{address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&target, PATIENCE)
        .map_err(|e| format!("connecting to {target}: {e}"))?;
    stream
        .set_read_timeout(Some(PATIENCE))
        .and_then(|()| stream.set_write_timeout(Some(PATIENCE)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")
        .map_err(|e| format!("asking {target}: {e}"))?;
    let mut response = Vec::new();
    stream
        .take(4096)
        .read_to_end(&mut response)
        .map_err(|e| format!("reading {target}'s answer: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let status = text.lines().next().unwrap_or_default().to_owned();
    match status.split_whitespace().nth(1) {
        Some("200") => Ok(status),
        _ => Err(format!("{path}: {}", text.trim())),
    }
}
