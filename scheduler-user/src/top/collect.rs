//! Filling the [`TopModel`]: the pinned maps of this host's nodes, and the switch's
//! metrics endpoint (from inside its network namespace if asked).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use scheduler_common::maps::Counter;

use super::model::{ClientView, NodeView, SwitchView, TopModel};
use crate::inspect::{pinned_nodes, stats::hit_ratio};
use crate::metrics;
use crate::xdp::{CounterSnapshot, XdpMaps};

pub struct Collector {
    ifaces: Vec<String>,
    switch: Option<SocketAddr>,
    switch_netns: Option<String>,
    client: Option<SocketAddr>,
    last_switch: Option<(Instant, serde_json::Value)>,
    last_counters: HashMap<String, (Instant, CounterSnapshot)>,
}

impl Collector {
    /// `switch_netns`: the namespace the switch's and the client's endpoints are reached from.
    /// `ifaces`: the nodes to show (empty: every node pinned on this host).
    pub fn new(
        ifaces: Vec<String>,
        switch: Option<SocketAddr>,
        client: Option<SocketAddr>,
        switch_netns: Option<String>,
    ) -> Collector {
        Collector { ifaces, switch, switch_netns, client, last_switch: None, last_counters: HashMap::new() }
    }

    fn get_stats(&self, addr: SocketAddr) -> anyhow::Result<serde_json::Value> {
        let read = move || metrics::get_json(addr, "/stats", Duration::from_millis(500));
        match &self.switch_netns {
            Some(ns) => crate::netns::run_in(ns, read),
            None => read(),
        }
    }

    /// Reads everything once more and updates `model`; rates are over the time since the
    /// previous call.
    pub fn refresh(&mut self, model: &mut TopModel) {
        self.refresh_switch(model);
        self.refresh_client(model);
        model.nodes = self.read_nodes();
    }

    fn refresh_client(&mut self, model: &mut TopModel) {
        let Some(addr) = self.client else { return };
        let got = self.get_stats(addr).and_then(|v| {
            let c = v.get("client").filter(|c| c.is_object()).cloned();
            c.ok_or_else(|| anyhow::anyhow!("not a client's endpoint"))
        });
        match got {
            Ok(c) => {
                let f = |k: &str| c.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
                model.client = Some(ClientView {
                    endpoint: addr.to_string(),
                    p50_sched_delay_us: f("p50_sched_delay_us"),
                    p99_sched_delay_us: f("p99_sched_delay_us"),
                    completed: f("completed") as u64,
                    submitted: f("submitted") as u64,
                });
                model.client_error = None;
            }
            Err(e) => {
                model.client = None;
                model.client_error = Some(format!("{addr}: {e:#}"));
            }
        }
    }

    fn refresh_switch(&mut self, model: &mut TopModel) {
        let Some(addr) = self.switch else { return };
        let got = self.get_stats(addr);
        let now = Instant::now();
        let stats = match got.and_then(|v| v.get("switch").cloned().ok_or_else(|| anyhow::anyhow!("not a switch"))) {
            Ok(s) => s,
            Err(e) => {
                model.switch = None;
                model.switch_error = Some(format!("{addr}: {e:#}"));
                return;
            }
        };
        let get = |v: &serde_json::Value, p: &str| v.pointer(p).and_then(|x| x.as_u64()).unwrap_or(0);
        let rate = |p: &str| match &self.last_switch {
            Some((t, prev)) => get(&stats, p).saturating_sub(get(prev, p)) as f64 / (now - *t).as_secs_f64().max(1e-3),
            None => 0.0,
        };
        let view = SwitchView {
            endpoint: addr.to_string(),
            depth: stats
                .get("queue_depth")
                .and_then(|d| d.as_array())
                .map(|d| d.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default(),
            capacity: get(&stats, "/capacity"),
            decisions_per_s: rate("/queue/decisions"),
            received_per_s: rate("/received"),
            refill_tasks_per_s: rate("/queue/refill_tasks"),
            queue_full_tasks: get(&stats, "/queue/queue_full_tasks"),
        };
        if self.last_switch.is_some() {
            model.push_decisions(view.decisions_per_s);
        }
        model.switch = Some(view);
        model.switch_error = None;
        self.last_switch = Some((now, stats));
    }

    fn read_nodes(&mut self) -> Vec<NodeView> {
        let nodes = if self.ifaces.is_empty() {
            pinned_nodes(None).unwrap_or_default()
        } else {
            self.ifaces.iter().filter_map(|i| pinned_nodes(Some(i)).ok()).flatten().collect()
        };
        let mut views = Vec::new();
        for n in nodes {
            let Ok(maps) = XdpMaps::open_pinned(&n.dir) else { continue };
            let (Ok(cfg), Ok(counters)) = (maps.config(), maps.counters()) else { continue };
            let now = Instant::now();
            let (ratio, hits, misses) = match self.last_counters.get(&n.name) {
                Some((t, prev)) => {
                    let d = counters.since(prev);
                    let secs = (now - *t).as_secs_f64().max(1e-3);
                    (hit_ratio(&d), d.total_hits() as f64 / secs, d.get(Counter::Miss) as f64 / secs)
                }
                None => (None, 0.0, 0.0),
            };
            self.last_counters.insert(n.name.clone(), (now, counters));
            views.push(NodeView {
                pin_name: n.name,
                node: cfg.node,
                rings: (1..=cfg.levels).map(|p| (maps.reserved(p), maps.ring_capacity(p))).collect(),
                hit_ratio: ratio,
                hits_per_s: hits,
                misses_per_s: misses,
            });
        }
        views
    }
}
