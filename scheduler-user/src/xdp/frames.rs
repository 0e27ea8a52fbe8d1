//! Building Ethernet/IPv4/UDP frames around Bolt messages, for BPF_PROG_TEST_RUN (tests,
//! benchmarks) and for anything that injects raw frames. Written independently of the
//! XDP program's rewrite code, so tests can check one against the other.

use std::net::{Ipv4Addr, SocketAddrV4};

pub const ETH_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
/// Offset of the UDP payload in a frame built here.
pub const PAYLOAD_OFF: usize = ETH_LEN + IPV4_LEN + UDP_LEN;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const IPPROTO_UDP: u8 = 17;

/// The two ends of a UDP datagram on an Ethernet link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

impl Endpoints {
    /// The same two ends, seen from the other side.
    pub fn reversed(&self) -> Endpoints {
        Endpoints { src_mac: self.dst_mac, dst_mac: self.src_mac, src: self.dst, dst: self.src }
    }
}

/// IPv4 header fields a sender chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Fields {
    pub tos: u8,
    pub id: u16,
    /// Flags and fragment offset (0x4000 = don't fragment).
    pub frag: u16,
    pub ttl: u8,
}

impl Default for Ipv4Fields {
    fn default() -> Self {
        Ipv4Fields { tos: 0, id: 0x1234, frag: 0x4000, ttl: 64 }
    }
}

/// The Internet checksum of `bytes` (RFC 1071).
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame carrying `payload` in UDP over IPv4, UDP checksum zero.
pub fn udp_frame(ends: &Endpoints, ip: Ipv4Fields, payload: &[u8]) -> Vec<u8> {
    let ip_len = IPV4_LEN + UDP_LEN + payload.len();
    let mut f = Vec::with_capacity(ETH_LEN + ip_len);
    f.extend_from_slice(&ends.dst_mac);
    f.extend_from_slice(&ends.src_mac);
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip_start = f.len();
    f.push(0x45);
    f.push(ip.tos);
    f.extend_from_slice(&(ip_len as u16).to_be_bytes());
    f.extend_from_slice(&ip.id.to_be_bytes());
    f.extend_from_slice(&ip.frag.to_be_bytes());
    f.push(ip.ttl);
    f.push(IPPROTO_UDP);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&ends.src.ip().octets());
    f.extend_from_slice(&ends.dst.ip().octets());
    let sum = internet_checksum(&f[ip_start..ip_start + IPV4_LEN]);
    f[ip_start + 10..ip_start + 12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ends.src.port().to_be_bytes());
    f.extend_from_slice(&ends.dst.port().to_be_bytes());
    f.extend_from_slice(&((UDP_LEN + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Sets the IPv4 header checksum of an Ethernet/IPv4 frame after its header was edited.
pub fn fix_ipv4_checksum(frame: &mut [u8]) {
    let ihl = ((frame[ETH_LEN] & 0x0F) as usize) * 4;
    frame[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&[0, 0]);
    let sum = internet_checksum(&frame[ETH_LEN..ETH_LEN + ihl]);
    frame[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
}

/// Addresses used by tests and benchmarks: an executor talking to the switch through a
/// node. Documentation-range addresses, never sent anywhere.
pub fn sample_endpoints(port: u16) -> (Endpoints, Ipv4Addr) {
    let switch = Ipv4Addr::new(192, 0, 2, 1);
    let ends = Endpoints {
        src_mac: [0x02, 0, 0, 0, 0, 0x0e],
        dst_mac: [0x02, 0, 0, 0, 0, 0x01],
        src: SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 10), 40_000),
        dst: SocketAddrV4::new(switch, port),
    };
    (ends, switch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_a_known_header() {
        // The RFC 1071 style example header from Wikipedia's IPv4 article.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0,
            0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
    }

    #[test]
    fn frame_lengths_and_checksum_verify() {
        let (ends, _) = sample_endpoints(7171);
        let f = udp_frame(&ends, Ipv4Fields::default(), &[1, 2, 3]);
        assert_eq!(f.len(), PAYLOAD_OFF + 3);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 31);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 11);
        // A header with a correct checksum sums to zero.
        assert_eq!(internet_checksum(&f[ETH_LEN..ETH_LEN + IPV4_LEN]), 0);
    }
}
