//! Bolt's front door: run your own functions on Bolt's executors and get their outputs
//! (or their errors) back.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use bolt::{Client, Executor};
//! let switch = "127.0.0.1:7171".parse()?;
//! let store = "127.0.0.1:7180".parse()?; // this host's object store (`bolt store`)
//! let _executors = Executor::builder(switch)
//!     .executors(4)
//!     .handler("upper", |ctx| Ok::<_, String>(ctx.input.to_ascii_uppercase()))
//!     .spawn(store)?;
//! let client = Client::connect(switch).await?;
//! assert_eq!(client.submit("upper", "hello").await?, "HELLO");
//! # Ok(()) }
//! ```
//!
//! A task is a SPEC descriptor (handler id 4): the executor that pulls it fetches the
//! spec (handler name, input) from the client's spec server over TCP, runs the handler
//! and sends a RESULT back (docs/frontdoor.md). Outputs are written to the executor
//! host's object store and those up to [`MAX_INLINE_OUTPUT`] bytes travel inline too;
//! inputs above [`INLINE_INPUT_MAX`] go through the client host's store.

mod client;
mod error;
mod executor;

pub use bytes::Bytes;
pub use client::{Canceler, Client, ClientBuilder, JobStream, TaskFuture, INLINE_INPUT_MAX};
pub use error::TaskError;
pub use executor::{Executor, ExecutorBuilder, HandlerError, TaskContext};
pub use scheduler_common::data::MAX_INLINE_OUTPUT;
