//! Why a message was rejected. Each kind has a stable index and name so that every
//! component can keep one counter per kind and report them the same way.

use core::fmt;

/// A message that is not valid Bolt v1. Decoding never panics; it returns one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the header, or shorter than its op's fixed body.
    Truncated,
    /// Not 0xB017 in the first two bytes.
    BadMagic,
    /// A version this build does not speak.
    BadVersion(u8),
    /// An op code v1 does not define.
    UnknownOp(u8),
    /// SWAP or REPAIR: they exist only inside the switch pipeline.
    InternalOp(u8),
    /// A header or task flag bit v1 does not define.
    UnknownFlags(u8),
    /// The list count is outside what the op allows.
    BadCount(u8),
    /// The length does not equal the header, body and `count` list entries.
    BadLength { expected: u16, actual: u16 },
    /// A priority of 0 or above [`crate::MAX_PRIORITIES`].
    BadPriority(u8),
    /// A field outside its allowed values: a header byte the op does not use (prio,
    /// rsrc) or a pad byte that is not zero, a COMPLETE status above 2, a REFILL_REQ
    /// want of 0, a REPAIR target other than 0 or 1, a CLAIM verdict other than 0 or 3
    /// (RENEW), a CLAIM_REPLY verdict other than 1 or 2, a STEAL body field the op does not
    /// use that is not 0, a STEAL_REQ want outside 1..=16, a STEAL_DONE verdict other than
    /// 1 or 2, a GET_BUNDLE want outside 2..=16.
    BadField,
}

impl DecodeError {
    /// Number of kinds, for counter arrays.
    pub const KINDS: usize = 10;
    /// Counter names, indexed by [`DecodeError::index`].
    pub const NAMES: [&'static str; Self::KINDS] = [
        "truncated",
        "bad_magic",
        "bad_version",
        "unknown_op",
        "internal_op",
        "unknown_flags",
        "bad_count",
        "bad_length",
        "bad_priority",
        "bad_field",
    ];

    pub const fn index(&self) -> usize {
        match self {
            DecodeError::Truncated => 0,
            DecodeError::BadMagic => 1,
            DecodeError::BadVersion(_) => 2,
            DecodeError::UnknownOp(_) => 3,
            DecodeError::InternalOp(_) => 4,
            DecodeError::UnknownFlags(_) => 5,
            DecodeError::BadCount(_) => 6,
            DecodeError::BadLength { .. } => 7,
            DecodeError::BadPriority(_) => 8,
            DecodeError::BadField => 9,
        }
    }

    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "message truncated"),
            DecodeError::BadMagic => write!(f, "not a Bolt message (bad magic)"),
            DecodeError::BadVersion(v) => write!(f, "unsupported protocol version {v}"),
            DecodeError::UnknownOp(op) => write!(f, "unknown op {op}"),
            DecodeError::InternalOp(op) => write!(f, "op {op} is internal to the switch"),
            DecodeError::UnknownFlags(b) => write!(f, "unknown flag bits {b:#04x}"),
            DecodeError::BadCount(c) => write!(f, "list count {c} not allowed for this op"),
            DecodeError::BadLength { expected, actual } => {
                write!(f, "length {actual} where the header says {expected}")
            }
            DecodeError::BadPriority(p) => write!(f, "priority {p} out of range"),
            DecodeError::BadField => write!(f, "field value out of range"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// A message that cannot be encoded as asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is shorter than the message.
    BufferTooSmall { needed: usize },
    /// The list is empty where the op needs at least one entry, or longer than MAX_LIST.
    BadListLength(usize),
    /// The message would be refused by the decoder, for this reason.
    Invalid(DecodeError),
    /// A frame payload longer than an IPv4 total length can describe.
    PayloadTooLong(usize),
    /// A data frame (TCP) its decoder would refuse, for this reason.
    InvalidData(crate::data::DataError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::BufferTooSmall { needed } => {
                write!(f, "buffer too small: {needed} bytes needed")
            }
            EncodeError::BadListLength(n) => {
                write!(f, "list of {n} entries not allowed for this op")
            }
            EncodeError::Invalid(e) => write!(f, "message would be refused: {e}"),
            EncodeError::PayloadTooLong(n) => {
                write!(f, "payload of {n} bytes does not fit one IPv4 datagram")
            }
            EncodeError::InvalidData(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for EncodeError {}
