//! Tier 1 from userspace: loading the Bolt XDP program (built from scheduler-ebpf and
//! embedded in this library), attaching and pinning it, and working with its maps —
//! the per-priority task rings, the overflow queue, counters and events.
//!
//! Pinned layout, per interface: `/sys/fs/bpf/bolt/<iface>/` holds `prog`, `link` and one
//! file per map named as in [`scheduler_common::maps`]. A restarted agent opens them with
//! [`XdpMaps::open_pinned`] and finds every queued task where it was.

pub mod bench;
mod counters;
mod events;
pub mod frames;
mod loader;
mod mmap;
mod object;
mod pin;
pub mod ring_bench;
mod rings;
mod settings;
mod test_run;

pub use counters::CounterSnapshot;
pub use events::EventReader;
pub use loader::{AttachMode, BoltXdp};
pub use object::XDP_OBJECT;
pub use pin::{is_bpffs, PinDir};
pub use rings::{PushError, XdpMaps};
pub use settings::{XdpSettings, LOOPBACK_IFINDEX, TEST_RUN_UPLINK};
pub use test_run::{run_frame, FrameRun, Verdict};
