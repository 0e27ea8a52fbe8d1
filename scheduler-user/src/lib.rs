//! Bolt userspace: the software switch (tier 2), the executors, the client library and
//! the tools around them. The `bolt` binary in main.rs is a thin clap layer over this.

pub mod agent;
pub mod bench;
pub mod cli;
pub mod client;
pub mod executor;
pub mod inspect;
pub mod metrics;
pub mod net;
pub mod netns;
pub mod queue;
pub mod rlq;
pub mod sim;
pub mod switch;
pub mod telemetry;
pub mod testbed;
pub mod top;
pub mod xdp;
