//! Bolt's front door: run your own functions on Bolt's executors and get their outputs
//! (or their errors) back.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use bolt::{Client, Executor};
//! let switch = "127.0.0.1:7171".parse()?;
//! let _executors = Executor::builder(switch)
//!     .executors(4)
//!     .handler("upper", |ctx| Ok::<_, String>(ctx.input.to_ascii_uppercase()))
//!     .spawn()?;
//! let client = Client::connect(switch).await?;
//! assert_eq!(client.submit("upper", "hello").await?, "HELLO");
//! # Ok(()) }
//! ```
//!
//! A task is a SPEC descriptor (handler id 4): the executor that pulls it fetches the
//! spec (handler name, input) from the client's spec server over TCP, runs the handler
//! and sends a RESULT back (docs/frontdoor.md). Inputs above [`INLINE_INPUT_MAX`] and
//! outputs above [`MAX_INLINE_OUTPUT`] go through the hosts' object stores.

mod client;
mod error;
mod executor;
mod frames;
mod store;

pub use bytes::Bytes;
pub use client::{Canceler, Client, ClientBuilder, JobStream, TaskFuture, INLINE_INPUT_MAX};
pub use error::TaskError;
pub use executor::{Executor, ExecutorBuilder, HandlerError, TaskContext};
pub use scheduler_common::data::MAX_INLINE_OUTPUT;
