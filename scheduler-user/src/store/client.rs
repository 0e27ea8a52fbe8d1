//! The store's client library: put, get and delete a job's objects on any host's store.
//! Blocking, with a bounded wait on every call; `bolt object put`, `get` and `gc` are
//! thin layers over it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use scheduler_common::data::{DataFrame, ErrorCode};
use scheduler_common::JobRef;

use super::wire;

/// How long a call waits for a connection and for each read or write.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a store call failed.
#[derive(Debug)]
pub enum StoreError {
    /// The store answered with an error (missing object, full, too large, bad request).
    Refused { code: ErrorCode, message: String },
    /// No answer: the host is down, unreachable, or the connection broke.
    Unreachable { addr: SocketAddr, error: String },
    /// The store answered with a frame that does not answer the request.
    Unexpected(String),
}

impl StoreError {
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            StoreError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Refused { code, message } => write!(f, "store refused ({}): {message}", code.name()),
            StoreError::Unreachable { addr, error } => write!(f, "store {addr} unreachable: {error}"),
            StoreError::Unexpected(what) => write!(f, "store answered out of protocol: {what}"),
        }
    }
}

impl std::error::Error for StoreError {}

fn call(addr: SocketAddr, request: &DataFrame<'_>, timeout: Duration) -> Result<wire::OwnedFrame, StoreError> {
    wire::call(addr, request, timeout).map_err(|e| StoreError::Unreachable { addr, error: format!("{e:#}") })
}

fn refused_or_unexpected(f: DataFrame<'_>) -> StoreError {
    match f {
        DataFrame::Error { code, message } => StoreError::Refused { code, message: message.to_owned() },
        other => StoreError::Unexpected(format!("{:?}", other.kind())),
    }
}

fn call_kept(
    conns: &wire::Connections,
    addr: SocketAddr,
    request: &DataFrame<'_>,
    timeout: Duration,
) -> Result<wire::OwnedFrame, StoreError> {
    conns.call(addr, request, timeout).map_err(|e| StoreError::Unreachable { addr, error: format!("{e:#}") })
}

fn stored(answer: wire::OwnedFrame) -> Result<u64, StoreError> {
    match answer.frame() {
        DataFrame::Stored { size } => Ok(size),
        other => Err(refused_or_unexpected(other)),
    }
}

fn object(answer: wire::OwnedFrame) -> Result<Vec<u8>, StoreError> {
    match answer.frame() {
        DataFrame::Object { data } => Ok(data.to_vec()),
        other => Err(refused_or_unexpected(other)),
    }
}

/// Stores `data` as `name` in the store at `addr`, owned by job `owner`.
pub fn put(addr: SocketAddr, owner: JobRef, name: &str, data: &[u8], timeout: Duration) -> Result<u64, StoreError> {
    stored(call(addr, &DataFrame::Put { owner, name, data }, timeout)?)
}

/// [`put`] on a connection kept in `conns`.
pub fn put_kept(
    conns: &wire::Connections,
    addr: SocketAddr,
    owner: JobRef,
    name: &str,
    data: &[u8],
    timeout: Duration,
) -> Result<u64, StoreError> {
    stored(call_kept(conns, addr, &DataFrame::Put { owner, name, data }, timeout)?)
}

/// Reads object `name` from the store at `addr`.
pub fn get(addr: SocketAddr, name: &str, timeout: Duration) -> Result<Vec<u8>, StoreError> {
    object(call(addr, &DataFrame::Get { name }, timeout)?)
}

/// [`get`] on a connection kept in `conns`.
pub fn get_kept(
    conns: &wire::Connections,
    addr: SocketAddr,
    name: &str,
    timeout: Duration,
) -> Result<Vec<u8>, StoreError> {
    object(call_kept(conns, addr, &DataFrame::Get { name }, timeout)?)
}

/// Drops every object of job `owner` from the store at `addr`: (objects, bytes).
pub fn delete_job(addr: SocketAddr, owner: JobRef, timeout: Duration) -> Result<(u32, u64), StoreError> {
    let answer = call(addr, &DataFrame::DeleteJob { owner }, timeout)?;
    match answer.frame() {
        DataFrame::Deleted { objects, bytes } => Ok((objects, bytes)),
        other => Err(refused_or_unexpected(other)),
    }
}

/// Arguments of `bolt object put`.
#[derive(Args, Debug, Clone)]
pub struct PutArgs {
    /// The store to put into (a worker host's `bolt object serve --listen`).
    #[arg(long, value_name = "ADDR")]
    pub store: SocketAddr,
    /// Object name: 1 to 255 of A-Z a-z 0-9 _ . - /
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// File whose bytes become the object.
    #[arg(long, value_name = "PATH")]
    pub file: PathBuf,
    /// Owning job's uid and jid: `bolt object gc` with the same pair deletes the object.
    #[arg(long, default_value_t = 0)]
    pub uid: u32,
    #[arg(long, default_value_t = 0)]
    pub jid: u32,
}

/// Arguments of `bolt object get`.
#[derive(Args, Debug, Clone)]
pub struct GetArgs {
    #[arg(long, value_name = "ADDR")]
    pub store: SocketAddr,
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// Where to write the object (default: standard output).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// Arguments of `bolt object gc`.
#[derive(Args, Debug, Clone)]
pub struct GcArgs {
    #[arg(long, value_name = "ADDR")]
    pub store: SocketAddr,
    #[arg(long)]
    pub uid: u32,
    #[arg(long)]
    pub jid: u32,
}

pub fn run_put(args: PutArgs) -> anyhow::Result<()> {
    let data = std::fs::read(&args.file).map_err(|e| anyhow::anyhow!("reading {}: {e}", args.file.display()))?;
    let size = put(args.store, JobRef::new(args.uid, args.jid), &args.name, &data, DEFAULT_TIMEOUT)?;
    println!("{} {size} bytes at {}", args.name, args.store);
    Ok(())
}

pub fn run_get(args: GetArgs) -> anyhow::Result<()> {
    let data = get(args.store, &args.name, DEFAULT_TIMEOUT)?;
    match args.out {
        Some(p) => std::fs::write(&p, &data).map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?,
        None => std::io::Write::write_all(&mut std::io::stdout(), &data)?,
    }
    Ok(())
}

pub fn run_gc(args: GcArgs) -> anyhow::Result<()> {
    let (objects, bytes) = delete_job(args.store, JobRef::new(args.uid, args.jid), DEFAULT_TIMEOUT)?;
    println!("deleted {objects} objects, {bytes} bytes of job {}/{}", args.uid, args.jid);
    Ok(())
}
