//! The 16-byte task descriptor: which registered handler an executor runs, and its
//! arguments. Executors run only handlers they know; `exec` names a command that must be
//! on the executor's allow-list; `spec` names a task spec the executor fetches from the
//! task's client (see [`crate::data`]).

/// Handler ids (descriptor byte 0).
pub const HANDLER_NOOP: u8 = 0;
pub const HANDLER_SLEEP: u8 = 1;
pub const HANDLER_SPIN: u8 = 2;
pub const HANDLER_EXEC: u8 = 3;
/// Version 3: the task's full spec (handler name, arguments, input objects) is fetched
/// from the client's spec server by id.
pub const HANDLER_SPEC: u8 = 4;

/// Longest command name an `exec` descriptor can carry.
pub const MAX_EXEC_NAME: usize = 14;

/// A decoded descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler<'a> {
    /// Return at once.
    Noop,
    /// Sleep this many microseconds.
    Sleep { micros: u32 },
    /// Burn CPU with integer arithmetic for this many microseconds.
    Spin { micros: u32 },
    /// Run the allow-listed command registered under this name.
    Exec { name: &'a [u8] },
    /// Fetch spec `spec_id` from the spec server at TCP port `port` of the ENTRY's
    /// client_ip, and run what it says.
    Spec { port: u16, spec_id: u64 },
}

/// Why a descriptor was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescriptorError {
    UnknownHandler(u8),
    /// Reserved bytes not zero, an exec name that is empty, too long or not printable, or
    /// a spec with port 0.
    Malformed,
}

impl DescriptorError {
    /// Number of kinds, for counter arrays.
    pub const KINDS: usize = 2;
    /// Counter names, indexed by [`DescriptorError::index`].
    pub const NAMES: [&'static str; Self::KINDS] = ["unknown_handler", "malformed"];

    pub const fn index(&self) -> usize {
        match self {
            DescriptorError::UnknownHandler(_) => 0,
            DescriptorError::Malformed => 1,
        }
    }

    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }
}

impl core::fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DescriptorError::UnknownHandler(h) => write!(f, "unknown handler id {h}"),
            DescriptorError::Malformed => write!(f, "malformed task descriptor"),
        }
    }
}

impl core::error::Error for DescriptorError {}

impl Handler<'_> {
    pub fn encode(&self) -> Result<[u8; 16], DescriptorError> {
        let mut d = [0u8; 16];
        match *self {
            Handler::Noop => d[0] = HANDLER_NOOP,
            Handler::Sleep { micros } | Handler::Spin { micros } => {
                d[0] = if matches!(self, Handler::Sleep { .. }) { HANDLER_SLEEP } else { HANDLER_SPIN };
                d[4..8].copy_from_slice(&micros.to_be_bytes());
            }
            Handler::Exec { name } => {
                if !valid_exec_name(name) {
                    return Err(DescriptorError::Malformed);
                }
                d[0] = HANDLER_EXEC;
                d[1] = name.len() as u8;
                d[2..2 + name.len()].copy_from_slice(name);
            }
            Handler::Spec { port, spec_id } => {
                if port == 0 {
                    return Err(DescriptorError::Malformed);
                }
                d[0] = HANDLER_SPEC;
                d[2..4].copy_from_slice(&port.to_be_bytes());
                d[8..16].copy_from_slice(&spec_id.to_be_bytes());
            }
        }
        Ok(d)
    }

    pub fn decode(d: &[u8; 16]) -> Result<Handler<'_>, DescriptorError> {
        let zero = |r: &[u8]| r.iter().all(|&b| b == 0);
        match d[0] {
            HANDLER_NOOP if zero(&d[1..]) => Ok(Handler::Noop),
            HANDLER_SLEEP | HANDLER_SPIN if zero(&d[1..4]) && zero(&d[8..]) => {
                let micros = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
                Ok(if d[0] == HANDLER_SLEEP { Handler::Sleep { micros } } else { Handler::Spin { micros } })
            }
            HANDLER_EXEC => {
                let len = d[1] as usize;
                if len == 0 || len > MAX_EXEC_NAME || !zero(&d[2 + len..]) {
                    return Err(DescriptorError::Malformed);
                }
                let name = &d[2..2 + len];
                if !valid_exec_name(name) {
                    return Err(DescriptorError::Malformed);
                }
                Ok(Handler::Exec { name })
            }
            HANDLER_SPEC if d[1] == 0 && zero(&d[4..8]) => {
                let port = u16::from_be_bytes([d[2], d[3]]);
                if port == 0 {
                    return Err(DescriptorError::Malformed);
                }
                let spec_id = u64::from_be_bytes([d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]]);
                Ok(Handler::Spec { port, spec_id })
            }
            HANDLER_NOOP | HANDLER_SLEEP | HANDLER_SPIN | HANDLER_SPEC => Err(DescriptorError::Malformed),
            other => Err(DescriptorError::UnknownHandler(other)),
        }
    }
}

/// Exec names are 1 to 14 bytes of `[A-Za-z0-9_.-]`.
pub fn valid_exec_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_EXEC_NAME
        && name.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for h in [
            Handler::Noop,
            Handler::Sleep { micros: 10_000 },
            Handler::Spin { micros: 7 },
            Handler::Exec { name: b"wc-l" },
            Handler::Spec { port: 7180, spec_id: u64::MAX - 1 },
        ] {
            let d = h.encode().unwrap();
            assert_eq!(Handler::decode(&d).unwrap(), h);
        }
    }

    #[test]
    fn refuses_malformed() {
        let mut d = [0u8; 16];
        d[0] = 9;
        assert_eq!(Handler::decode(&d), Err(DescriptorError::UnknownHandler(9)));
        d = [0; 16];
        d[15] = 1;
        assert_eq!(Handler::decode(&d), Err(DescriptorError::Malformed));
        d = [0; 16];
        d[0] = HANDLER_EXEC;
        d[1] = 15;
        assert_eq!(Handler::decode(&d), Err(DescriptorError::Malformed));
        assert_eq!(Handler::Exec { name: b"rm -rf" }.encode(), Err(DescriptorError::Malformed));
        assert_eq!(Handler::Spec { port: 0, spec_id: 1 }.encode(), Err(DescriptorError::Malformed));
        d = Handler::Spec { port: 9, spec_id: 1 }.encode().unwrap();
        d[5] = 1;
        assert_eq!(Handler::decode(&d), Err(DescriptorError::Malformed));
    }
}
