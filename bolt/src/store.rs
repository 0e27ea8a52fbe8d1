//! Talking to a host's object store (the data path's PUT / GET frames): outputs too
//! large to travel inline in a RESULT are written to the executor host's store, and the
//! client fetches them from there; inputs too large for the spec are put in the
//! client host's store and named as the spec's input objects.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use scheduler_common::data::DataFrame;
use scheduler_common::layout::JobRef;
use tokio::io::AsyncWriteExt;

use crate::frames;

/// Longest a store request may take before it counts as failed.
pub const STORE_TIMEOUT: Duration = Duration::from_secs(10);

fn answer_error(frame: DataFrame<'_>, what: &str) -> anyhow::Error {
    match frame {
        DataFrame::Error { code, message } => anyhow::anyhow!("store refused {what}: {} ({message})", code.name()),
        other => anyhow::anyhow!("store answered {what} with {:?}", other.kind()),
    }
}

/// PUT `data` under `name` for job `owner`; blocking (executor threads).
pub(crate) fn put_blocking(store: SocketAddr, owner: JobRef, name: &str, data: &[u8]) -> anyhow::Result<()> {
    let mut s = TcpStream::connect_timeout(&store, STORE_TIMEOUT)?;
    s.set_read_timeout(Some(STORE_TIMEOUT))?;
    s.set_nodelay(true)?;
    frames::write_blocking(&mut s, &DataFrame::Put { owner, name, data })?;
    let answer = frames::read_blocking(&mut s)?;
    match answer.frame() {
        DataFrame::Stored { .. } => Ok(()),
        other => Err(answer_error(other, "PUT")),
    }
}

/// GET object `name`; blocking (executor threads).
pub(crate) fn get_blocking(store: SocketAddr, name: &str) -> anyhow::Result<Bytes> {
    let mut s = TcpStream::connect_timeout(&store, STORE_TIMEOUT)?;
    s.set_read_timeout(Some(STORE_TIMEOUT))?;
    s.set_nodelay(true)?;
    frames::write_blocking(&mut s, &DataFrame::Get { name })?;
    let answer = frames::read_blocking(&mut s)?;
    match answer.frame() {
        DataFrame::Object { data } => Ok(Bytes::copy_from_slice(data)),
        other => Err(answer_error(other, "GET")),
    }
}

async fn call(store: SocketAddr, request: &DataFrame<'_>) -> anyhow::Result<frames::OwnedFrame> {
    let bytes = frames::encode(request)?;
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(store).await?;
        s.set_nodelay(true)?;
        s.write_all(&bytes).await?;
        Ok::<_, anyhow::Error>(frames::read_async(&mut s).await?)
    };
    tokio::time::timeout(STORE_TIMEOUT, exchange).await.map_err(|_| anyhow::anyhow!("store {store} did not answer"))?
}

/// GET object `name` (the client fetching a large output).
pub(crate) async fn get(store: SocketAddr, name: &str) -> anyhow::Result<Bytes> {
    let answer = call(store, &DataFrame::Get { name }).await?;
    match answer.frame() {
        DataFrame::Object { data } => Ok(Bytes::copy_from_slice(data)),
        other => Err(answer_error(other, "GET")),
    }
}

/// PUT `data` under `name` for job `owner` (the client placing a large input).
pub(crate) async fn put(store: SocketAddr, owner: JobRef, name: &str, data: &[u8]) -> anyhow::Result<()> {
    let answer = call(store, &DataFrame::Put { owner, name, data }).await?;
    match answer.frame() {
        DataFrame::Stored { .. } => Ok(()),
        other => Err(answer_error(other, "PUT")),
    }
}
