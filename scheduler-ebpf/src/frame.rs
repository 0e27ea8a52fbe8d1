//! Parsing of Ethernet / IPv4 / UDP / Bolt header, with a bounds check before every read.
//! Offsets are fixed because IPv4 options and VLAN tags are never Bolt traffic here
//! (see the verdict rules in main.rs).

use aya_ebpf::programs::XdpContext;
// The header layouts are scheduler-common's, the same the userspace frame code uses.
pub use scheduler_common::frame::{EthHdr, Ipv4Hdr, UdpHdr};
use scheduler_common::{
    maps::{Counter, XdpConfig},
    Header, KNOWN_HEADER_FLAGS, MAGIC, VERSION,
};

pub const ETH_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
/// Where the IPv4 header starts.
pub const IP_OFF: usize = ETH_LEN;
/// Where the UDP header starts.
pub const UDP_OFF: usize = ETH_LEN + IPV4_LEN;
/// Where the Bolt message starts.
pub const BOLT_OFF: usize = UDP_OFF + UDP_LEN;

const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88A8;
const IPPROTO_UDP: u8 = 17;
/// More-fragments flag and fragment offset bits of the IPv4 flags/offset field.
const IP_FRAGMENT_BITS: u16 = 0x3FFF;

/// A pointer to a `T` at `off` bytes into the frame, if the frame holds all of it.
#[inline(always)]
pub fn at<T>(ctx: &XdpContext, off: usize) -> Option<*mut T> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + off + core::mem::size_of::<T>() > end {
        return None;
    }
    Some((start + off) as *mut T)
}

/// A UDP datagram to the Bolt port whose Bolt header is valid.
#[derive(Clone, Copy)]
pub struct BoltFrame {
    pub header: Header,
    /// UDP payload length: the whole Bolt message.
    pub message_len: usize,
    /// False for a datagram from the switch's Bolt port to another port of this host:
    /// an answer to an executor's socket, read only for its BEST stamp.
    pub to_bolt_port: bool,
}

impl BoltFrame {
    #[inline(always)]
    pub fn op(&self) -> u8 {
        self.header.op
    }
}

pub enum Classified {
    /// Not for this program; the counter says why.
    NotBolt(Counter),
    Bolt(BoltFrame),
}

#[inline(always)]
fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

#[inline(always)]
pub fn classify(ctx: &XdpContext, cfg: &XdpConfig) -> Classified {
    use Classified::NotBolt;
    let Some(eth) = at::<EthHdr>(ctx, 0) else {
        return NotBolt(Counter::Truncated);
    };
    // SAFETY (all reads below): `at` checked the frame holds the whole header.
    match be16(unsafe { (*eth).ethertype }) {
        ETH_P_IPV4 => {}
        ETH_P_IPV6 => return NotBolt(Counter::Ipv6),
        ETH_P_8021Q | ETH_P_8021AD => return NotBolt(Counter::Vlan),
        _ => return NotBolt(Counter::NotIpv4),
    }
    let Some(ip) = at::<Ipv4Hdr>(ctx, IP_OFF) else {
        return NotBolt(Counter::Truncated);
    };
    let ip = unsafe { &*ip };
    if ip.version_ihl >> 4 != 4 {
        return NotBolt(Counter::NotIpv4);
    }
    match ip.version_ihl & 0x0F {
        5 => {}
        ihl if ihl < 5 => return NotBolt(Counter::Truncated),
        _ => return NotBolt(Counter::IpOptions),
    }
    if be16(ip.frag) & IP_FRAGMENT_BITS != 0 {
        return NotBolt(Counter::IpFragment);
    }
    if ip.proto != IPPROTO_UDP {
        return NotBolt(Counter::NotUdp);
    }
    let Some(udp) = at::<UdpHdr>(ctx, UDP_OFF) else {
        return NotBolt(Counter::Truncated);
    };
    let udp = unsafe { &*udp };
    let to_bolt_port = be16(udp.dst_port) == cfg.port;
    // Tier 2's answers to executors leave the switch's Bolt port for the executor's own.
    if !to_bolt_port && (be16(udp.src_port) != cfg.port || ip.src != cfg.switch_ipv4 || cfg.switch_ipv4 == [0; 4]) {
        return NotBolt(Counter::OtherPort);
    }
    // From here on the datagram is addressed to Bolt: length faults are the sender's.
    let frame_len = ctx.data_end() - ctx.data();
    let ip_len = be16(ip.total_len) as usize;
    if ip_len < IPV4_LEN + UDP_LEN || IP_OFF + ip_len > frame_len {
        return NotBolt(Counter::Truncated);
    }
    let udp_len = be16(udp.len) as usize;
    if udp_len != ip_len - IPV4_LEN || udp_len < UDP_LEN + Header::LEN {
        return NotBolt(Counter::Malformed);
    }
    let Some(h) = at::<Header>(ctx, BOLT_OFF) else {
        return NotBolt(Counter::Truncated);
    };
    let header = unsafe { *h };
    if header.magic_u16() != MAGIC || header.version != VERSION || header.flags & !KNOWN_HEADER_FLAGS != 0 {
        return NotBolt(Counter::Malformed);
    }
    Classified::Bolt(BoltFrame { header, message_len: udp_len - UDP_LEN, to_bolt_port })
}
