//! A Bolt cluster in network namespaces on one machine: a switch namespace, and per
//! worker node a host namespace (the agent and its XDP program) with an executor
//! namespace behind it.
//!
//! ```text
//!                    ┌──────────── <name>-sw ────────────┐
//!                    │ lo 10.77.0.1 (bolt switch, client) │
//!                    │ <name>s1 10.77.1.1  <name>s2 ...   │
//!                    └────┬───────────────────────────────┘
//!                         │ veth
//!   ┌─────────── <name>-h1 (worker host, node 1) ─────────┐
//!   │ <name>u1 10.77.1.2  uplink: REFILL arrives (XDP)    │   ip_forward = 1
//!   │ <name>x1 10.77.101.1  executor side: GET_TASK (XDP) │
//!   └────┬────────────────────────────────────────────────┘
//!        │ veth
//!   ┌─ <name>-e1 ─────────────┐
//!   │ <name>e1 10.77.101.2    │  executors: --switch 10.77.0.1
//!   └─────────────────────────┘
//! ```
//!
//! Executors send GET_TASK to the switch's address; the route to it crosses their worker
//! host, whose XDP program answers from the rings or passes the request on. Only
//! 10.77.0.0/16 is routed, and only between these namespaces: nothing leaves them.
//! Interface names carry the testbed name, so that pins under /sys/fs/bpf/bolt/ (one
//! directory per executor-side interface, shared by every namespace) never collide.

pub mod cli;
pub mod services;

use std::net::{Ipv4Addr, SocketAddrV4};

use serde::{Deserialize, Serialize};

pub use cli::{run_cli, TestbedArgs};
pub use services::ServicesConfig;

use crate::netns;

/// The address block every testbed uses inside its namespaces.
pub const SUBNET: &str = "10.77.0.0/16";
/// The switch's address (on the switch namespace's loopback).
pub const SWITCH_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Most worker nodes (their subnets are 10.77.1..=99.0/24 and 10.77.101..=199.0/24).
pub const MAX_WORKERS: u16 = 99;
/// Longest testbed name: it prefixes interface names, which are at most 15 bytes.
pub const MAX_NAME_LEN: usize = 10;

/// One worker node: its host namespace and the executor namespace behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerHost {
    /// Node id (1-based), as executors and the agent give it.
    pub node: u16,
    pub host_ns: String,
    pub exec_ns: String,
    /// In the host namespace: the link to the switch, where REFILL arrives.
    pub uplink: String,
    pub uplink_addr: Ipv4Addr,
    /// In the switch namespace: the other end of the uplink.
    pub switch_side: String,
    pub switch_side_addr: Ipv4Addr,
    /// In the host namespace: the link to the executors, where GET_TASK arrives; the XDP
    /// program's pins are named after it.
    pub exec_iface: String,
    /// The host's address on the executor side (a userspace-fallback agent listens here).
    pub exec_gateway: Ipv4Addr,
    /// In the executor namespace: its end of the link, and its address.
    pub exec_side: String,
    pub exec_addr: Ipv4Addr,
}

/// The names and addresses of a testbed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub name: String,
    pub switch_ns: String,
    pub switch_addr: Ipv4Addr,
    pub port: u16,
    pub workers: Vec<WorkerHost>,
}

impl Layout {
    /// The layout of testbed `name` with `workers` worker nodes.
    pub fn plan(name: &str, workers: u16) -> anyhow::Result<Layout> {
        anyhow::ensure!(
            !name.is_empty()
                && name.len() <= MAX_NAME_LEN
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && name.as_bytes()[0].is_ascii_lowercase(),
            "testbed name {name:?}: 1 to {MAX_NAME_LEN} of a-z and 0-9, starting with a letter"
        );
        anyhow::ensure!((1..=MAX_WORKERS).contains(&workers), "workers must be 1..={MAX_WORKERS}, not {workers}");
        let workers = (1..=workers)
            .map(|i| {
                let n = i as u8;
                WorkerHost {
                    node: i,
                    host_ns: format!("{name}-h{i}"),
                    exec_ns: format!("{name}-e{i}"),
                    uplink: format!("{name}u{i}"),
                    uplink_addr: Ipv4Addr::new(10, 77, n, 2),
                    switch_side: format!("{name}s{i}"),
                    switch_side_addr: Ipv4Addr::new(10, 77, n, 1),
                    exec_iface: format!("{name}x{i}"),
                    exec_gateway: Ipv4Addr::new(10, 77, 100 + n, 1),
                    exec_side: format!("{name}e{i}"),
                    exec_addr: Ipv4Addr::new(10, 77, 100 + n, 2),
                }
            })
            .collect();
        Ok(Layout {
            name: name.to_string(),
            switch_ns: format!("{name}-sw"),
            switch_addr: SWITCH_ADDR,
            port: scheduler_common::DEFAULT_PORT,
            workers,
        })
    }

    /// Where the switch listens.
    pub fn switch_socket(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.switch_addr, self.port)
    }

    /// Every namespace, switch first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.switch_ns.clone()];
        for w in &self.workers {
            v.push(w.host_ns.clone());
            v.push(w.exec_ns.clone());
        }
        v
    }
}

/// A testbed's namespaces and links, deleted when this is dropped (unless persisted).
pub struct Testbed {
    layout: Layout,
    owned: bool,
}

impl Testbed {
    /// Creates every namespace, link, address and route of `layout`. Fails if any of its
    /// namespaces exists already; on failure, removes what it created.
    pub fn create(layout: Layout) -> anyhow::Result<Testbed> {
        for ns in layout.namespaces() {
            anyhow::ensure!(
                !netns::exists(&ns),
                "network namespace {ns} exists already: testbed {} is up (take it down first)",
                layout.name
            );
        }
        let tb = Testbed { layout, owned: true };
        tb.build()?;
        Ok(tb)
    }

    fn build(&self) -> anyhow::Result<()> {
        let l = &self.layout;
        netns::create(&l.switch_ns)?;
        netns::ip(&["-n", &l.switch_ns, "addr", "add", &format!("{}/32", l.switch_addr), "dev", "lo"])?;
        for w in &l.workers {
            netns::create(&w.host_ns)?;
            netns::create(&w.exec_ns)?;
            // Switch ↔ host.
            veth(&l.switch_ns, &w.switch_side, w.switch_side_addr, &w.host_ns, &w.uplink, w.uplink_addr)?;
            // Host ↔ executors.
            veth(&w.host_ns, &w.exec_iface, w.exec_gateway, &w.exec_ns, &w.exec_side, w.exec_addr)?;
            let exec_net = format!("10.77.{}.0/24", w.exec_addr.octets()[2]);
            netns::ip(&["-n", &l.switch_ns, "route", "add", &exec_net, "via", &w.uplink_addr.to_string()])?;
            netns::ip(&["-n", &w.host_ns, "route", "add", SUBNET, "via", &w.switch_side_addr.to_string()])?;
            netns::ip(&["-n", &w.exec_ns, "route", "add", SUBNET, "via", &w.exec_gateway.to_string()])?;
            netns::sysctl(&w.host_ns, "net.ipv4.ip_forward", "1")?;
        }
        Ok(())
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Keeps the namespaces after this value is gone (`bolt testbed up`); returns the layout.
    pub fn persist(mut self) -> Layout {
        self.owned = false;
        self.layout.clone()
    }

    /// Deletes every namespace testbed `name` may have (whatever its worker count), and
    /// the pins its agents left. Missing pieces are not an error.
    pub fn destroy(name: &str) -> anyhow::Result<()> {
        let layout = Layout::plan(name, 1)?;
        let mut errors = Vec::new();
        for ns in existing_namespaces(name) {
            if let Err(e) = netns::delete(&ns) {
                errors.push(format!("{e:#}"));
            }
        }
        // The executor-side interfaces name the pin directories.
        let prefix = format!("{}x", layout.name);
        if let Ok(dirs) = std::fs::read_dir(scheduler_common::maps::PIN_ROOT) {
            for d in dirs.flatten() {
                let file_name = d.file_name();
                let Some(n) = file_name.to_str() else { continue };
                if n.strip_prefix(&prefix).is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())) {
                    match crate::xdp::PinDir::under(std::path::Path::new(scheduler_common::maps::PIN_ROOT), n) {
                        Ok(pins) => {
                            if let Err(e) = crate::xdp::BoltXdp::unload_pinned(&pins) {
                                errors.push(format!("{e:#}"));
                            }
                        }
                        Err(e) => errors.push(format!("{e:#}")),
                    }
                }
            }
        }
        anyhow::ensure!(errors.is_empty(), "taking testbed {name} down: {}", errors.join("; "));
        Ok(())
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = Testbed::destroy(&self.layout.name) {
                tracing::error!(error = format!("{e:#}"), "testbed teardown");
            }
        }
    }
}

/// The namespaces of testbed `name` that exist now.
pub fn existing_namespaces(name: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/run/netns") else { return Vec::new() };
    let mut found: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            let Some(rest) = n.strip_prefix(name).and_then(|r| r.strip_prefix('-')) else { return false };
            rest == "sw"
                || ["h", "e"].iter().any(|p| {
                    rest.strip_prefix(p).is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
        })
        .collect();
    found.sort();
    found
}

/// A veth pair between two namespaces, addressed /24 and up.
fn veth(ns_a: &str, a: &str, addr_a: Ipv4Addr, ns_b: &str, b: &str, addr_b: Ipv4Addr) -> anyhow::Result<()> {
    netns::ip(&["-n", ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b])?;
    netns::ip(&["-n", ns_a, "addr", "add", &format!("{addr_a}/24"), "dev", a])?;
    netns::ip(&["-n", ns_b, "addr", "add", &format!("{addr_b}/24"), "dev", b])?;
    netns::ip(&["-n", ns_a, "link", "set", a, "up"])?;
    netns::ip(&["-n", ns_b, "link", "set", b, "up"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_names_fit_and_addresses_stay_in_the_testbed_block() {
        let l = Layout::plan("boltdemo12", 99).unwrap();
        for w in &l.workers {
            for iface in [&w.uplink, &w.switch_side, &w.exec_iface, &w.exec_side] {
                assert!(iface.len() <= 15, "{iface}");
            }
            for a in [w.uplink_addr, w.switch_side_addr, w.exec_gateway, w.exec_addr] {
                assert_eq!(a.octets()[..2], [10, 77]);
            }
        }
        assert_eq!(l.workers[1].exec_addr, Ipv4Addr::new(10, 77, 102, 2));
        assert_eq!(l.namespaces().len(), 1 + 2 * 99);
        assert!(Layout::plan("Bad", 1).is_err());
        assert!(Layout::plan("waytoolongname", 1).is_err());
        assert!(Layout::plan("ok", 0).is_err());
        assert!(Layout::plan("ok", 100).is_err());
        assert!(Layout::plan("1ab", 1).is_err());
    }
}
