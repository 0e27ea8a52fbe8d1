//! Data-aware placement: MATRIX's Algorithm 1 and its four policies (MLB, MDL, RLDS,
//! FLDS), as state machines with no I/O and time passed in.
//!
//! The client decides, for each ready task, whether it is *shared* (SUBMIT to tier 2,
//! which any host may run or steal) or *pinned* to the host that holds its largest input
//! (PIN to that host's agent, into its dedicated ring, MATRIX's LReadyQ). MATRIX runs the
//! decision in the scheduler that holds the ready task; in Bolt the client holds it, so
//! Algorithm 1's two non-shared outcomes ("LReadyQ here" and "send to the data's
//! scheduler") are one: a PIN to the data's host.
//!
//! FLDS adds a monitor on each host ([`FldsMonitor`]) that moves the excess of the
//! dedicated ring to the host's shared rings when the ring's estimated run time exceeds
//! `tt` (see docs/data.md, "Placement").

mod algorithm;
mod flds;
mod task_length;

pub use algorithm::{
    largest, place, InputObject, Placement, PlacementPolicy, Threshold, DEFAULT_LINK_BYTES_PER_SEC,
    DEFAULT_RLDS_FRACTION,
};
pub use flds::{FldsMonitor, FldsMove, TT_TASK_LENGTHS};
pub use task_length::TaskLength;
