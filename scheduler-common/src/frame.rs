//! Ethernet II / IPv4 / UDP framing of Bolt messages, for the pieces that see whole
//! frames: the XDP program (which answers GET_TASK in place), the P4 program's tests,
//! and tests that build frames to feed either. One implementation of the checksums and
//! of the reply rewrite, so that every tier agrees on the exact bytes.
//!
//! Bolt frames carry no VLAN tag, no IPv4 option and are never fragmented: the XDP and
//! P4 parsers read fixed offsets, and a frame outside that shape is refused.

use crate::error::EncodeError;
use crate::layout::{view, Wire};

pub const ETH_HLEN: usize = 14;
pub const IPV4_HLEN: usize = 20;
pub const UDP_HLEN: usize = 8;
/// Bytes in front of the Bolt message: Ethernet, IPv4 (no options), UDP.
pub const HEADERS_LEN: usize = ETH_HLEN + IPV4_HLEN + UDP_HLEN;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const IPPROTO_UDP: u8 = 17;
/// Version 4, header length 5 words: the only IPv4 first byte a Bolt frame has.
pub const IPV4_VERSION_IHL: u8 = 0x45;
/// IPv4 flags/fragment field with only Don't Fragment set, as frames built here carry.
pub const IPV4_FRAG_DF: u16 = 0x4000;
/// TTL of frames built here (what Linux sends by default).
pub const DEFAULT_TTL: u8 = 64;
/// The longest UDP payload an IPv4 total length can describe.
pub const MAX_UDP_PAYLOAD: usize = u16::MAX as usize - IPV4_HLEN - UDP_HLEN;

/// Field offsets from the start of the frame, for code that reads or rewrites in place.
pub mod offset {
    pub const ETH_DST: usize = 0;
    pub const ETH_SRC: usize = 6;
    pub const ETHERTYPE: usize = 12;
    pub const IP: usize = 14;
    pub const IP_TOTAL_LEN: usize = IP + 2;
    pub const IP_CHECKSUM: usize = IP + 10;
    pub const IP_SRC: usize = IP + 12;
    pub const IP_DST: usize = IP + 16;
    pub const UDP: usize = 34;
    pub const UDP_SRC_PORT: usize = UDP;
    pub const UDP_DST_PORT: usize = UDP + 2;
    pub const UDP_LEN: usize = UDP + 4;
    pub const UDP_CHECKSUM: usize = UDP + 6;
    /// Where the Bolt header starts.
    pub const PAYLOAD: usize = 42;
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthHdr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: [u8; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4Hdr {
    pub version_ihl: u8,
    pub tos: u8,
    pub total_len: [u8; 2],
    pub id: [u8; 2],
    /// Flags (3 bits) and fragment offset (13 bits).
    pub frag: [u8; 2],
    pub ttl: u8,
    pub proto: u8,
    pub checksum: [u8; 2],
    pub src: [u8; 4],
    pub dst: [u8; 4],
}

impl Ipv4Hdr {
    pub fn total_len(&self) -> u16 {
        u16::from_be_bytes(self.total_len)
    }
    pub fn id(&self) -> u16 {
        u16::from_be_bytes(self.id)
    }
    pub fn frag(&self) -> u16 {
        u16::from_be_bytes(self.frag)
    }
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes(self.checksum)
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpHdr {
    pub src_port: [u8; 2],
    pub dst_port: [u8; 2],
    pub len: [u8; 2],
    pub checksum: [u8; 2],
}

impl UdpHdr {
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes(self.src_port)
    }
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes(self.dst_port)
    }
    /// UDP header plus payload, in bytes.
    pub fn length(&self) -> u16 {
        u16::from_be_bytes(self.len)
    }
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes(self.checksum)
    }
}

const _: () = {
    assert!(core::mem::size_of::<EthHdr>() == ETH_HLEN);
    assert!(core::mem::size_of::<Ipv4Hdr>() == IPV4_HLEN);
    assert!(core::mem::size_of::<UdpHdr>() == UDP_HLEN);
    assert!(offset::PAYLOAD == HEADERS_LEN);
};

// SAFETY: repr(C), made only of bytes and byte arrays: alignment 1, no padding.
unsafe impl Wire for EthHdr {}
unsafe impl Wire for Ipv4Hdr {}
unsafe impl Wire for UdpHdr {}

/// Why a frame is not a Bolt-shaped Ethernet/IPv4/UDP frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than the headers, or than the IPv4 total length says.
    Truncated,
    /// Not IPv4 in Ethernet II (another ethertype, a VLAN tag, IP version not 4).
    NotIpv4,
    /// IPv4 header longer than 20 bytes.
    Ipv4Options,
    /// A fragment (More Fragments set or a non-zero offset).
    Fragment,
    /// IPv4 protocol other than UDP.
    NotUdp,
    /// IPv4 header checksum, or a non-zero UDP checksum, does not verify.
    BadChecksum,
    /// IPv4 total length below its headers, or UDP length not matching it.
    BadLength,
}

impl FrameError {
    /// Number of kinds, for counter arrays.
    pub const KINDS: usize = 7;
    /// Counter names, indexed by [`FrameError::index`].
    pub const NAMES: [&'static str; Self::KINDS] =
        ["truncated", "not_ipv4", "ipv4_options", "fragment", "not_udp", "bad_checksum", "bad_length"];

    pub const fn index(&self) -> usize {
        match self {
            FrameError::Truncated => 0,
            FrameError::NotIpv4 => 1,
            FrameError::Ipv4Options => 2,
            FrameError::Fragment => 3,
            FrameError::NotUdp => 4,
            FrameError::BadChecksum => 5,
            FrameError::BadLength => 6,
        }
    }

    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "frame refused: {}", self.name())
    }
}

impl core::error::Error for FrameError {}

/// Adds `data` as big-endian 16-bit words (a final odd byte is padded with zero) to a
/// running one's-complement sum, unfolded.
pub fn sum_words(data: &[u8], mut sum: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

/// Folds a running sum to 16 bits and complements it: the Internet checksum (RFC 1071).
pub fn fold_checksum(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The checksum an IPv4 header must carry (its own checksum field counted as zero).
pub fn ipv4_checksum(h: &Ipv4Hdr) -> u16 {
    let mut copy = *h;
    copy.checksum = [0; 2];
    fold_checksum(sum_words(crate::layout::as_bytes(&copy), 0))
}

/// The UDP checksum over the IPv4 pseudo-header and `udp` (UDP header with a zero
/// checksum field, then payload). A computed 0 is sent as 0xffff (RFC 768), because 0
/// on the wire means "no checksum".
pub fn udp_checksum(src: [u8; 4], dst: [u8; 4], udp: &[u8]) -> u16 {
    let mut sum = sum_words(&src, 0);
    sum = sum_words(&dst, sum);
    sum += IPPROTO_UDP as u32;
    sum += udp.len() as u32;
    match fold_checksum(sum_words(udp, sum)) {
        0 => 0xffff,
        c => c,
    }
}

/// Updates a checksum after one 16-bit word of the data changed from `old` to `new`
/// (RFC 1624, eqn. 3), as an in-place rewrite does without summing the header again.
pub fn checksum_update_u16(checksum: u16, old: u16, new: u16) -> u16 {
    let sum = (!checksum as u32) + (!old as u32) + new as u32;
    fold_checksum(sum)
}

/// One end of a UDP exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    pub port: u16,
}

/// A parsed Ethernet/IPv4/UDP frame, borrowing from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpFrame<'a> {
    pub eth: &'a EthHdr,
    pub ip: &'a Ipv4Hdr,
    pub udp: &'a UdpHdr,
    /// The UDP payload, as long as the IPv4 total length says (Ethernet padding cut).
    pub payload: &'a [u8],
}

impl UdpFrame<'_> {
    pub fn src(&self) -> Endpoint {
        Endpoint { mac: self.eth.src, ip: self.ip.src, port: self.udp.src_port() }
    }
    pub fn dst(&self) -> Endpoint {
        Endpoint { mac: self.eth.dst, ip: self.ip.dst, port: self.udp.dst_port() }
    }
}

/// Parses and checks a frame: Ethernet II, IPv4 without options and not fragmented,
/// UDP; both checksums verified (a zero UDP checksum means none was sent). Bytes after
/// the IPv4 total length (Ethernet minimum-size padding) are ignored.
pub fn parse_udp(frame: &[u8]) -> Result<UdpFrame<'_>, FrameError> {
    let eth: &EthHdr = view(frame).ok_or(FrameError::Truncated)?;
    if u16::from_be_bytes(eth.ethertype) != ETHERTYPE_IPV4 {
        return Err(FrameError::NotIpv4);
    }
    let ip: &Ipv4Hdr = view(&frame[ETH_HLEN..]).ok_or(FrameError::Truncated)?;
    if ip.version_ihl >> 4 != 4 {
        return Err(FrameError::NotIpv4);
    }
    if ip.version_ihl != IPV4_VERSION_IHL {
        return Err(FrameError::Ipv4Options);
    }
    // More Fragments (0x2000) or an offset: the reserved bit 0x8000 and DF are ignored.
    if ip.frag() & 0x3fff != 0 {
        return Err(FrameError::Fragment);
    }
    if ip.proto != IPPROTO_UDP {
        return Err(FrameError::NotUdp);
    }
    let total = ip.total_len() as usize;
    if total < IPV4_HLEN + UDP_HLEN {
        return Err(FrameError::BadLength);
    }
    if frame.len() < ETH_HLEN + total {
        return Err(FrameError::Truncated);
    }
    if fold_checksum(sum_words(&frame[offset::IP..offset::UDP], 0)) != 0 {
        return Err(FrameError::BadChecksum);
    }
    let udp: &UdpHdr = view(&frame[offset::UDP..]).ok_or(FrameError::Truncated)?;
    if udp.length() as usize != total - IPV4_HLEN {
        return Err(FrameError::BadLength);
    }
    let datagram = &frame[offset::UDP..ETH_HLEN + total];
    if udp.checksum() != 0 {
        let mut sum = sum_words(&ip.src, 0);
        sum = sum_words(&ip.dst, sum);
        sum += IPPROTO_UDP as u32 + datagram.len() as u32;
        if fold_checksum(sum_words(datagram, sum)) != 0 {
            return Err(FrameError::BadChecksum);
        }
    }
    Ok(UdpFrame { eth, ip, udp, payload: &datagram[UDP_HLEN..] })
}

/// The IPv4 fields a frame keeps from what it answers (or gets by default).
struct IpFields {
    tos: u8,
    id: u16,
    frag: u16,
    ttl: u8,
}

fn write_frame(
    buf: &mut [u8],
    src: Endpoint,
    dst: Endpoint,
    ipf: IpFields,
    payload: &[u8],
    with_udp_checksum: bool,
) -> Result<usize, EncodeError> {
    if payload.len() > MAX_UDP_PAYLOAD {
        return Err(EncodeError::PayloadTooLong(payload.len()));
    }
    let len = HEADERS_LEN + payload.len();
    if buf.len() < len {
        return Err(EncodeError::BufferTooSmall { needed: len });
    }
    let eth = EthHdr { dst: dst.mac, src: src.mac, ethertype: ETHERTYPE_IPV4.to_be_bytes() };
    let mut ip = Ipv4Hdr {
        version_ihl: IPV4_VERSION_IHL,
        tos: ipf.tos,
        total_len: ((IPV4_HLEN + UDP_HLEN + payload.len()) as u16).to_be_bytes(),
        id: ipf.id.to_be_bytes(),
        frag: ipf.frag.to_be_bytes(),
        ttl: ipf.ttl,
        proto: IPPROTO_UDP,
        checksum: [0; 2],
        src: src.ip,
        dst: dst.ip,
    };
    ip.checksum = ipv4_checksum(&ip).to_be_bytes();
    let udp = UdpHdr {
        src_port: src.port.to_be_bytes(),
        dst_port: dst.port.to_be_bytes(),
        len: ((UDP_HLEN + payload.len()) as u16).to_be_bytes(),
        checksum: [0; 2],
    };
    buf[..ETH_HLEN].copy_from_slice(crate::layout::as_bytes(&eth));
    buf[offset::IP..offset::UDP].copy_from_slice(crate::layout::as_bytes(&ip));
    buf[offset::UDP..offset::PAYLOAD].copy_from_slice(crate::layout::as_bytes(&udp));
    buf[offset::PAYLOAD..len].copy_from_slice(payload);
    if with_udp_checksum {
        let c = udp_checksum(src.ip, dst.ip, &buf[offset::UDP..len]);
        buf[offset::UDP_CHECKSUM..offset::PAYLOAD].copy_from_slice(&c.to_be_bytes());
    }
    Ok(len)
}

/// Builds a frame as a host's stack sends it: DF set, TTL 64, TOS 0, the given IPv4
/// id, and a UDP checksum. Returns the frame length (no Ethernet padding added).
pub fn build_udp(
    buf: &mut [u8],
    src: Endpoint,
    dst: Endpoint,
    ip_id: u16,
    payload: &[u8],
) -> Result<usize, EncodeError> {
    let ipf = IpFields { tos: 0, id: ip_id, frag: IPV4_FRAG_DF, ttl: DEFAULT_TTL };
    write_frame(buf, src, dst, ipf, payload, true)
}

/// Builds the answer to `request` carrying `payload`, exactly as the XDP program (and
/// the switch) rewrite a request in place before sending it back out of the port it
/// came in on: MAC addresses, IPv4 addresses and UDP ports swapped; TOS, id, flags and
/// TTL kept; IPv4 total length and checksum recomputed; UDP length set; UDP checksum
/// zero (optional over IPv4, and the rewrite would otherwise have to sum the payload).
pub fn build_reply(buf: &mut [u8], request: &UdpFrame<'_>, payload: &[u8]) -> Result<usize, EncodeError> {
    let ipf = IpFields { tos: request.ip.tos, id: request.ip.id(), frag: request.ip.frag(), ttl: request.ip.ttl };
    write_frame(buf, request.dst(), request.src(), ipf, payload, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Endpoint = Endpoint { mac: [2, 0, 0, 0, 0, 1], ip: [198, 51, 100, 20], port: 40000 };
    const B: Endpoint = Endpoint { mac: [2, 0, 0, 0, 0, 2], ip: [192, 0, 2, 1], port: 7171 };

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 section 3 example: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold_checksum(sum_words(&data, 0)), !0xddf2);
    }

    #[test]
    fn known_ipv4_header_checksum() {
        // A header captured from the wire (Wikipedia's IPv4 checksum example): b861.
        let bytes = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        let h: &Ipv4Hdr = view(&bytes).unwrap();
        assert_eq!(ipv4_checksum(h), 0xb861);
    }

    #[test]
    fn built_frame_parses_back() {
        let mut buf = [0u8; 128];
        let n = build_udp(&mut buf, A, B, 7, b"hello").unwrap();
        assert_eq!(n, HEADERS_LEN + 5);
        let f = parse_udp(&buf[..n]).unwrap();
        assert_eq!((f.src(), f.dst(), f.payload), (A, B, &b"hello"[..]));
        assert_ne!(f.udp.checksum(), 0);
        // Ethernet padding after the datagram is ignored.
        let g = parse_udp(&buf[..60]).unwrap();
        assert_eq!(g.payload, b"hello");
    }

    #[test]
    fn reply_swaps_and_fixes_lengths() {
        let mut req = [0u8; 128];
        let n = build_udp(&mut req, A, B, 0x1234, &[1; 16]).unwrap();
        let request = parse_udp(&req[..n]).unwrap();
        let mut out = [0u8; 128];
        let m = build_reply(&mut out, &request, &[9; 48]).unwrap();
        let reply = parse_udp(&out[..m]).unwrap();
        assert_eq!((reply.src(), reply.dst()), (B, A));
        assert_eq!(reply.ip.total_len() as usize, IPV4_HLEN + UDP_HLEN + 48);
        assert_eq!((reply.udp.length(), reply.udp.checksum()), (56, 0));
        assert_eq!((reply.ip.id(), reply.ip.ttl), (0x1234, DEFAULT_TTL));
    }

    #[test]
    fn incremental_update_matches_full_sum() {
        let mut buf = [0u8; 128];
        let n = build_udp(&mut buf, A, B, 1, &[0; 16]).unwrap();
        let f = parse_udp(&buf[..n]).unwrap();
        let mut ip = *f.ip;
        let old = ip.total_len();
        ip.total_len = (old + 32).to_be_bytes();
        assert_eq!(checksum_update_u16(f.ip.checksum(), old, old + 32), ipv4_checksum(&ip));
    }

    #[test]
    fn refuses_each_malformation() {
        let mut buf = [0u8; 128];
        let n = build_udp(&mut buf, A, B, 1, &[5; 8]).unwrap();
        let frame = &buf[..n];
        let bad = |at: usize, v: u8| {
            let mut b = [0u8; 128];
            b[..n].copy_from_slice(frame);
            b[at] = v;
            parse_udp(&b[..n]).map(|_| ())
        };
        assert_eq!(parse_udp(&frame[..HEADERS_LEN - 1]), Err(FrameError::Truncated));
        assert_eq!(parse_udp(&frame[..n - 1]), Err(FrameError::Truncated));
        assert_eq!(bad(offset::ETHERTYPE, 0x81), Err(FrameError::NotIpv4));
        assert_eq!(bad(offset::IP, 0x65), Err(FrameError::NotIpv4));
        assert_eq!(bad(offset::IP, 0x46), Err(FrameError::Ipv4Options));
        assert_eq!(bad(offset::IP + 6, 0x20), Err(FrameError::Fragment));
        assert_eq!(bad(offset::IP + 9, 6), Err(FrameError::NotUdp));
        assert_eq!(bad(offset::IP + 8, 63), Err(FrameError::BadChecksum));
        assert_eq!(bad(offset::PAYLOAD, 6), Err(FrameError::BadChecksum));
        assert_eq!(bad(offset::IP_TOTAL_LEN + 1, 27), Err(FrameError::BadLength));
        assert_eq!(bad(offset::UDP_LEN + 1, 15), Err(FrameError::BadLength));
    }
}
