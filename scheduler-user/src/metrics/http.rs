//! A small HTTP/1.1 server for `/metrics` and `/stats`, on a thread of its own (never the
//! packet thread), and the client `bolt switch stats` and `bolt top` read it with.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{flatten, render_prometheus};

/// Largest request head read; a longer one is refused.
const MAX_REQUEST: usize = 8192;
/// How long one client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// What the server serves: the component's counters as one JSON value, read when asked.
pub type StatsSource = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// A running metrics endpoint; stops when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Requests refused (not a GET of a known path, too long, malformed).
    rejected: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves `/stats` (`source()` as JSON) and `/metrics` (the same
    /// value in Prometheus text format, names prefixed with `prefix`).
    pub fn start(addr: SocketAddr, prefix: &'static str, source: StatsSource) -> anyhow::Result<MetricsServer> {
        let listener = TcpListener::bind(addr).map_err(|e| anyhow::anyhow!("metrics endpoint {addr}: {e}"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let rejected = Arc::new(AtomicU64::new(0));
        let (thread_stop, thread_rejected) = (stop.clone(), rejected.clone());
        let thread = std::thread::Builder::new().name("bolt-metrics".into()).spawn(move || {
            while !thread_stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if serve(stream, prefix, &source).is_err() {
                            thread_rejected.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics endpoint: accept failed");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })?;
        tracing::info!(%addr, "metrics at http://{addr}/metrics (Prometheus) and /stats (JSON)");
        Ok(MetricsServer { addr, stop, rejected, thread: Some(thread) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests refused so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error("request head longer than {MAX_REQUEST} bytes")]
    TooLong,
    #[error("not an HTTP request line")]
    Malformed,
    #[error("method {0} not allowed")]
    Method(String),
    #[error("no such path {0}")]
    NotFound(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Answers one request and closes the connection. An error means the request was refused
/// (it got a 4xx answer where it could still be sent one).
fn serve(mut stream: TcpStream, prefix: &str, source: &StatsSource) -> Result<(), RequestError> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let result = read_request(&mut stream).and_then(|path| {
        let stats = source();
        match path.as_str() {
            "/stats" => Ok(("application/json", serde_json::to_string(&stats).unwrap_or_default() + "\n")),
            "/metrics" => Ok(("text/plain; version=0.0.4", render_prometheus(&flatten(prefix, &stats)))),
            _ => Err(RequestError::NotFound(path)),
        }
    });
    let (status, content_type, body) = match &result {
        Ok((ct, body)) => ("200 OK", *ct, body.clone()),
        Err(RequestError::Method(_)) => ("405 Method Not Allowed", "text/plain", "GET only\n".to_string()),
        Err(RequestError::NotFound(_)) => ("404 Not Found", "text/plain", "/metrics or /stats\n".to_string()),
        Err(RequestError::Io(_)) => return result.map(|_| ()),
        Err(e) => ("400 Bad Request", "text/plain", format!("{e}\n")),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    result.map(|_| ())
}

/// Reads the request head and returns the path of a GET.
fn read_request(stream: &mut TcpStream) -> Result<String, RequestError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > MAX_REQUEST {
            return Err(RequestError::TooLong);
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(RequestError::Malformed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = std::str::from_utf8(&buf).map_err(|_| RequestError::Malformed)?;
    let mut parts = head.lines().next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(RequestError::Malformed);
    };
    if !version.starts_with("HTTP/1.") {
        return Err(RequestError::Malformed);
    }
    if method != "GET" {
        return Err(RequestError::Method(method.to_string()));
    }
    Ok(target.split('?').next().unwrap_or_default().to_string())
}

/// GET `path` from `addr`; the body of a 200 answer.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> anyhow::Result<String> {
    let deadline = Instant::now() + timeout;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| anyhow::anyhow!("connecting to {addr}: {e}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        anyhow::ensure!(Instant::now() < deadline, "{addr}{path}: no complete answer within {timeout:?}");
        let n = stream.read(&mut chunk).map_err(|e| anyhow::anyhow!("reading from {addr}: {e}"))?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
        anyhow::ensure!(answer.len() < 64 << 20, "{addr}{path}: answer too long");
    }
    let text = String::from_utf8(answer).map_err(|_| anyhow::anyhow!("{addr}{path}: answer is not UTF-8"))?;
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| anyhow::anyhow!("{addr}{path}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or_default();
    anyhow::ensure!(status.split(' ').nth(1) == Some("200"), "{addr}{path}: {status}");
    Ok(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_stats_and_metrics_and_refuses_the_rest() {
        let source: StatsSource = Arc::new(|| serde_json::json!({"switch": {"received": 7}}));
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), "bolt", source).unwrap();
        let addr = server.local_addr();
        let t = Duration::from_secs(5);
        assert_eq!(get(addr, "/stats", t).unwrap().trim(), r#"{"switch":{"received":7}}"#);
        assert_eq!(get(addr, "/metrics", t).unwrap(), "# TYPE bolt_switch_received counter\nbolt_switch_received 7\n");
        assert!(get(addr, "/nothing", t).unwrap_err().to_string().contains("404"));
        let mut raw = TcpStream::connect(addr).unwrap();
        raw.write_all(b"garbage\r\n\r\n").unwrap();
        let mut answer = String::new();
        raw.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        // Counted once the answer is written, so possibly just after the client read it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while server.rejected() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(server.rejected(), 2);
    }
}
