//! The Bolt wire protocol (v1) and the map value types shared by the XDP program, the
//! P4 program's tests and userspace. This crate is the one definition of every byte
//! layout: nothing else in the project parses Bolt packets.
//!
//! Every layout type is `#[repr(C)]` with alignment 1 (fields are byte arrays holding
//! big-endian integers), so a frame's bytes can be viewed as these types in place, in
//! the XDP program as well as in userspace, and a BPF map can store them as they travel.
#![no_std]

pub mod data;
pub mod descriptor;
pub mod error;
pub mod frame;
pub mod layout;
pub mod lockfree;
pub mod maps;
pub mod message;
pub mod prefix;

pub use error::{DecodeError, EncodeError};
pub use layout::*;
pub use message::*;
pub use prefix::Ipv4Prefix;
