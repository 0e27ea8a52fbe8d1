//! A Bolt cluster in network namespaces on one machine: a switch namespace, and per
//! worker node a host namespace (the agent and its XDP program) with an executor
//! namespace behind it.
//!
//! ```text
//!                    ┌──────────── <name>-sw ────────────┐
//!                    │ lo 10.77.0.1 (bolt switch, client) │
//!                    │ <name>s1 10.77.1.1  <name>s2 ...   │   ip_forward = 1 (host ↔ host)
//!                    └────┬───────────────────────────────┘
//!                         │ veth
//!   ┌─────────── <name>-h1 (worker host, node 1) ──────────┐
//!   │ <name>u1 10.77.1.2  uplink: REFILL arrives (XDP)     │   ip_forward = 1
//!   │ <name>x1a 10.77.101.1/30  executor side: GET_TASK (XDP)
//!   │ <name>x1b 10.77.101.5/30  (one link per executor namespace)
//!   └────┬─────────────────────┬───────────────────────────┘
//!        │ veth                │ veth
//!   ┌─ <name>-e1a ──────────┐ ┌─ <name>-e1b ──────────┐
//!   │ <name>e1a 10.77.101.2 │ │ <name>e1b 10.77.101.6 │  executors: --switch 10.77.0.1
//!   └───────────────────────┘ └───────────────────────┘
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
use crate::switch::AccessRules;
use scheduler_common::Ipv4Prefix;

/// The address block every testbed uses inside its namespaces.
pub const SUBNET: &str = "10.77.0.0/16";
/// The switch's address (on the switch namespace's loopback).
pub const SWITCH_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Most worker nodes (their subnets are 10.77.1..=99.0/24 and 10.77.101..=199.0/24).
pub const MAX_WORKERS: u16 = 99;
/// Most executor namespaces behind one worker host (a /30 each in its /24; named a..h).
pub const MAX_EXECUTOR_LINKS: u8 = 8;
/// Longest testbed name: it prefixes interface names, which are at most 15 bytes.
pub const MAX_NAME_LEN: usize = 10;

/// One executor namespace and its link to the worker host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecLink {
    /// The namespace executors run in.
    pub ns: String,
    /// In the host namespace: this link's end, where GET_TASK arrives (XDP).
    pub host_iface: String,
    /// The host's address on this link (a userspace-fallback agent is reached here).
    pub gateway: Ipv4Addr,
    /// In the executor namespace: its end of the link, and its address.
    pub iface: String,
    pub addr: Ipv4Addr,
}

/// One worker node: its host namespace and the executor namespaces behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerHost {
    /// Node id (1-based), as executors and the agent give it.
    pub node: u16,
    pub host_ns: String,
    /// In the host namespace: the link to the switch, where REFILL arrives.
    pub uplink: String,
    pub uplink_addr: Ipv4Addr,
    /// In the switch namespace: the other end of the uplink.
    pub switch_side: String,
    pub switch_side_addr: Ipv4Addr,
    /// The executor namespaces (at least one), all served by this host's rings.
    pub executors: Vec<ExecLink>,
}

impl WorkerHost {
    /// Where this host's object store listens: its uplink address, the store port.
    pub fn store_addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.uplink_addr, scheduler_common::data::DEFAULT_STORE_PORT)
    }

    /// The directory name of this host's pins: its first executor-side interface.
    pub fn pin_name(&self) -> &str {
        &self.executors[0].host_iface
    }

    /// Where executors run by default: the first executor namespace.
    pub fn exec(&self) -> &ExecLink {
        &self.executors[0]
    }
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
    /// The layout of testbed `name` with `workers` worker nodes, each with
    /// `executor_links` executor namespaces behind it.
    pub fn plan(name: &str, workers: u16, executor_links: u8) -> anyhow::Result<Layout> {
        anyhow::ensure!(
            !name.is_empty()
                && name.len() <= MAX_NAME_LEN
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && name.as_bytes()[0].is_ascii_lowercase(),
            "testbed name {name:?}: 1 to {MAX_NAME_LEN} of a-z and 0-9, starting with a letter"
        );
        anyhow::ensure!((1..=MAX_WORKERS).contains(&workers), "workers must be 1..={MAX_WORKERS}, not {workers}");
        anyhow::ensure!(
            (1..=MAX_EXECUTOR_LINKS).contains(&executor_links),
            "executor namespaces per worker must be 1..={MAX_EXECUTOR_LINKS}, not {executor_links}"
        );
        let workers = (1..=workers)
            .map(|i| {
                let n = i as u8;
                let executors = (0..executor_links)
                    .map(|k| {
                        let tag = (b'a' + k) as char;
                        ExecLink {
                            ns: format!("{name}-e{i}{tag}"),
                            host_iface: format!("{name}x{i}{tag}"),
                            gateway: Ipv4Addr::new(10, 77, 100 + n, 4 * k + 1),
                            iface: format!("{name}e{i}{tag}"),
                            addr: Ipv4Addr::new(10, 77, 100 + n, 4 * k + 2),
                        }
                    })
                    .collect();
                WorkerHost {
                    node: i,
                    host_ns: format!("{name}-h{i}"),
                    uplink: format!("{name}u{i}"),
                    uplink_addr: Ipv4Addr::new(10, 77, n, 2),
                    switch_side: format!("{name}s{i}"),
                    switch_side_addr: Ipv4Addr::new(10, 77, n, 1),
                    executors,
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

    /// Who may talk to the switch: each worker host's uplink address is an agent
    /// (REFILL_REQ, RETURN); each worker's executor /24 holds its executors (GET_TASK),
    /// and the hosts may send GET_TASK too (an agent in userspace fallback forwards its
    /// executors' misses from its own address); clients from anywhere. An executor can
    /// neither RETURN nor ask for a host's batch.
    pub fn access_rules(&self) -> AccessRules {
        let hosts = self.workers.iter().map(|w| Ipv4Prefix::of(w.uplink_addr.octets(), 32));
        let executor_nets = self.workers.iter().map(|w| Ipv4Prefix::of(w.exec().addr.octets(), 24));
        AccessRules {
            clients: vec![Ipv4Prefix::ANY],
            agents: hosts.clone().collect(),
            executors: executor_nets.chain(hosts).collect(),
        }
    }

    /// [`Layout::access_rules`] as `bolt switch` arguments.
    pub fn switch_access_args(&self) -> Vec<String> {
        let list = |ps: &[Ipv4Prefix]| ps.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",");
        let rules = self.access_rules();
        vec!["--agents".into(), list(&rules.agents), "--executors".into(), list(&rules.executors)]
    }

    /// Every namespace, switch first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.switch_ns.clone()];
        for w in &self.workers {
            v.push(w.host_ns.clone());
            v.extend(w.executors.iter().map(|e| e.ns.clone()));
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
        // Hosts reach each other through the switch, as through a top-of-rack switch (the
        // agents' work stealing).
        netns::sysctl(&l.switch_ns, "net.ipv4.ip_forward", "1")?;
        for w in &l.workers {
            netns::create(&w.host_ns)?;
            // Switch ↔ host.
            veth(&l.switch_ns, &w.switch_side, w.switch_side_addr, 24, &w.host_ns, &w.uplink, w.uplink_addr)?;
            let exec_net = format!("10.77.{}.0/24", w.exec().addr.octets()[2]);
            netns::ip(&["-n", &l.switch_ns, "route", "add", &exec_net, "via", &w.uplink_addr.to_string()])?;
            netns::ip(&["-n", &w.host_ns, "route", "add", SUBNET, "via", &w.switch_side_addr.to_string()])?;
            netns::sysctl(&w.host_ns, "net.ipv4.ip_forward", "1")?;
            // Host ↔ each executor namespace.
            for e in &w.executors {
                netns::create(&e.ns)?;
                veth(&w.host_ns, &e.host_iface, e.gateway, 30, &e.ns, &e.iface, e.addr)?;
                netns::ip(&["-n", &e.ns, "route", "add", SUBNET, "via", &e.gateway.to_string()])?;
            }
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
        let layout = Layout::plan(name, 1, 1)?;
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
                if n.strip_prefix(&prefix).is_some_and(is_node_and_link) {
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
                || rest.strip_prefix('h').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                || rest.strip_prefix('e').is_some_and(is_node_and_link)
        })
        .collect();
    found.sort();
    found
}

/// `12a`: a node number and an executor-link letter, as in names of executor
/// namespaces and interfaces.
fn is_node_and_link(s: &str) -> bool {
    let Some(letter) = s.bytes().last() else { return false };
    let digits = &s[..s.len() - 1];
    (b'a'..b'a' + MAX_EXECUTOR_LINKS).contains(&letter)
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A veth pair between two namespaces, addressed with `prefix` bits and up.
fn veth(
    ns_a: &str,
    a: &str,
    addr_a: Ipv4Addr,
    prefix: u8,
    ns_b: &str,
    b: &str,
    addr_b: Ipv4Addr,
) -> anyhow::Result<()> {
    netns::ip(&["-n", ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b])?;
    netns::ip(&["-n", ns_a, "addr", "add", &format!("{addr_a}/{prefix}"), "dev", a])?;
    netns::ip(&["-n", ns_b, "addr", "add", &format!("{addr_b}/{prefix}"), "dev", b])?;
    netns::ip(&["-n", ns_a, "link", "set", a, "up"])?;
    netns::ip(&["-n", ns_b, "link", "set", b, "up"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_names_fit_and_addresses_stay_in_the_testbed_block() {
        let l = Layout::plan("boltdemo12", 99, 8).unwrap();
        for w in &l.workers {
            let mut ifaces = vec![&w.uplink, &w.switch_side];
            for e in &w.executors {
                ifaces.extend([&e.host_iface, &e.iface]);
                assert_eq!(e.addr.octets()[..3], e.gateway.octets()[..3]);
                assert_eq!(e.addr.octets()[3] & !3, e.gateway.octets()[3] & !3, "one /30 per link");
            }
            for iface in ifaces {
                assert!(iface.len() <= 15, "{iface}");
            }
            for a in [w.uplink_addr, w.switch_side_addr]
                .into_iter()
                .chain(w.executors.iter().flat_map(|e| [e.gateway, e.addr]))
            {
                assert_eq!(a.octets()[..2], [10, 77]);
            }
        }
        assert_eq!(l.workers[1].executors[1].addr, Ipv4Addr::new(10, 77, 102, 6));
        assert_eq!(l.workers[1].pin_name(), "boltdemo12x2a");
        assert_eq!(l.namespaces().len(), 1 + 99 * 9);
        assert!(Layout::plan("Bad", 1, 1).is_err());
        assert!(Layout::plan("waytoolongname", 1, 1).is_err());
        assert!(Layout::plan("ok", 0, 1).is_err());
        assert!(Layout::plan("ok", 100, 1).is_err());
        assert!(Layout::plan("ok", 1, 9).is_err());
        assert!(Layout::plan("1ab", 1, 1).is_err());
    }

    #[test]
    fn the_switch_takes_refills_and_returns_from_hosts_and_get_task_from_executors() {
        use scheduler_common::Op;
        let l = Layout::plan("acl", 2, 2).unwrap();
        let rules = l.access_rules();
        for w in &l.workers {
            let host = SocketAddrV4::new(w.uplink_addr, 7171);
            assert!(rules.admits(Op::RefillReq, host) && rules.admits(Op::Return, host));
            assert!(rules.admits(Op::GetTask, host), "a userspace agent forwards GET_TASK");
            for e in &w.executors {
                let exec = SocketAddrV4::new(e.addr, 40000);
                assert!(rules.admits(Op::GetTask, exec));
                assert!(!rules.admits(Op::Return, exec) && !rules.admits(Op::RefillReq, exec));
            }
        }
        assert_eq!(
            l.switch_access_args(),
            [
                "--agents",
                "10.77.1.2/32,10.77.2.2/32",
                "--executors",
                "10.77.101.0/24,10.77.102.0/24,10.77.1.2/32,10.77.2.2/32"
            ]
        );
    }

    #[test]
    fn names_of_a_testbed_are_told_from_another_testbeds() {
        assert!(is_node_and_link("12a"));
        assert!(is_node_and_link("1h"));
        assert!(!is_node_and_link("1i"));
        assert!(!is_node_and_link("a"));
        assert!(!is_node_and_link("1"));
        assert!(!is_node_and_link(""));
    }
}
