//! Link bandwidth caps: each host's uplink (switch ↔ host) shaped in both directions, so
//! that moving data costs what it costs on a real cluster's links and placement matters.
//! tbf (a token bucket) or htb (one class holding the rate) as the root qdisc on both
//! ends of the veth; netem's rate does not work on this kernel. XDP_TX replies leave
//! without passing the qdisc; everything sent by sockets (data, REFILL, SUBMIT) is shaped.

use std::process::{Command, Stdio};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::Layout;

/// Which qdisc shapes a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Shaper {
    /// Token bucket filter: the rate, a burst of one tick's worth, 50 ms of queue.
    Tbf,
    /// Hierarchical token bucket with one default class at the rate.
    Htb,
}

/// A cap for every host link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCap {
    pub bits_per_sec: u64,
    pub shaper: Shaper,
}

impl LinkCap {
    /// The bucket: 10 ms at the rate (what a 100 Hz timer can release at once), at least
    /// a 64 KiB GSO segment so that one segment never stalls the bucket.
    fn burst_bytes(&self) -> u64 {
        (self.bits_per_sec / 8 / 100).max(64 * 1024)
    }

    /// The `tc` argument lists that install this cap on `dev` (run in its namespace).
    pub fn tc_commands(&self, dev: &str) -> Vec<Vec<String>> {
        let rate = format!("{}bit", self.bits_per_sec);
        let burst = self.burst_bytes().to_string();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self.shaper {
            Shaper::Tbf => vec![s(&[
                "qdisc", "replace", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst, "latency", "50ms",
            ])],
            Shaper::Htb => vec![
                s(&["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"]),
                s(&[
                    "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate, "burst",
                    &burst,
                ]),
            ],
        }
    }
}

/// Runs `tc ARGS` inside namespace `ns`.
fn tc_in(ns: &str, args: &[String]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "tc"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running `tc` (install iproute2)")?;
    anyhow::ensure!(
        out.status.success(),
        "`tc {}` in {ns} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Caps every host link of `layout` at `cap`, both directions: the switch's side of each
/// uplink (traffic towards the host) and the host's uplink (traffic from it).
pub fn cap_host_links(layout: &Layout, cap: LinkCap) -> anyhow::Result<()> {
    anyhow::ensure!(cap.bits_per_sec >= 8_000, "a link cap below 8 kbit/s is not a link");
    for w in &layout.workers {
        for (ns, dev) in [(&layout.switch_ns, &w.switch_side), (&w.host_ns, &w.uplink)] {
            for args in cap.tc_commands(dev) {
                tc_in(ns, &args)?;
            }
        }
    }
    tracing::info!(bits_per_sec = cap.bits_per_sec, shaper = ?cap.shaper, hosts = layout.workers.len(), "host links capped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbf_and_htb_commands_carry_the_rate_and_a_bucket() {
        let tbf = LinkCap { bits_per_sec: 1_000_000_000, shaper: Shaper::Tbf };
        assert_eq!(
            tbf.tc_commands("u1"),
            [[
                "qdisc",
                "replace",
                "dev",
                "u1",
                "root",
                "tbf",
                "rate",
                "1000000000bit",
                "burst",
                "1250000",
                "latency",
                "50ms"
            ]]
        );
        let htb = LinkCap { bits_per_sec: 8_000_000, shaper: Shaper::Htb };
        let cmds = htb.tc_commands("s1");
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[1][cmds[1].len() - 4..], ["rate", "8000000bit", "burst", "65536"]);
    }
}
