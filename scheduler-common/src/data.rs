//! The TCP frames of the data path (version 3): the object store each worker host runs
//! (PUT, GET, DELETE_JOB and their answers) and the client's spec server (SPEC_GET →
//! SPEC, RESULT → RESULT_ACK). One framing for both: an 8-byte header, then `body_len`
//! bytes. A connection carries one request frame and its one answer at a time.
//!
//! Decoding borrows from the input and checks every length, name and code; it never
//! panics. Strings (names, handler names, error text) are UTF-8.

use crate::error::EncodeError;
use crate::layout::{JobRef, MAGIC, VERSION};

/// Bytes of the frame header: magic u16, version u8, kind u8, body_len u32.
pub const FRAME_HEADER_LEN: usize = 8;
/// The largest object a store keeps (64 MiB).
pub const MAX_OBJECT_LEN: usize = 64 << 20;
/// The largest frame body: a PUT of the largest object with the longest name, or a
/// SPEC with that much argument bytes.
pub const MAX_BODY_LEN: usize = MAX_OBJECT_LEN + 64 * 1024;
/// Object and handler names: 1 to this many bytes of `[A-Za-z0-9_.-/]`.
pub const MAX_NAME_LEN: usize = 255;
/// The longest error message an ERROR or RESULT carries.
pub const MAX_MESSAGE_TEXT: usize = 4096;
/// Most input objects one spec names.
pub const MAX_INPUTS: usize = 1024;
/// Outputs up to this size travel inline in RESULT as well as in the store.
pub const MAX_INLINE_OUTPUT: usize = 4096;
/// The TCP port an object store listens on unless told otherwise.
pub const DEFAULT_STORE_PORT: u16 = 7180;

/// Frame kinds (header byte 3).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Client or executor → store: keep this object for job (uid, jid).
    Put = 1,
    /// → store: send this object.
    Get = 2,
    /// Client → store: drop every object of job (uid, jid).
    DeleteJob = 3,
    /// Store → : the PUT is kept (`size` bytes).
    Stored = 4,
    /// Store → : the object asked for.
    Object = 5,
    /// Store → : what a DELETE_JOB removed.
    Deleted = 6,
    /// Store or spec server → : the request failed (code and text).
    Error = 7,
    /// Executor → client spec server: send spec `spec_id`.
    SpecGet = 8,
    /// Spec server → executor: the spec.
    Spec = 9,
    /// Executor → client spec server: how spec `spec_id` ended.
    Result = 10,
    /// Spec server → executor: the RESULT is recorded.
    ResultAck = 11,
}

impl Kind {
    pub const fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Put,
            2 => Kind::Get,
            3 => Kind::DeleteJob,
            4 => Kind::Stored,
            5 => Kind::Object,
            6 => Kind::Deleted,
            7 => Kind::Error,
            8 => Kind::SpecGet,
            9 => Kind::Spec,
            10 => Kind::Result,
            11 => Kind::ResultAck,
            _ => return None,
        })
    }
}

/// ERROR codes.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No object of that name in this store.
    Missing = 1,
    /// The store's memory bound would be exceeded.
    Full = 2,
    /// The object is larger than the store's largest object.
    TooLarge = 3,
    /// The request frame was refused by the decoder, or is not a request.
    BadRequest = 4,
    /// The spec server holds no spec of that id.
    UnknownSpec = 5,
}

impl ErrorCode {
    pub const fn from_u8(v: u8) -> Option<ErrorCode> {
        Some(match v {
            1 => ErrorCode::Missing,
            2 => ErrorCode::Full,
            3 => ErrorCode::TooLarge,
            4 => ErrorCode::BadRequest,
            5 => ErrorCode::UnknownSpec,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::Missing => "missing",
            ErrorCode::Full => "full",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownSpec => "unknown_spec",
        }
    }
}

/// RESULT status: the same codes as COMPLETE's.
pub use crate::layout::{STATUS_FAILED, STATUS_OK, STATUS_REFUSED};

/// Why a data frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataError {
    /// Fewer bytes than the header, or than the header's body_len.
    Truncated,
    BadMagic,
    BadVersion(u8),
    UnknownKind(u8),
    /// body_len above [`MAX_BODY_LEN`].
    TooLong(u32),
    /// The body's own lengths do not add up to body_len.
    BadLength,
    /// A name empty, too long, or with a character outside `[A-Za-z0-9_.-/]`.
    BadName,
    /// Text that is not UTF-8 or is longer than [`MAX_MESSAGE_TEXT`].
    BadText,
    /// An unknown error code or flag bit, a status above 2, too many inputs, an inline
    /// output larger than [`MAX_INLINE_OUTPUT`] or than the output it copies.
    BadField,
}

impl DataError {
    /// Number of kinds, for counter arrays.
    pub const KINDS: usize = 9;
    /// Counter names, indexed by [`DataError::index`].
    pub const NAMES: [&'static str; Self::KINDS] = [
        "truncated",
        "bad_magic",
        "bad_version",
        "unknown_kind",
        "too_long",
        "bad_length",
        "bad_name",
        "bad_text",
        "bad_field",
    ];

    pub const fn index(&self) -> usize {
        match self {
            DataError::Truncated => 0,
            DataError::BadMagic => 1,
            DataError::BadVersion(_) => 2,
            DataError::UnknownKind(_) => 3,
            DataError::TooLong(_) => 4,
            DataError::BadLength => 5,
            DataError::BadName => 6,
            DataError::BadText => 7,
            DataError::BadField => 8,
        }
    }

    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }
}

impl core::fmt::Display for DataError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DataError::BadVersion(v) => write!(f, "data frame refused: version {v}"),
            DataError::UnknownKind(k) => write!(f, "data frame refused: unknown kind {k}"),
            DataError::TooLong(n) => write!(f, "data frame refused: body of {n} bytes"),
            other => write!(f, "data frame refused: {}", other.name()),
        }
    }
}

impl core::error::Error for DataError {}

/// Names of objects and handlers: 1..=255 bytes of `[A-Za-z0-9_.-/]`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'))
}

/// Where an object is: its name, size, the node id of the host that holds it and that
/// host's store address. Placement reads (name, size, node); executors fetch from `store`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRef<'a> {
    pub name: &'a str,
    pub size: u64,
    pub node: u16,
    pub store_ip: [u8; 4],
    pub store_port: u16,
}

impl ObjectRef<'_> {
    /// node u16, store_ip 4, store_port u16, size u64, name_len u8, name.
    pub const fn encoded_len(&self) -> usize {
        2 + 4 + 2 + 8 + 1 + self.name.len()
    }
}

/// A spec as the spec server sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec<'a> {
    pub spec_id: u64,
    /// The handler to run, by name (the executor's registered data handlers).
    pub handler: &'a str,
    pub args: &'a [u8],
    /// The name the task's output is stored under.
    pub output: &'a str,
    pub inputs: Inputs<'a>,
}

/// The validated input list of a decoded SPEC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inputs<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> Inputs<'a> {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = ObjectRef<'a>> + Clone + 'a {
        let mut r = Reader { buf: self.bytes };
        // Validated when the SPEC was decoded; a failure here ends the iteration.
        (0..self.count).map_while(move |_| r.object_ref().ok())
    }
}

/// How a spec ended, as the executor reports it to the spec server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskResult<'a> {
    pub spec_id: u64,
    /// STATUS_OK, STATUS_FAILED or STATUS_REFUSED.
    pub status: u8,
    /// Why it failed or was refused ("" when OK).
    pub message: &'a str,
    /// Where the output is stored, if there is one.
    pub output: Option<ObjectRef<'a>>,
    /// The output's bytes when at most [`MAX_INLINE_OUTPUT`], else empty.
    pub inline: &'a [u8],
}

const RESULT_HAS_OUTPUT: u8 = 0x01;

/// A decoded data frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataFrame<'a> {
    Put { owner: JobRef, name: &'a str, data: &'a [u8] },
    Get { name: &'a str },
    DeleteJob { owner: JobRef },
    Stored { size: u64 },
    Object { data: &'a [u8] },
    Deleted { objects: u32, bytes: u64 },
    Error { code: ErrorCode, message: &'a str },
    SpecGet { spec_id: u64 },
    Spec(Spec<'a>),
    Result(TaskResult<'a>),
    ResultAck { spec_id: u64 },
}

impl DataFrame<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            DataFrame::Put { .. } => Kind::Put,
            DataFrame::Get { .. } => Kind::Get,
            DataFrame::DeleteJob { .. } => Kind::DeleteJob,
            DataFrame::Stored { .. } => Kind::Stored,
            DataFrame::Object { .. } => Kind::Object,
            DataFrame::Deleted { .. } => Kind::Deleted,
            DataFrame::Error { .. } => Kind::Error,
            DataFrame::SpecGet { .. } => Kind::SpecGet,
            DataFrame::Spec(_) => Kind::Spec,
            DataFrame::Result(_) => Kind::Result,
            DataFrame::ResultAck { .. } => Kind::ResultAck,
        }
    }
}

/// Checks a frame header; returns the kind and the body length that follows it.
pub fn decode_frame_header(h: &[u8]) -> Result<(Kind, usize), DataError> {
    if h.len() < FRAME_HEADER_LEN {
        return Err(DataError::Truncated);
    }
    if u16::from_be_bytes([h[0], h[1]]) != MAGIC {
        return Err(DataError::BadMagic);
    }
    if h[2] != VERSION {
        return Err(DataError::BadVersion(h[2]));
    }
    let kind = Kind::from_u8(h[3]).ok_or(DataError::UnknownKind(h[3]))?;
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    if len as usize > MAX_BODY_LEN {
        return Err(DataError::TooLong(len));
    }
    Ok((kind, len as usize))
}

/// Decodes one whole frame: `buf` is exactly the header and its body.
pub fn decode_frame(buf: &[u8]) -> Result<DataFrame<'_>, DataError> {
    let (kind, len) = decode_frame_header(buf)?;
    let body = &buf[FRAME_HEADER_LEN..];
    if body.len() < len {
        return Err(DataError::Truncated);
    }
    if body.len() > len {
        return Err(DataError::BadLength);
    }
    decode_body(kind, body)
}

/// Decodes a body of `kind` read after its header.
pub fn decode_body(kind: Kind, body: &[u8]) -> Result<DataFrame<'_>, DataError> {
    let mut r = Reader { buf: body };
    let frame = match kind {
        Kind::Put => {
            let owner = r.job()?;
            let name = r.name()?;
            let data = r.rest();
            if data.len() > MAX_OBJECT_LEN {
                return Err(DataError::BadLength);
            }
            DataFrame::Put { owner, name, data }
        }
        Kind::Get => DataFrame::Get { name: r.name()? },
        Kind::DeleteJob => DataFrame::DeleteJob { owner: r.job()? },
        Kind::Stored => DataFrame::Stored { size: r.u64()? },
        Kind::Object => DataFrame::Object { data: r.rest() },
        Kind::Deleted => DataFrame::Deleted { objects: r.u32()?, bytes: r.u64()? },
        Kind::Error => {
            let code = ErrorCode::from_u8(r.u8()?).ok_or(DataError::BadField)?;
            DataFrame::Error { code, message: r.text()? }
        }
        Kind::SpecGet => DataFrame::SpecGet { spec_id: r.u64()? },
        Kind::Spec => {
            let spec_id = r.u64()?;
            let handler = r.name()?;
            let output = r.name()?;
            let args_len = r.u32()? as usize;
            let args = r.take(args_len)?;
            let count = r.u16()? as usize;
            if count > MAX_INPUTS {
                return Err(DataError::BadField);
            }
            let start = r.buf;
            for _ in 0..count {
                r.object_ref()?;
            }
            let bytes = &start[..start.len() - r.buf.len()];
            DataFrame::Spec(Spec { spec_id, handler, args, output, inputs: Inputs { bytes, count } })
        }
        Kind::Result => {
            let spec_id = r.u64()?;
            let status = r.u8()?;
            let flags = r.u8()?;
            if status > STATUS_REFUSED || flags & !RESULT_HAS_OUTPUT != 0 {
                return Err(DataError::BadField);
            }
            let message = r.text()?;
            let output = if flags & RESULT_HAS_OUTPUT != 0 { Some(r.object_ref()?) } else { None };
            let inline_len = r.u32()? as usize;
            let inline = r.take(inline_len)?;
            let inline_ok = match output {
                Some(o) => inline.is_empty() || inline.len() as u64 == o.size,
                None => inline.is_empty(),
            };
            if inline.len() > MAX_INLINE_OUTPUT || !inline_ok {
                return Err(DataError::BadField);
            }
            DataFrame::Result(TaskResult { spec_id, status, message, output, inline })
        }
        Kind::ResultAck => DataFrame::ResultAck { spec_id: r.u64()? },
    };
    if !r.buf.is_empty() {
        return Err(DataError::BadLength);
    }
    Ok(frame)
}

#[derive(Clone)]
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DataError> {
        if self.buf.len() < n {
            return Err(DataError::BadLength);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.buf)
    }
    fn u8(&mut self) -> Result<u8, DataError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DataError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, DataError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, DataError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn job(&mut self) -> Result<JobRef, DataError> {
        let uid = self.u32()?;
        let jid = self.u32()?;
        Ok(JobRef::new(uid, jid))
    }
    fn name(&mut self) -> Result<&'a str, DataError> {
        let n = self.u8()? as usize;
        let b = self.take(n)?;
        let s = core::str::from_utf8(b).map_err(|_| DataError::BadName)?;
        if !valid_name(s) {
            return Err(DataError::BadName);
        }
        Ok(s)
    }
    fn text(&mut self) -> Result<&'a str, DataError> {
        let n = self.u16()? as usize;
        if n > MAX_MESSAGE_TEXT {
            return Err(DataError::BadText);
        }
        core::str::from_utf8(self.take(n)?).map_err(|_| DataError::BadText)
    }
    fn object_ref(&mut self) -> Result<ObjectRef<'a>, DataError> {
        let node = self.u16()?;
        let ip = self.take(4)?;
        let store_port = self.u16()?;
        let size = self.u64()?;
        let name = self.name()?;
        Ok(ObjectRef { name, size, node, store_ip: [ip[0], ip[1], ip[2], ip[3]], store_port })
    }
}

/// Writes a frame into `buf` field by field; the header's body_len is set by `finish`.
pub struct Writer<'b> {
    buf: &'b mut [u8],
    at: usize,
    overflow: bool,
}

impl<'b> Writer<'b> {
    fn new(buf: &'b mut [u8], kind: Kind) -> Writer<'b> {
        let mut w = Writer { buf, at: 0, overflow: false };
        w.put(&MAGIC.to_be_bytes());
        w.put(&[VERSION, kind as u8, 0, 0, 0, 0]);
        w
    }
    fn put(&mut self, b: &[u8]) {
        match self.buf.get_mut(self.at..self.at + b.len()) {
            Some(dst) => dst.copy_from_slice(b),
            None => self.overflow = true,
        }
        self.at += b.len();
    }
    fn job(&mut self, j: JobRef) {
        self.put(&j.uid);
        self.put(&j.jid);
    }
    fn name(&mut self, s: &str) -> Result<(), EncodeError> {
        if !valid_name(s) {
            return Err(EncodeError::InvalidData(DataError::BadName));
        }
        self.put(&[s.len() as u8]);
        self.put(s.as_bytes());
        Ok(())
    }
    fn text(&mut self, s: &str) -> Result<(), EncodeError> {
        if s.len() > MAX_MESSAGE_TEXT {
            return Err(EncodeError::InvalidData(DataError::BadText));
        }
        self.put(&(s.len() as u16).to_be_bytes());
        self.put(s.as_bytes());
        Ok(())
    }
    fn object_ref(&mut self, o: &ObjectRef<'_>) -> Result<(), EncodeError> {
        self.put(&o.node.to_be_bytes());
        self.put(&o.store_ip);
        self.put(&o.store_port.to_be_bytes());
        self.put(&o.size.to_be_bytes());
        self.name(o.name)
    }
    fn finish(self) -> Result<usize, EncodeError> {
        if self.overflow {
            return Err(EncodeError::BufferTooSmall { needed: self.at });
        }
        let body = self.at - FRAME_HEADER_LEN;
        if body > MAX_BODY_LEN {
            return Err(EncodeError::InvalidData(DataError::TooLong(body.min(u32::MAX as usize) as u32)));
        }
        self.buf[4..8].copy_from_slice(&(body as u32).to_be_bytes());
        Ok(self.at)
    }
}

impl DataFrame<'_> {
    /// The bytes [`DataFrame::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        let text = |s: &str| 2 + s.len();
        let name = |s: &str| 1 + s.len();
        FRAME_HEADER_LEN
            + match self {
                DataFrame::Put { name: n, data, .. } => 8 + name(n) + data.len(),
                DataFrame::Get { name: n } => name(n),
                DataFrame::DeleteJob { .. } => 8,
                DataFrame::Stored { .. } | DataFrame::SpecGet { .. } | DataFrame::ResultAck { .. } => 8,
                DataFrame::Object { data } => data.len(),
                DataFrame::Deleted { .. } => 12,
                DataFrame::Error { message, .. } => 1 + text(message),
                DataFrame::Spec(s) => {
                    let inputs: usize = s.inputs.iter().map(|o| o.encoded_len()).sum();
                    8 + name(s.handler) + name(s.output) + 4 + s.args.len() + 2 + inputs
                }
                DataFrame::Result(r) => {
                    8 + 2 + text(r.message) + r.output.map_or(0, |o| o.encoded_len()) + 4 + r.inline.len()
                }
            }
    }

    /// Writes the frame into `buf`; returns its length. Refuses what the decoder would
    /// refuse (bad names, long text, too many inputs, a body above [`MAX_BODY_LEN`]).
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(buf, self.kind());
        match *self {
            DataFrame::Put { owner, name, data } => {
                if data.len() > MAX_OBJECT_LEN {
                    return Err(EncodeError::InvalidData(DataError::BadLength));
                }
                w.job(owner);
                w.name(name)?;
                w.put(data);
            }
            DataFrame::Get { name } => w.name(name)?,
            DataFrame::DeleteJob { owner } => w.job(owner),
            DataFrame::Stored { size } => w.put(&size.to_be_bytes()),
            DataFrame::Object { data } => w.put(data),
            DataFrame::Deleted { objects, bytes } => {
                w.put(&objects.to_be_bytes());
                w.put(&bytes.to_be_bytes());
            }
            DataFrame::Error { code, message } => {
                w.put(&[code as u8]);
                w.text(message)?;
            }
            DataFrame::SpecGet { spec_id } | DataFrame::ResultAck { spec_id } => w.put(&spec_id.to_be_bytes()),
            DataFrame::Spec(s) => {
                return encode_spec(w.buf, s.spec_id, s.handler, s.args, s.output, s.inputs.iter());
            }
            DataFrame::Result(r) => {
                let inline_ok = match r.output {
                    Some(o) => r.inline.is_empty() || r.inline.len() as u64 == o.size,
                    None => r.inline.is_empty(),
                };
                if r.status > STATUS_REFUSED || r.inline.len() > MAX_INLINE_OUTPUT || !inline_ok {
                    return Err(EncodeError::InvalidData(DataError::BadField));
                }
                w.put(&r.spec_id.to_be_bytes());
                w.put(&[r.status, if r.output.is_some() { RESULT_HAS_OUTPUT } else { 0 }]);
                w.text(r.message)?;
                if let Some(o) = &r.output {
                    w.object_ref(o)?;
                }
                w.put(&(r.inline.len() as u32).to_be_bytes());
                w.put(r.inline);
            }
        }
        w.finish()
    }
}

/// Writes a SPEC frame from its parts (the inputs as any list of refs).
pub fn encode_spec<'r>(
    buf: &mut [u8],
    spec_id: u64,
    handler: &str,
    args: &[u8],
    output: &str,
    inputs: impl Iterator<Item = ObjectRef<'r>> + Clone,
) -> Result<usize, EncodeError> {
    let count = inputs.clone().count();
    if count > MAX_INPUTS {
        return Err(EncodeError::InvalidData(DataError::BadField));
    }
    let mut w = Writer::new(buf, Kind::Spec);
    w.put(&spec_id.to_be_bytes());
    w.name(handler)?;
    w.name(output)?;
    w.put(&(args.len() as u32).to_be_bytes());
    w.put(args);
    w.put(&(count as u16).to_be_bytes());
    for o in inputs {
        w.object_ref(&o)?;
    }
    w.finish()
}

/// The length of a SPEC frame built from these parts.
pub fn spec_len<'r>(handler: &str, args: &[u8], output: &str, inputs: impl Iterator<Item = ObjectRef<'r>>) -> usize {
    let refs: usize = inputs.map(|o| o.encoded_len()).sum();
    FRAME_HEADER_LEN + 8 + 1 + handler.len() + 1 + output.len() + 4 + args.len() + 2 + refs
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ObjectRef<'static> =
        ObjectRef { name: "job1/in-0", size: 3, node: 2, store_ip: [192, 0, 2, 7], store_port: 7180 };

    fn round_trip(f: DataFrame<'_>) {
        let mut buf = [0u8; 1024];
        let n = f.encode(&mut buf).unwrap();
        assert_eq!(n, f.encoded_len(), "{f:?}");
        assert_eq!(decode_frame(&buf[..n]).unwrap(), f);
    }

    #[test]
    fn every_kind_round_trips() {
        let mut spec_buf = [0u8; 256];
        let n = encode_spec(&mut spec_buf, 9, "stack", b"\x01\x02", "job1/out-9", [A, A].into_iter()).unwrap();
        let DataFrame::Spec(spec) = decode_frame(&spec_buf[..n]).unwrap() else { panic!("not a SPEC") };
        assert!(spec.inputs.iter().eq([A, A]));
        for f in [
            DataFrame::Put { owner: JobRef::new(1, 2), name: "a/b", data: b"xyz" },
            DataFrame::Get { name: "a/b" },
            DataFrame::DeleteJob { owner: JobRef::new(1, 2) },
            DataFrame::Stored { size: 3 },
            DataFrame::Object { data: b"" },
            DataFrame::Deleted { objects: 4, bytes: 99 },
            DataFrame::Error { code: ErrorCode::Full, message: "store full: 10 of 10 bytes used" },
            DataFrame::SpecGet { spec_id: u64::MAX },
            DataFrame::Spec(spec),
            DataFrame::Result(TaskResult { spec_id: 9, status: 0, message: "", output: Some(A), inline: b"abc" }),
            DataFrame::Result(TaskResult {
                spec_id: 9,
                status: 1,
                message: "input missing",
                output: None,
                inline: b"",
            }),
            DataFrame::ResultAck { spec_id: 9 },
        ] {
            round_trip(f);
        }
    }

    #[test]
    fn refuses_each_malformation() {
        let mut buf = [0u8; 64];
        let n = DataFrame::Get { name: "x" }.encode(&mut buf).unwrap();
        let frame = &buf[..n];
        assert_eq!(decode_frame(&frame[..5]), Err(DataError::Truncated));
        assert_eq!(decode_frame(&frame[..n - 1]), Err(DataError::Truncated));
        let mut long = [0u8; 64];
        long[..n].copy_from_slice(frame);
        assert_eq!(decode_frame(&long[..n + 1]), Err(DataError::BadLength));
        let bad = |at: usize, v: u8| {
            let mut b = [0u8; 64];
            b[..n].copy_from_slice(frame);
            b[at] = v;
            decode_frame(&b[..n]).map(|_| ())
        };
        assert_eq!(bad(0, 0), Err(DataError::BadMagic));
        assert_eq!(bad(2, 2), Err(DataError::BadVersion(2)));
        assert_eq!(bad(3, 99), Err(DataError::UnknownKind(99)));
        assert_eq!(bad(4, 0x7f), Err(DataError::TooLong(0x7f00_0002)));
        assert_eq!(bad(9, b' '), Err(DataError::BadName));
        assert_eq!(bad(8, 0), Err(DataError::BadName));
        assert_eq!(bad(8, 2), Err(DataError::BadLength));
        let n = DataFrame::Error { code: ErrorCode::Missing, message: "m" }.encode(&mut buf).unwrap();
        let mut e = buf;
        e[8] = 0;
        assert_eq!(decode_frame(&e[..n]), Err(DataError::BadField));
        e = buf;
        e[11] = 0xff;
        assert_eq!(decode_frame(&e[..n]), Err(DataError::BadText));
        let r = TaskResult { spec_id: 1, status: 3, message: "", output: None, inline: b"" };
        assert_eq!(DataFrame::Result(r).encode(&mut buf), Err(EncodeError::InvalidData(DataError::BadField)));
        // The encoders refuse what the decoder would.
        assert_eq!(DataFrame::Get { name: "a b" }.encode(&mut buf), Err(EncodeError::InvalidData(DataError::BadName)));
        assert_eq!(DataFrame::Get { name: "x" }.encode(&mut buf[..5]), Err(EncodeError::BufferTooSmall { needed: 10 }));
        let r = TaskResult { spec_id: 1, status: 0, message: "", output: None, inline: b"" };
        let n = DataFrame::Result(r).encode(&mut buf).unwrap();
        let mut e = buf;
        e[17] = 2;
        assert_eq!(decode_frame(&e[..n]), Err(DataError::BadField));
        for (i, name) in DataError::NAMES.iter().enumerate() {
            assert!(DataError::NAMES[..i].iter().all(|n| n != name));
        }
    }
}
