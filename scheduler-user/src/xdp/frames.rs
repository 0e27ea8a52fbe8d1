//! Ethernet/IPv4/UDP frames around Bolt messages for BPF_PROG_TEST_RUN (tests,
//! benchmarks) and for anything that injects raw frames. The bytes come from
//! scheduler-common's frame writer, which the XDP program's in-place rewrite is tested
//! against; this module only adapts socket addresses and allows hostile IPv4 fields.

use std::net::{Ipv4Addr, SocketAddrV4};

use scheduler_common::frame::{self, Endpoint, IpFields};

pub use scheduler_common::frame::{ETH_HLEN as ETH_LEN, IPV4_HLEN as IPV4_LEN, UDP_HLEN as UDP_LEN};
/// Offset of the UDP payload in a frame built here.
pub const PAYLOAD_OFF: usize = frame::offset::PAYLOAD;

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

/// IPv4 header fields a sender chooses; `Default` is what a host stack sends.
pub type Ipv4Fields = IpFields;

fn endpoint(mac: [u8; 6], addr: SocketAddrV4) -> Endpoint {
    Endpoint { mac, ip: addr.ip().octets(), port: addr.port() }
}

/// An Ethernet frame carrying `payload` in UDP over IPv4, UDP checksum zero.
pub fn udp_frame(ends: &Endpoints, ip: Ipv4Fields, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; frame::HEADERS_LEN + payload.len()];
    let src = endpoint(ends.src_mac, ends.src);
    let dst = endpoint(ends.dst_mac, ends.dst);
    let n = frame::write_frame(&mut f, src, dst, ip, payload, false)
        .expect("buffer sized for the frame; test payloads are below the UDP limit");
    f.truncate(n);
    f
}

/// Sets the IPv4 header checksum of an Ethernet/IPv4 frame after its header was edited.
pub fn fix_ipv4_checksum(f: &mut [u8]) {
    let ihl = ((f[ETH_LEN] & 0x0F) as usize) * 4;
    f[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&[0, 0]);
    let sum = frame::fold_checksum(frame::sum_words(&f[ETH_LEN..ETH_LEN + ihl], 0));
    f[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
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
    fn frame_lengths_and_checksum_verify() {
        let (ends, _) = sample_endpoints(7171);
        let f = udp_frame(&ends, Ipv4Fields::default(), &[1, 2, 3]);
        assert_eq!(f.len(), PAYLOAD_OFF + 3);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 31);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 11);
        // A header with a correct checksum sums to zero.
        assert_eq!(frame::fold_checksum(frame::sum_words(&f[ETH_LEN..ETH_LEN + IPV4_LEN], 0)), 0);
        assert!(frame::parse_udp(&f).is_ok());
    }
}
