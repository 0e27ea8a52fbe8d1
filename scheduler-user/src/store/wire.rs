//! Reading and writing the data path's TCP frames (scheduler_common::data) on blocking
//! streams: the one implementation the store, its clients, the spec server and the
//! executors share.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use scheduler_common::data::{decode_body, decode_frame_header, DataError, DataFrame, ErrorCode, FRAME_HEADER_LEN};

/// One frame read off a stream, kept with its bytes so it can be decoded again by view.
pub struct OwnedFrame {
    kind: scheduler_common::data::Kind,
    body: Vec<u8>,
}

impl OwnedFrame {
    /// The decoded frame (checked when it was read, so this cannot fail then).
    pub fn frame(&self) -> DataFrame<'_> {
        decode_body(self.kind, &self.body).expect("checked when read")
    }
}

/// Why a frame could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection before a new frame began.
    Closed,
    Io(std::io::Error),
    /// The bytes are not a valid frame (counted by the caller, by kind).
    Invalid(DataError),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed => write!(f, "connection closed"),
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads one frame: header, then exactly its body; decodes it.
pub fn read_frame(stream: &mut impl Read) -> Result<OwnedFrame, ReadError> {
    let mut h = [0u8; FRAME_HEADER_LEN];
    let mut got = 0;
    while got < h.len() {
        match stream.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Err(ReadError::Closed),
            Ok(0) => return Err(ReadError::Invalid(DataError::Truncated)),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    let (kind, len) = decode_frame_header(&h).map_err(ReadError::Invalid)?;
    // Grown as bytes arrive, so a header claiming 64 MiB costs nothing until they do.
    let mut body = Vec::new();
    stream.take(len as u64).read_to_end(&mut body).map_err(ReadError::Io)?;
    if body.len() < len {
        return Err(ReadError::Invalid(DataError::Truncated));
    }
    decode_body(kind, &body).map_err(ReadError::Invalid)?;
    Ok(OwnedFrame { kind, body })
}

/// Encodes and writes one frame.
pub fn write_frame(stream: &mut impl Write, frame: &DataFrame<'_>) -> anyhow::Result<()> {
    let mut buf = vec![0u8; frame.encoded_len()];
    let n = frame.encode(&mut buf).map_err(|e| anyhow::anyhow!("encoding a {:?} frame: {e}", frame.kind()))?;
    stream.write_all(&buf[..n])?;
    stream.flush()?;
    Ok(())
}

/// Connects with a bounded wait and sets read and write timeouts.
pub fn connect(addr: SocketAddr, timeout: Duration) -> anyhow::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Sends one request on a fresh connection and reads its one answer.
pub fn call(addr: SocketAddr, request: &DataFrame<'_>, timeout: Duration) -> anyhow::Result<OwnedFrame> {
    let mut s = connect(addr, timeout)?;
    call_on(&mut s, request).with_context(|| format!("exchange with {addr}"))
}

/// Sends one request on an open connection and reads its one answer.
pub fn call_on(s: &mut TcpStream, request: &DataFrame<'_>) -> anyhow::Result<OwnedFrame> {
    write_frame(s, request)?;
    read_frame(s).map_err(|e| anyhow::anyhow!("reading the answer: {e}"))
}

/// Connections kept open between calls, one per peer: an executor's spec fetches,
/// RESULTs and object transfers to the same spec server or store reuse one connection
/// instead of a connect (and a server thread) per request.
#[derive(Debug, Default)]
pub struct Connections {
    open: Mutex<HashMap<SocketAddr, TcpStream>>,
}

/// Peers a [`Connections`] keeps a connection to; past this the oldest is not told
/// apart, one is closed at random.
const KEPT_CONNECTIONS: usize = 32;

impl Connections {
    /// Sends `request` to `addr` and reads its answer, on the kept connection when there
    /// is one. A kept connection the peer closed meanwhile (idle, or its server stopped)
    /// fails the exchange, which then goes once more on a fresh connection: every data
    /// request is safe to repeat (a RESULT the spec server already took is ignored).
    pub fn call(&self, addr: SocketAddr, request: &DataFrame<'_>, timeout: Duration) -> anyhow::Result<OwnedFrame> {
        let kept = self.lock().remove(&addr);
        if let Some(mut conn) = kept {
            if let Ok(answer) = call_on(&mut conn, request) {
                self.keep(addr, conn);
                return Ok(answer);
            }
        }
        let mut conn = connect(addr, timeout)?;
        let answer = call_on(&mut conn, request).with_context(|| format!("exchange with {addr}"))?;
        self.keep(addr, conn);
        Ok(answer)
    }

    fn keep(&self, addr: SocketAddr, conn: TcpStream) {
        let mut open = self.lock();
        if open.len() >= KEPT_CONNECTIONS {
            let evicted = open.keys().next().copied();
            evicted.map(|a| open.remove(&a));
        }
        open.insert(addr, conn);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, TcpStream>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A service answering data frames: the store and the client's spec server.
pub trait FrameService: Send + Sync + 'static {
    /// Answers one request by writing its answer frame(s) to `conn`.
    fn answer(&self, request: DataFrame<'_>, conn: &mut TcpStream) -> anyhow::Result<()>;
    /// Counts a malformed frame (the connection is answered BAD_REQUEST and closed).
    fn refused(&self, e: DataError);
    /// Counts a connection closed at once because `max_connections` were open.
    fn connection_refused(&self) {}
}

/// A TCP server of a [`FrameService`]: a thread accepting, a thread per connection (at
/// most `max_connections`), one request answered at a time, idle connections closed.
pub struct FrameServer {
    addr: SocketAddr,
    /// The listening socket's descriptor, owned by the accept thread: stop() shuts it
    /// down to wake a blocked accept.
    listener_fd: RawFd,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Pause after a failed accept (out of descriptors, say), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(5);

impl FrameServer {
    pub fn spawn<S: FrameService>(
        listen: SocketAddr,
        name: &str,
        service: Arc<S>,
        max_connections: usize,
        idle: Duration,
    ) -> anyhow::Result<FrameServer> {
        // A blocking accept: a connection is served the moment it arrives (no polling
        // tick on the path of every spec fetch, RESULT and object); stop() wakes it by
        // shutting the listener down.
        let listener = TcpListener::bind(listen).with_context(|| format!("binding the {name} to {listen}"))?;
        let addr = listener.local_addr()?;
        let listener_fd = listener.as_raw_fd();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let name = name.to_owned();
            std::thread::Builder::new()
                .name(format!("bolt-{name}"))
                .spawn(move || accept_loop(listener, &name, service, stop, max_connections, idle))?
        };
        Ok(FrameServer { addr, listener_fd, stop, thread: Some(thread) })
    }

    /// The address it listens on (with the port picked when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting; open connections end when their peer closes or goes idle.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let Some(t) = self.thread.take() else { return };
        // Shutting a listening socket down makes a blocked accept() return (EINVAL) on
        // Linux, from any thread and any network namespace, which a wake-up connection
        // to its address would not: the stopping thread may not reach that address.
        // SAFETY: the descriptor is the listener's, still open: its thread owns it and
        // has not been joined.
        unsafe { libc::shutdown(self.listener_fd, libc::SHUT_RDWR) };
        let _ = t.join();
    }
}

impl Drop for FrameServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop<S: FrameService>(
    listener: TcpListener,
    name: &str,
    service: Arc<S>,
    stop: Arc<AtomicBool>,
    max_connections: usize,
    idle: Duration,
) {
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok(_) if stop.load(Ordering::Relaxed) => return,
            Ok((conn, peer)) => {
                if open.load(Ordering::Relaxed) >= max_connections {
                    service.connection_refused();
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let (service, count, stop) = (service.clone(), open.clone(), stop.clone());
                let spawned = std::thread::Builder::new().name(format!("bolt-{name}-conn")).spawn(move || {
                    if let Err(e) = serve(conn, service.as_ref(), idle, &stop) {
                        tracing::debug!(%peer, error = %e, "data connection ended");
                    }
                    count.fetch_sub(1, Ordering::Relaxed);
                });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(_) if stop.load(Ordering::Relaxed) => return,
            Err(e) => {
                tracing::warn!(server = name, error = %e, "accept failed");
                std::thread::sleep(ACCEPT_RETRY);
            }
        }
    }
}

/// Answers requests on one connection until it closes, goes idle, sends a bad frame or
/// the server stops.
fn serve<S: FrameService>(mut conn: TcpStream, service: &S, idle: Duration, stop: &AtomicBool) -> anyhow::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(idle))?;
    conn.set_write_timeout(Some(idle))?;
    conn.set_nodelay(true)?;
    loop {
        let request = match read_frame(&mut conn) {
            Ok(f) => f,
            Err(ReadError::Closed) => return Ok(()),
            Err(ReadError::Invalid(e)) => {
                service.refused(e);
                let text = e.to_string();
                write_frame(&mut conn, &DataFrame::Error { code: ErrorCode::BadRequest, message: &text })?;
                return Err(e.into());
            }
            Err(ReadError::Io(e)) => return Err(e.into()),
        };
        // A stopped server answers nothing more, even on connections kept open by their
        // peer: closed unanswered, the request goes again on a fresh connection, to
        // whatever listens at the address now.
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        service.answer(request.frame(), &mut conn)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every request with the port the request came from.
    struct PeerPort;

    impl FrameService for PeerPort {
        fn answer(&self, _request: DataFrame<'_>, conn: &mut TcpStream) -> anyhow::Result<()> {
            let port = u64::from(conn.peer_addr()?.port());
            write_frame(conn, &DataFrame::ResultAck { spec_id: port })
        }
        fn refused(&self, _e: DataError) {}
    }

    fn serve_at(addr: SocketAddr) -> FrameServer {
        FrameServer::spawn(addr, "test", Arc::new(PeerPort), 8, Duration::from_secs(30)).expect("server starts")
    }

    fn peer_port(conns: &Connections, addr: SocketAddr) -> u64 {
        let answer = conns.call(addr, &DataFrame::SpecGet { spec_id: 1 }, Duration::from_secs(5)).expect("answered");
        match answer.frame() {
            DataFrame::ResultAck { spec_id } => spec_id,
            other => panic!("answered {:?}", other.kind()),
        }
    }

    #[test]
    fn a_kept_connection_is_reused_and_replaced_once_its_server_stopped() {
        let mut first = serve_at("127.0.0.1:0".parse().unwrap());
        let addr = first.addr();
        let conns = Connections::default();
        let port = peer_port(&conns, addr);
        assert_eq!(peer_port(&conns, addr), port, "the second request went on the kept connection");
        // The stopped server's connection thread is still up; a new server listens at
        // the same address. The kept connection is closed unanswered, and the request
        // goes to the new server on a fresh one.
        first.stop();
        let _second = serve_at(addr);
        let fresh = peer_port(&conns, addr);
        assert_ne!(fresh, port, "answered on the stopped server's connection");
        assert_eq!(peer_port(&conns, addr), fresh, "the fresh connection is kept in turn");
    }
}
