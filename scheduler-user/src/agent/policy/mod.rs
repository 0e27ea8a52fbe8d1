//! The agent's policies as plain state machines: time, counters and received messages go
//! in, actions come out. No sockets, clocks or BPF maps inside, so that unit tests (with
//! synthetic time), the agent (with real time and I/O) and a simulator run the same code.
//!
//! - [`prefetch`]: how deep the rings should be (Little's law on the measured drain rate
//!   and REFILL round trip);
//! - [`steal`]: MATRIX's adaptive work stealing between hosts, with a two-phase hand-over;
//! - [`lease`]: when a prefetched task goes back to tier 2;
//! - [`hint`]: giving back lower-priority prefetched tasks while tier 2 holds
//!   higher-priority work;
//! - [`recall`]: which prefetched tasks a RECALL may call back, and RECALLs that wait
//!   until some may.

pub mod hint;
pub mod lease;
pub mod prefetch;
pub mod recall;
pub mod steal;
