//! The XDP program attached for real (generic mode) to a veth between two network
//! namespaces this test creates: an executor's GET_TASK sent through its UDP socket comes
//! back as the ASSIGN, checked by the receiving kernel's IPv4/UDP stack; with the rings
//! empty the GET_TASK goes on to the node's stack instead.
//!
//! Needs root and `ip` (iproute2). No traffic leaves the two namespaces.

use std::{
    fs::File,
    net::{Ipv4Addr, SocketAddrV4, UdpSocket},
    os::fd::AsRawFd,
    process::Command,
    time::Duration,
};

use bolt_tests::{is_root, require, unique_name};
use scheduler_common::{decode, encode_get_task, Entry, Message, Requester, Task};
use scheduler_user::xdp::{AttachMode, BoltXdp, XdpSettings};

const PORT: u16 = 7171;
const NODE: u16 = 5;
const EXEC_ADDR: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
const NODE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);

fn ip(args: &[&str]) -> bool {
    Command::new("ip").args(args).status().map(|s| s.success()).unwrap_or(false)
}

/// Two namespaces joined by a veth pair; removed (with the pair) however the test ends.
struct Testbed {
    exec_ns: String,
    node_ns: String,
    node_if: String,
}

impl Testbed {
    fn create() -> Option<Testbed> {
        let exec_ns = unique_name("bte");
        let node_ns = unique_name("btn");
        let node_if = unique_name("bvn");
        let exec_if = unique_name("bve");
        let bed = Testbed { exec_ns, node_ns, node_if };
        let (e, n) = (bed.exec_ns.as_str(), bed.node_ns.as_str());
        let ok = ip(&["netns", "add", e])
            && ip(&["netns", "add", n])
            && ip(&["link", "add", &exec_if, "netns", e, "type", "veth", "peer", "name", &bed.node_if, "netns", n])
            && ip(&["-n", e, "addr", "add", &format!("{EXEC_ADDR}/24"), "dev", &exec_if])
            && ip(&["-n", n, "addr", "add", &format!("{NODE_ADDR}/24"), "dev", &bed.node_if])
            && ip(&["-n", e, "link", "set", &exec_if, "up"])
            && ip(&["-n", n, "link", "set", &bed.node_if, "up"])
            && ip(&["-n", e, "link", "set", "lo", "up"])
            && ip(&["-n", n, "link", "set", "lo", "up"]);
        ok.then_some(bed)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth, and so the pair.
        ip(&["netns", "del", &self.exec_ns]);
        ip(&["netns", "del", &self.node_ns]);
    }
}

/// Runs `f` on a new thread inside namespace `ns` (setns changes only that thread).
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(format!("/var/run/netns/{ns}")).expect("namespace file");
            // SAFETY: setns on a valid namespace fd, affecting only this thread.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("namespace thread")
    })
}

fn entry(tid: u32) -> Entry {
    let mut task = Task { prio: 1, rsrc: 0, class: 1, ..Task::default() };
    task.set_tid(tid);
    Entry::new(77, 88, task, [10, 201, 0, 9], 9100)
}

#[test]
fn get_task_through_a_real_veth_is_answered_by_xdp() {
    if !require(is_root(), "root for network namespaces and XDP") {
        return;
    }
    let Some(bed) = Testbed::create() else {
        assert!(!bolt_tests::in_ci(), "CI=true but the namespaces and veth could not be created");
        eprintln!("skipped: cannot create network namespaces with `ip`");
        return;
    };
    let settings = XdpSettings { port: PORT, node: NODE, ..XdpSettings::default() };
    // Load and attach inside the node's namespace; the link lives as long as `xdp`.
    let mut xdp = in_netns(&bed.node_ns, || {
        let mut xdp = BoltXdp::load(&settings).expect("load");
        xdp.attach(&bed.node_if, AttachMode::Skb).expect("attach in generic mode");
        xdp
    });
    let queued = entry(4242);
    xdp.maps_mut().push(&queued).unwrap();

    let replies = in_netns(&bed.exec_ns, || {
        let sock = UdpSocket::bind(SocketAddrV4::new(EXEC_ADDR, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut req = [0u8; 16];
        encode_get_task(&mut req, 1, 0xFF, Requester::new(NODE, 1, 1), false).unwrap();
        let mut got = Vec::new();
        // Two requests: the first is answered from the ring, the second finds it empty.
        for _ in 0..2 {
            sock.send_to(&req, SocketAddrV4::new(NODE_ADDR, PORT)).unwrap();
            let mut buf = [0u8; 1500];
            match sock.recv_from(&mut buf) {
                Ok((n, from)) => got.push((buf[..n].to_vec(), from)),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("recv: {e}"),
            }
        }
        got
    });
    assert_eq!(replies.len(), 1, "exactly the first GET_TASK is answered");
    let (bytes, from) = &replies[0];
    assert_eq!(*from, std::net::SocketAddr::V4(SocketAddrV4::new(NODE_ADDR, PORT)));
    match decode(bytes).expect("the ASSIGN decodes") {
        Message::Assign { entries, .. } => assert_eq!(entries, &[queued]),
        m => panic!("got {:?}", m.op()),
    }
    let c = xdp.maps().counters().unwrap();
    assert_eq!(c.hits(1), 1);
    assert_eq!(c.get(scheduler_common::maps::Counter::Miss), 1, "the second request went on to the stack");
    drop(xdp);
    drop(bed);
}
