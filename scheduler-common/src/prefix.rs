//! IPv4 prefixes for the access rules of every tier: who may SUBMIT, which nodes may
//! GET_TASK, REFILL_REQ and RETURN at the switch, and which executor sources the XDP
//! program answers. One definition of "address inside prefix", so the software switch,
//! the XDP program and the P4 tables' control plane cannot disagree on it.

use core::fmt;

/// An IPv4 prefix `net/len`; `net` has no bits set beyond `len` (so equal prefixes are
/// equal values). `0.0.0.0/0` contains every address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Prefix {
    net: u32,
    len: u8,
}

/// Why a prefix did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// Not `a.b.c.d` or `a.b.c.d/n` with four decimal octets.
    BadAddress,
    /// A length above 32.
    BadLength,
    /// Bits set beyond the length (e.g. `10.0.0.1/24`): refused rather than guessed.
    HostBits,
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PrefixError::BadAddress => "not an IPv4 address or prefix (a.b.c.d or a.b.c.d/n)",
            PrefixError::BadLength => "prefix length above 32",
            PrefixError::HostBits => "address bits set beyond the prefix length",
        })
    }
}

/// The network mask of a prefix length (0..=32).
#[inline(always)]
pub const fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else if len >= 32 {
        u32::MAX
    } else {
        u32::MAX << (32 - len)
    }
}

/// Whether `addr` lies in `net/len` (both as big-endian wire bytes). A branch-free mask
/// compare: the XDP program runs it per GET_TASK.
#[inline(always)]
pub const fn contains(net: [u8; 4], len: u8, addr: [u8; 4]) -> bool {
    let m = mask(len);
    (u32::from_be_bytes(addr) & m) == (u32::from_be_bytes(net) & m)
}

impl Ipv4Prefix {
    /// Every address.
    pub const ANY: Ipv4Prefix = Ipv4Prefix { net: 0, len: 0 };

    /// `net/len`; bits beyond `len` must be zero.
    pub const fn new(net: [u8; 4], len: u8) -> Result<Ipv4Prefix, PrefixError> {
        if len > 32 {
            return Err(PrefixError::BadLength);
        }
        let n = u32::from_be_bytes(net);
        if n & !mask(len) != 0 {
            return Err(PrefixError::HostBits);
        }
        Ok(Ipv4Prefix { net: n, len })
    }

    /// The shortest prefix holding both `net/len` prefixes (the agent's default
    /// executor range over several executor-facing links).
    pub const fn covering(a: Ipv4Prefix, b: Ipv4Prefix) -> Ipv4Prefix {
        let mut len = if a.len < b.len { a.len } else { b.len };
        while len > 0 && (a.net & mask(len)) != (b.net & mask(len)) {
            len -= 1;
        }
        Ipv4Prefix { net: a.net & mask(len), len }
    }

    /// The prefix of length `len` that holds `addr` (host bits cleared).
    pub const fn of(addr: [u8; 4], len: u8) -> Ipv4Prefix {
        let len = if len > 32 { 32 } else { len };
        Ipv4Prefix { net: u32::from_be_bytes(addr) & mask(len), len }
    }

    pub const fn network(&self) -> [u8; 4] {
        self.net.to_be_bytes()
    }

    pub const fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True for `0.0.0.0/0`.
    pub const fn is_any(&self) -> bool {
        self.len == 0
    }

    pub const fn contains(&self, addr: [u8; 4]) -> bool {
        contains(self.network(), self.len, addr)
    }

    /// Parses `a.b.c.d/n`, or `a.b.c.d` as a single address (`/32`).
    pub fn parse(s: &str) -> Result<Ipv4Prefix, PrefixError> {
        let s = s.trim();
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => {
                let len: u8 = parse_decimal(l).ok_or(PrefixError::BadLength)?;
                (a, len)
            }
            None => (s, 32),
        };
        let mut octets = [0u8; 4];
        let mut parts = addr.split('.');
        for o in octets.iter_mut() {
            *o = parts.next().and_then(parse_decimal).ok_or(PrefixError::BadAddress)?;
        }
        if parts.next().is_some() {
            return Err(PrefixError::BadAddress);
        }
        Ipv4Prefix::new(octets, len)
    }
}

/// A decimal number of at most 3 digits that fits a u8 (no sign, no leading `+`).
fn parse_decimal(s: &str) -> Option<u8> {
    if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.bytes().try_fold(0u16, |n, b| Some(n * 10 + (b - b'0') as u16)).and_then(|n| u8::try_from(n).ok())
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.network();
        write!(f, "{a}.{b}.{c}.{d}/{}", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prefixes_and_single_addresses() {
        assert_eq!(Ipv4Prefix::parse("10.77.0.0/16"), Ipv4Prefix::new([10, 77, 0, 0], 16));
        assert_eq!(Ipv4Prefix::parse(" 192.0.2.7 ").unwrap().prefix_len(), 32);
        assert_eq!(Ipv4Prefix::parse("0.0.0.0/0"), Ok(Ipv4Prefix::ANY));
        assert_eq!(Ipv4Prefix::parse("10.0.0.1/24"), Err(PrefixError::HostBits));
        assert_eq!(Ipv4Prefix::parse("10.0.0.0/33"), Err(PrefixError::BadLength));
        for bad in ["", "10.0.0", "10.0.0.0.0", "10.0.0.256", "a.b.c.d", "10.0.0.0/", "10.0.0.0/-1", "1.2.3.+4"] {
            assert!(Ipv4Prefix::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn containment_is_a_mask_compare() {
        let p = Ipv4Prefix::parse("10.77.101.0/29").unwrap();
        assert!(p.contains([10, 77, 101, 2]) && p.contains([10, 77, 101, 7]));
        assert!(!p.contains([10, 77, 101, 8]) && !p.contains([10, 77, 102, 2]));
        assert!(Ipv4Prefix::ANY.contains([255, 1, 2, 3]));
        assert!(contains([1, 2, 3, 4], 32, [1, 2, 3, 4]) && !contains([1, 2, 3, 4], 32, [1, 2, 3, 5]));
    }

    #[test]
    fn covering_is_the_shortest_common_prefix() {
        let a = Ipv4Prefix::of([10, 77, 101, 1], 30);
        let b = Ipv4Prefix::of([10, 77, 101, 5], 30);
        assert_eq!(Ipv4Prefix::covering(a, b), Ipv4Prefix::parse("10.77.101.0/29").unwrap());
        assert_eq!(Ipv4Prefix::covering(a, a), a);
        assert_eq!(Ipv4Prefix::covering(a, Ipv4Prefix::of([192, 0, 2, 1], 24)), Ipv4Prefix::ANY);
    }
}
