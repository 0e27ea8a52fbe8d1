//! Host link caps on the namespace testbed: a bounded TCP transfer between two hosts'
//! namespaces (through the switch namespace, over both hosts' uplinks) takes about as long
//! as the cap says, with tbf and with htb, and far longer than without a cap. Asserted
//! loosely: within a factor around the expected time, never as a speed goal.
//!
//! Needs root and iproute2 (namespaces, tc): skipped without, failed without under CI=true.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bolt_tests::{is_root, require, unique_name};
use scheduler_user::{
    netns,
    testbed::{cap_host_links, Layout, LinkCap, Shaper, Testbed},
};

/// Bytes each transfer moves.
const BYTES: usize = 4 << 20;
/// The cap: 4 MiB at 40 Mbit/s is about 0.84 s.
const CAP_BITS: u64 = 40_000_000;
const TIMEOUT: Duration = Duration::from_secs(20);

fn can_run() -> bool {
    require(
        is_root() && Path::new("/run").is_dir() && Command::new("tc").arg("-V").output().is_ok(),
        "root and iproute2 (ip, tc) for network namespaces and qdiscs",
    )
}

/// Moves BYTES from host 1 to host 2 over TCP; the time from connect to the receiver's
/// acknowledgement of the last byte.
fn transfer(layout: &Layout) -> Duration {
    let (h1, h2) = (&layout.workers[0], &layout.workers[1]);
    let to = SocketAddrV4::new(h2.uplink_addr, 7300);
    let listener = netns::run_in(&h2.host_ns, move || Ok(TcpListener::bind(to)?)).expect("listen in host 2");
    let receiver = std::thread::spawn(move || -> std::io::Result<usize> {
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(TIMEOUT))?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        // Bounded by the byte count and the read timeout.
        while got < BYTES {
            match s.read(&mut buf)? {
                0 => break,
                n => got += n,
            }
        }
        s.write_all(&[1])?;
        Ok(got)
    });
    let elapsed = netns::run_in(&h1.host_ns, move || {
        let start = Instant::now();
        let mut s = TcpStream::connect_timeout(&to.into(), TIMEOUT)?;
        s.set_write_timeout(Some(TIMEOUT))?;
        s.set_read_timeout(Some(TIMEOUT))?;
        s.write_all(&vec![7u8; BYTES])?;
        let mut ack = [0u8; 1];
        s.read_exact(&mut ack)?;
        Ok(start.elapsed())
    })
    .expect("send from host 1");
    assert_eq!(receiver.join().expect("receiver").expect("receive"), BYTES);
    elapsed
}

#[test]
fn capped_host_links_slow_a_transfer_to_the_cap() {
    if !can_run() {
        return;
    }
    let testbed = Testbed::create(Layout::plan(&unique_name("bw"), 2, 1).expect("layout")).expect("testbed");
    let layout = testbed.layout().clone();
    let uncapped = transfer(&layout);
    let expected = Duration::from_secs_f64((BYTES * 8) as f64 / CAP_BITS as f64);
    for shaper in [Shaper::Tbf, Shaper::Htb] {
        cap_host_links(&layout, LinkCap { bits_per_sec: CAP_BITS, shaper }).expect("cap the links");
        let capped = transfer(&layout);
        eprintln!("{shaper:?}: uncapped {uncapped:?}, capped {capped:?}, expected {expected:?}");
        assert!(
            capped >= expected.mul_f64(0.7) && capped <= expected.mul_f64(3.0),
            "{shaper:?} at {CAP_BITS} bit/s: {capped:?} for {BYTES} bytes, expected about {expected:?}"
        );
        assert!(capped >= uncapped * 4, "{shaper:?}: capped {capped:?} is not far slower than uncapped {uncapped:?}");
    }
}
