//! Reading and writing the data path's TCP frames (scheduler_common::data): blocking on
//! the executor's thread, async in the client's spec server. Every frame is checked by
//! the one decoder in scheduler-common.

use std::io::{Read, Write};

use scheduler_common::data::{decode_body, decode_frame_header, DataError, DataFrame, FRAME_HEADER_LEN};
use tokio::io::{AsyncRead, AsyncReadExt};

/// A frame read off a connection, with the bytes it borrows from.
pub(crate) struct OwnedFrame {
    kind: scheduler_common::data::Kind,
    body: Vec<u8>,
}

impl OwnedFrame {
    pub fn frame(&self) -> DataFrame<'_> {
        // Checked when read; a second decode of the same bytes gives the same answer.
        decode_body(self.kind, &self.body).expect("decoded once already")
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Refused(DataError),
}

fn finish(header: &[u8; FRAME_HEADER_LEN], body: Vec<u8>) -> Result<OwnedFrame, ReadError> {
    let (kind, _) = decode_frame_header(header).map_err(ReadError::Refused)?;
    decode_body(kind, &body).map_err(ReadError::Refused)?;
    Ok(OwnedFrame { kind, body })
}

pub(crate) fn read_blocking(stream: &mut impl Read) -> Result<OwnedFrame, ReadError> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    stream.read_exact(&mut header)?;
    let (_, len) = decode_frame_header(&header).map_err(ReadError::Refused)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    finish(&header, body)
}

pub(crate) async fn read_async(stream: &mut (impl AsyncRead + Unpin)) -> Result<OwnedFrame, ReadError> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    stream.read_exact(&mut header).await?;
    let (_, len) = decode_frame_header(&header).map_err(ReadError::Refused)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    finish(&header, body)
}

/// The frame's bytes; fails only on what the decoder would refuse (bad names, long text).
pub(crate) fn encode(frame: &DataFrame<'_>) -> anyhow::Result<Vec<u8>> {
    let mut buf = vec![0u8; frame.encoded_len()];
    let n = frame.encode(&mut buf).map_err(|e| anyhow::anyhow!("encoding {:?}: {e}", frame.kind()))?;
    buf.truncate(n);
    Ok(buf)
}

pub(crate) fn write_blocking(stream: &mut impl Write, frame: &DataFrame<'_>) -> anyhow::Result<()> {
    stream.write_all(&encode(frame)?)?;
    Ok(())
}
