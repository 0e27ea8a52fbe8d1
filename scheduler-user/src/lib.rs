//! Bolt userspace: the software switch (tier 2), the executors, the client library and
//! the tools around them. The `bolt` binary in main.rs is a thin clap layer over this.
//!
//! Without the default `cli` feature the crate is the library alone: the client, the
//! executor, the software switch and the queue pipeline, without the XDP loader and
//! inspection (aya), the terminal dashboard (ratatui), the plots (plotters), the
//! benchmarks, the simulator and the testbed.

#[cfg(feature = "cli")]
pub mod agent;
#[cfg(feature = "cli")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
pub mod client;
pub mod clock;
pub mod executor;
#[cfg(feature = "cli")]
pub mod inspect;
pub mod metrics;
pub mod net;
pub mod netns;
pub mod output;
pub mod placement;
pub mod provision;
pub mod queue;
pub mod rlq;
#[cfg(feature = "cli")]
pub mod sim;
pub mod store;
pub mod switch;
pub mod telemetry;
#[cfg(feature = "cli")]
pub mod testbed;
#[cfg(feature = "cli")]
pub mod top;
#[cfg(feature = "cli")]
pub mod xdp;
