//! The object store each worker host runs (`bolt object serve`): named objects with sizes, kept
//! in memory up to a bound, served over TCP (frames of `scheduler_common::data`).
//!
//! - **Who writes**: clients (`bolt object put`, [`client::put`]) put a job's input objects;
//!   executors put each task's output in their own host's store (`bolt object put`).
//! - **Who reads**: executors read a task's inputs from their host's store (local read) or
//!   from the owning host's store (remote fetch); clients read outputs (`bolt object get`).
//! - **Bounds**: at most `capacity` bytes of object data; a PUT that would exceed it is
//!   refused with FULL (nothing is evicted: an object may still be some task's input);
//!   one larger than `max_object` with TOO_LARGE. A PUT of an existing name replaces it.
//! - **Garbage collection**: every object belongs to the job (uid, jid) that put it.
//!   DELETE_JOB drops all of a job's objects; a DAG client sends it to every store that
//!   holds its job's objects once the job is final and its results are read.

pub mod client;
mod server;
pub mod wire;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use scheduler_common::data::{DataError, ErrorCode, ObjectRef, MAX_OBJECT_LEN};
use scheduler_common::JobRef;
use serde::Serialize;

pub use server::{run, spawn, StoreArgs, StoreConfig, StoreHandle};

/// `bolt object ...`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum ObjectCommand {
    /// Serve this worker host's object store over TCP until SIGINT or SIGTERM.
    Serve(StoreArgs),
    /// Put a file into a host's store as a named object.
    Put(client::PutArgs),
    /// Read a named object from a host's store.
    Get(client::GetArgs),
    /// Delete every object of a job from a host's store.
    Gc(client::GcArgs),
}

pub fn run_cli(command: ObjectCommand) -> anyhow::Result<()> {
    match command {
        ObjectCommand::Serve(args) => run(args),
        ObjectCommand::Put(args) => client::run_put(args),
        ObjectCommand::Get(args) => client::run_get(args),
        ObjectCommand::Gc(args) => client::run_gc(args),
    }
}

/// Where an object lives: what a task's input list holds, what placement reads (name,
/// size, node) and what an executor fetches from (store).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ObjectLocation {
    pub name: String,
    pub size: u64,
    /// Node id of the host that holds it.
    pub node: u16,
    /// That host's store.
    pub store: SocketAddrV4,
}

impl ObjectLocation {
    /// The wire form, borrowing the name.
    pub fn as_ref(&self) -> ObjectRef<'_> {
        ObjectRef {
            name: &self.name,
            size: self.size,
            node: self.node,
            store_ip: self.store.ip().octets(),
            store_port: self.store.port(),
        }
    }

    pub fn from_ref(r: &ObjectRef<'_>) -> ObjectLocation {
        ObjectLocation {
            name: r.name.to_owned(),
            size: r.size,
            node: r.node,
            store: SocketAddrV4::new(Ipv4Addr::from(r.store_ip), r.store_port),
        }
    }
}

/// One stored object.
struct Object {
    owner: (u32, u32),
    data: Arc<Vec<u8>>,
}

/// Why the store refused a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreRefusal {
    Missing { name: String },
    Full { needed: u64, used: u64, capacity: u64 },
    TooLarge { size: u64, max: u64 },
}

impl StoreRefusal {
    pub fn code(&self) -> ErrorCode {
        match self {
            StoreRefusal::Missing { .. } => ErrorCode::Missing,
            StoreRefusal::Full { .. } => ErrorCode::Full,
            StoreRefusal::TooLarge { .. } => ErrorCode::TooLarge,
        }
    }
}

impl std::fmt::Display for StoreRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreRefusal::Missing { name } => write!(f, "no object named {name}"),
            StoreRefusal::Full { needed, used, capacity } => {
                write!(f, "store full: {needed} bytes needed, {used} of {capacity} bytes in use")
            }
            StoreRefusal::TooLarge { size, max } => write!(f, "object of {size} bytes is larger than {max} bytes"),
        }
    }
}

/// The store's counters.
#[derive(Debug, Default)]
pub struct StoreCounters {
    pub puts: AtomicU64,
    pub gets: AtomicU64,
    pub misses: AtomicU64,
    pub refused_full: AtomicU64,
    pub refused_too_large: AtomicU64,
    pub jobs_deleted: AtomicU64,
    pub objects_deleted: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Connections refused because `max_connections` were open.
    pub connections_refused: AtomicU64,
    /// Malformed frames, one counter per kind (see [`DataError::NAMES`]).
    pub decode_errors: [AtomicU64; DataError::KINDS],
}

/// A copy of the counters and the store's occupancy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoreSnapshot {
    pub objects: u64,
    pub used_bytes: u64,
    pub capacity_bytes: u64,
    pub puts: u64,
    pub gets: u64,
    pub misses: u64,
    pub refused_full: u64,
    pub refused_too_large: u64,
    pub jobs_deleted: u64,
    pub objects_deleted: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub connections_refused: u64,
    pub decode_errors: u64,
    pub decode_errors_by_kind: Vec<(&'static str, u64)>,
}

/// The objects of one host, bounded in bytes.
pub struct ObjectStore {
    capacity: u64,
    max_object: u64,
    inner: Mutex<Inner>,
    pub counters: StoreCounters,
}

#[derive(Default)]
struct Inner {
    objects: HashMap<String, Object>,
    used: u64,
}

impl ObjectStore {
    /// A store of at most `capacity` bytes, objects of at most `max_object` bytes (capped
    /// at the protocol's largest object).
    pub fn new(capacity: u64, max_object: u64) -> ObjectStore {
        ObjectStore {
            capacity,
            max_object: max_object.min(MAX_OBJECT_LEN as u64),
            inner: Mutex::new(Inner::default()),
            counters: StoreCounters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `data` under `name` for job `owner`; replaces an object of the same name.
    pub fn put(&self, owner: JobRef, name: &str, data: &[u8]) -> Result<u64, StoreRefusal> {
        let size = data.len() as u64;
        if size > self.max_object {
            self.counters.refused_too_large.fetch_add(1, Ordering::Relaxed);
            return Err(StoreRefusal::TooLarge { size, max: self.max_object });
        }
        // Copied before taking the lock: other requests wait only for the bookkeeping.
        let object = Object { owner: (owner.uid(), owner.jid()), data: Arc::new(data.to_vec()) };
        let mut g = self.lock();
        let replaced = g.objects.get(name).map_or(0, |o| o.data.len() as u64);
        let used_after = g.used - replaced + size;
        if used_after > self.capacity {
            self.counters.refused_full.fetch_add(1, Ordering::Relaxed);
            return Err(StoreRefusal::Full { needed: size, used: g.used, capacity: self.capacity });
        }
        g.used = used_after;
        g.objects.insert(name.to_owned(), object);
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes_in.fetch_add(size, Ordering::Relaxed);
        Ok(size)
    }

    /// The object named `name`.
    pub fn get(&self, name: &str) -> Result<Arc<Vec<u8>>, StoreRefusal> {
        let found = self.lock().objects.get(name).map(|o| o.data.clone());
        match found {
            Some(d) => {
                self.counters.gets.fetch_add(1, Ordering::Relaxed);
                self.counters.bytes_out.fetch_add(d.len() as u64, Ordering::Relaxed);
                Ok(d)
            }
            None => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                Err(StoreRefusal::Missing { name: name.to_owned() })
            }
        }
    }

    /// Drops every object of job `owner`; returns how many and their bytes.
    pub fn delete_job(&self, owner: JobRef) -> (u32, u64) {
        let key = (owner.uid(), owner.jid());
        let mut g = self.lock();
        let mut objects = 0u32;
        let mut bytes = 0u64;
        g.objects.retain(|_, o| {
            let drop = o.owner == key;
            if drop {
                objects += 1;
                bytes += o.data.len() as u64;
            }
            !drop
        });
        g.used -= bytes;
        self.counters.jobs_deleted.fetch_add(1, Ordering::Relaxed);
        self.counters.objects_deleted.fetch_add(objects as u64, Ordering::Relaxed);
        (objects, bytes)
    }

    pub fn snapshot(&self) -> StoreSnapshot {
        let (objects, used) = {
            let g = self.lock();
            (g.objects.len() as u64, g.used)
        };
        let c = &self.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let by_kind: Vec<(&'static str, u64)> = c
            .decode_errors
            .iter()
            .enumerate()
            .filter(|(_, a)| r(a) > 0)
            .map(|(i, a)| (DataError::NAMES[i], r(a)))
            .collect();
        StoreSnapshot {
            objects,
            used_bytes: used,
            capacity_bytes: self.capacity,
            puts: r(&c.puts),
            gets: r(&c.gets),
            misses: r(&c.misses),
            refused_full: r(&c.refused_full),
            refused_too_large: r(&c.refused_too_large),
            jobs_deleted: r(&c.jobs_deleted),
            objects_deleted: r(&c.objects_deleted),
            bytes_in: r(&c.bytes_in),
            bytes_out: r(&c.bytes_out),
            connections_refused: r(&c.connections_refused),
            decode_errors: by_kind.iter().map(|(_, n)| n).sum(),
            decode_errors_by_kind: by_kind,
        }
    }
}

#[cfg(test)]
mod tests;
