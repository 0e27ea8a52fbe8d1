//! Metrics for monitoring: the switch and the agent serve their counters over HTTP,
//! `/stats` as JSON and `/metrics` in Prometheus text format. Both come from one JSON
//! value, so a counter has the same name everywhere: the JSON field `switch.queue.swaps`
//! is the Prometheus metric `bolt_switch_queue_swaps`; arrays become labels (priority,
//! op, kind); an object named `counters` adds nothing to the name.

mod http;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub use http::{get, MetricsServer, StatsSource};

use crate::queue::stats::ORIGINS;

/// The cumulative probabilities quantile tables are given at (the simulator draws from
/// such tables: `sim::executors::Draw::Quantiles`).
pub const QUANTILE_POINTS: [f64; 14] =
    [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0];

/// Quantile `q` of a histogram, or 0 when it is empty.
pub fn quantile(h: &hdrhistogram::Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

/// `h`'s values at [`QUANTILE_POINTS`]; empty for an empty histogram.
pub fn quantile_table(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    QUANTILE_POINTS.iter().map(|&p| (p, if p == 0.0 { h.min() } else { quantile(h, p) })).collect()
}

/// The switch's metrics port unless told otherwise.
pub const SWITCH_PORT: u16 = 9171;
/// The agent's metrics port unless told otherwise.
pub const AGENT_PORT: u16 = 9172;
/// The port of `bolt submit --metrics` unless given.
pub const CLIENT_PORT: u16 = 9173;
/// Where `bolt agent` serves its metrics unless told otherwise, and where `bolt ring show`
/// and `bolt top` look for them.
pub const AGENT_DEFAULT: &str = "127.0.0.1:9172";

/// `HOST[:PORT]` (port defaulting to `port`), or "off".
pub fn parse_endpoint(s: &str, port: u16) -> anyhow::Result<Option<SocketAddr>> {
    if s == "off" {
        return Ok(None);
    }
    let with_port =
        if s.parse::<SocketAddr>().is_ok() || s.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
            s.to_string()
        } else {
            format!("{s}:{port}")
        };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("{s:?} is not HOST[:PORT] or off: {e}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{s:?} resolves to no address"))?;
    Ok(Some(addr))
}

/// Starts an endpoint at `addr` (None: none). An address the operator gave must work; a
/// default one that is taken (another process on this host has it) only gets a warning.
pub fn serve(addr: Option<SocketAddr>, is_default: bool, source: StatsSource) -> anyhow::Result<Option<MetricsServer>> {
    let Some(addr) = addr else { return Ok(None) };
    match MetricsServer::start(addr, "bolt", source) {
        Ok(server) => Ok(Some(server)),
        Err(e) if is_default => {
            tracing::warn!(error = %e, "no metrics endpoint (give --metrics ADDR to choose one)");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// GET `path` from a metrics endpoint and parse it as JSON.
pub fn get_json(addr: SocketAddr, path: &str, timeout: Duration) -> anyhow::Result<serde_json::Value> {
    let body = get(addr, path, timeout)?;
    serde_json::from_str(&body).map_err(|e| anyhow::anyhow!("{addr}{path} did not answer JSON: {e}"))
}

/// Fields whose value is a level rather than a running count.
const GAUGES: &[&str] = &[
    "queue_depth",
    "queued_by_resource",
    "queued_unconstrained",
    "capacity",
    "queued",
    "reserved",
    "ring_capacity",
    "unfinished",
    "elapsed_s",
    // The client's job queue (`jobs`): state levels and the scale-up level.
    "pending",
    "running",
    "pending_by_resource",
    "oldest_pending",
    "scale_up",
    "pending_growth_streak",
    "vector_bytes",
    "load_per_type",
    "mean_decide_us",
    "mean_update_us",
    "queued_rewards",
];

/// A level (gauge) rather than a running count: sizes, occupancy, percentiles, rates.
fn is_gauge(field: &str) -> bool {
    GAUGES.contains(&field) || field.starts_with("p50_") || field.starts_with("p99_") || field.ends_with("_per_s")
}

/// An object of this name groups counters without adding to their names: the agent's
/// `xdp.counters.hit_p1` is `bolt_xdp_hit_p1`, as `hit_p1` is in scheduler-common.
const TRANSPARENT: &str = "counters";

/// How the elements of an array field are told apart: the label name and the label of
/// element `i`.
fn array_label(field: &str, i: usize) -> (&'static str, String) {
    match field {
        "cost" => ("op", ORIGINS.get(i).map(|op| op_name(*op)).unwrap_or_else(|| i.to_string())),
        "malformed" => (
            "kind",
            scheduler_common::DecodeError::NAMES.get(i).map(|n| n.to_string()).unwrap_or_else(|| i.to_string()),
        ),
        "pending_by_resource" | "queued_by_resource" => ("resource", i.to_string()),
        "decisions_per_type" | "load_per_type" => ("type", i.to_string()),
        _ => ("priority", (i + 1).to_string()),
    }
}

fn op_name(op: scheduler_common::Op) -> String {
    op.name().to_lowercase()
}

/// One metric sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
    pub gauge: bool,
}

/// Every number in `value` as a sample named `prefix_` and its path; strings and booleans
/// are left out, arrays give labels.
pub fn flatten(prefix: &str, value: &serde_json::Value) -> Vec<Sample> {
    let mut out = Vec::new();
    walk(prefix, "", value, &mut Vec::new(), &mut out);
    out
}

fn walk(
    name: &str,
    field: &str,
    value: &serde_json::Value,
    labels: &mut Vec<(&'static str, String)>,
    out: &mut Vec<Sample>,
) {
    use serde_json::Value;
    match value {
        Value::Number(n) => out.push(Sample {
            name: name.to_string(),
            labels: labels.clone(),
            value: n.as_f64().unwrap_or(0.0),
            gauge: is_gauge(field),
        }),
        Value::Object(map) => {
            for (k, v) in map {
                let inner = if k == TRANSPARENT { name.to_string() } else { format!("{name}_{k}") };
                walk(&inner, k, v, labels, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                labels.push(array_label(field, i));
                walk(name, field, v, labels, out);
                labels.pop();
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// Prometheus text exposition format (version 0.0.4) of `samples`.
pub fn render_prometheus(samples: &[Sample]) -> String {
    let mut s = String::new();
    let mut last: Option<&str> = None;
    for sample in samples {
        if last != Some(sample.name.as_str()) {
            let kind = if sample.gauge { "gauge" } else { "counter" };
            s.push_str(&format!("# TYPE {} {kind}\n", sample.name));
            last = Some(&sample.name);
        }
        s.push_str(&sample.name);
        if !sample.labels.is_empty() {
            let labels: Vec<String> = sample.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            s.push_str(&format!("{{{}}}", labels.join(",")));
        }
        s.push_str(&format!(" {}\n", sample.value));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_become_metric_names_and_arrays_labels() {
        let v = serde_json::json!({
            "switch": { "queue": { "swaps": 3, "cost": [{"packets": 1}, {"packets": 2}] },
                        "queue_depth": [5, 0], "mode": "text" }
        });
        let text = render_prometheus(&flatten("bolt", &v));
        assert_eq!(
            text,
            "# TYPE bolt_switch_queue_cost_packets counter\n\
             bolt_switch_queue_cost_packets{op=\"submit\"} 1\nbolt_switch_queue_cost_packets{op=\"get_task\"} 2\n\
             # TYPE bolt_switch_queue_swaps counter\nbolt_switch_queue_swaps 3\n\
             # TYPE bolt_switch_queue_depth gauge\n\
             bolt_switch_queue_depth{priority=\"1\"} 5\nbolt_switch_queue_depth{priority=\"2\"} 0\n"
        );
    }

    #[test]
    fn counters_objects_add_no_name_and_percentiles_are_gauges() {
        let v = serde_json::json!({"xdp": {"counters": {"hit_p1": 2}}, "client": {"p99_sched_delay_us": 1.5}});
        let samples = flatten("bolt", &v);
        let names: Vec<(&str, bool)> = samples.iter().map(|s| (s.name.as_str(), s.gauge)).collect();
        assert_eq!(names, [("bolt_client_p99_sched_delay_us", true), ("bolt_xdp_hit_p1", false)]);
    }

    #[test]
    fn endpoints_take_a_default_port_or_off() {
        assert_eq!(parse_endpoint("127.0.0.1", 9171).unwrap(), Some("127.0.0.1:9171".parse().unwrap()));
        assert_eq!(parse_endpoint("127.0.0.1:80", 9171).unwrap(), Some("127.0.0.1:80".parse().unwrap()));
        assert_eq!(parse_endpoint("off", 9171).unwrap(), None);
        assert!(parse_endpoint("no such host name.invalid", 1).is_err());
    }
}
