//! `bolt jobs`: the job queue of a running `bolt submit`, read from its metrics endpoint
//! (`bolt submit --metrics ADDR` serves it as the `jobs` object of `/stats`): task counts
//! per state, Pending per resource bit, the oldest Pending task and the monitor's signals.

use std::time::Duration;

use clap::Args;

use super::job_queue::RESOURCE_BITS;

/// Arguments of `bolt jobs`.
#[derive(Args, Debug, Clone)]
pub struct JobsArgs {
    /// The metrics endpoint of the `bolt submit` to read (its --metrics), HOST[:PORT].
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub client: String,

    /// Print the JSON object as served instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `bolt jobs`.
pub fn run_jobs(args: JobsArgs) -> anyhow::Result<()> {
    let addr = crate::metrics::parse_endpoint(&args.client, crate::metrics::CLIENT_PORT)?
        .ok_or_else(|| anyhow::anyhow!("--client needs an address"))?;
    let stats = crate::metrics::get_json(addr, "/stats", Duration::from_secs(2))?;
    let jobs = stats
        .get("jobs")
        .filter(|j| !j.is_null())
        .ok_or_else(|| anyhow::anyhow!("{addr} serves no job queue (is it a `bolt submit --metrics`?)"))?;
    if args.json {
        println!("{jobs}");
    } else {
        print!("{}", render(jobs));
    }
    Ok(())
}

/// The readable form of a served `jobs` object.
fn render(jobs: &serde_json::Value) -> String {
    let n = |k: &str| jobs.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let mut out = format!(
        "pending {}  running {}  done {}  failed {}  canceled {}\n",
        n("pending"),
        n("running"),
        n("done"),
        n("failed"),
        n("canceled")
    );
    let per_resource: Vec<u64> = jobs
        .get("pending_by_resource")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().map(|v| v.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default();
    let listed: Vec<String> = per_resource
        .iter()
        .take(RESOURCE_BITS)
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(bit, c)| format!("bit {bit}: {c}"))
        .collect();
    out += &format!(
        "pending by resource: {}\n",
        if listed.is_empty() { "none needs a resource".to_string() } else { listed.join(", ") }
    );
    match jobs.get("oldest_pending").and_then(serde_json::Value::as_u64) {
        Some(tid) => out += &format!("oldest pending: task {tid}\n"),
        None => out += "oldest pending: none\n",
    }
    let monitor = &jobs["monitor"];
    let m = |k: &str| monitor.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    out += &format!(
        "failure alarms {}  scale-up signals {}  scale-up {}  vectors {} bytes\n",
        m("failed_surge_alarms"),
        m("scale_up_signals"),
        if m("scale_up") == 1 { "up" } else { "down" },
        n("vector_bytes")
    );
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use scheduler_common::descriptor::Handler;

    use super::*;
    use crate::client::{TaskSpec, Tracker, TrackerConfig};
    use crate::metrics::{MetricsServer, StatsSource};

    /// A tracker's report served the way `bolt submit --metrics` serves it, read back and
    /// rendered as `bolt jobs` prints it.
    #[test]
    fn shows_a_served_job_queue() {
        let mut t = Tracker::new(TrackerConfig::new(1));
        let specs: Vec<TaskSpec> =
            (0..6u8).map(|i| TaskSpec::new(Handler::Noop, 1, if i < 4 { 0b100 } else { 0 }).unwrap()).collect();
        t.add_job(&specs, Instant::now()).unwrap();
        let report = serde_json::to_value(t.jobs_report()).unwrap();
        let source: StatsSource = Arc::new(move || serde_json::json!({ "client": null, "jobs": report.clone() }));
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), "bolt", source).unwrap();
        let stats = crate::metrics::get_json(server.local_addr(), "/stats", Duration::from_secs(5)).unwrap();
        let text = render(&stats["jobs"]);
        assert!(text.starts_with("pending 6  running 0  done 0  failed 0  canceled 0\n"), "{text}");
        assert!(text.contains("pending by resource: bit 2: 4\n"), "{text}");
        assert!(text.contains("oldest pending: task 0\n"), "{text}");
        let prometheus = crate::metrics::get(server.local_addr(), "/metrics", Duration::from_secs(5)).unwrap();
        assert!(prometheus.contains("bolt_jobs_pending_by_resource{resource=\"2\"} 4\n"), "{prometheus}");
        assert!(prometheus.contains("# TYPE bolt_jobs_pending gauge\n"), "{prometheus}");
        assert!(prometheus.contains("bolt_jobs_monitor_failed_surge_alarms 0\n"), "{prometheus}");
    }
}
