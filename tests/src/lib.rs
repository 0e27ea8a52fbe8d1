//! Helpers shared by the integration tests.

use std::sync::atomic::{AtomicU32, Ordering};

pub mod schema;

/// True when running under CI (`CI=true`), where tests that need the kernel must run.
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}

/// Decides whether a test that needs `what` (root, CAP_BPF, a tool) can run. Outside CI it
/// prints why it is skipped and returns false; under CI it fails the test instead, so a
/// missing capability never passes silently.
pub fn require(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    assert!(!in_ci(), "CI=true but this test cannot run: {what}");
    eprintln!("skipped: {what}");
    false
}

/// True when the process runs as root (CAP_NET_ADMIN, CAP_BPF in practice).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// A name unique to this process and call, short enough for an interface name (15 bytes),
/// so that tests creating namespaces or links can run in parallel.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id() % 100_000;
    let name = format!("{prefix}{pid}x{n}");
    assert!(name.len() <= 15, "interface name {name} too long");
    name
}

/// A client on a thread of its own in network namespace `ns` that submits `tasks` noop
/// tasks of priority 1 to `switch` and waits for them until `deadline` from now. Each task
/// is sent once (its timeout is the whole deadline): a lost task shows as lost, never as
/// resubmitted. Returns whether the client ended idle, and its summary.
pub fn noop_client_in(
    ns: &str,
    switch: std::net::SocketAddr,
    tasks: usize,
    deadline: std::time::Duration,
) -> std::thread::JoinHandle<anyhow::Result<(bool, scheduler_user::client::Summary)>> {
    noop_client_of_priority_in(ns, switch, tasks, 1, deadline)
}

/// [`noop_client_in`] with tasks of priority `prio`.
pub fn noop_client_of_priority_in(
    ns: &str,
    switch: std::net::SocketAddr,
    tasks: usize,
    prio: u8,
    deadline: std::time::Duration,
) -> std::thread::JoinHandle<anyhow::Result<(bool, scheduler_user::client::Summary)>> {
    let spec = scheduler_user::client::TaskSpec::new(scheduler_common::descriptor::Handler::Noop, prio, 0)
        .expect("a valid task");
    client_in(ns, switch, vec![spec; tasks], deadline)
}

/// As [`noop_client_in`], for the tasks `specs`.
pub fn client_in(
    ns: &str,
    switch: std::net::SocketAddr,
    specs: Vec<scheduler_user::client::TaskSpec>,
    deadline: std::time::Duration,
) -> std::thread::JoinHandle<anyhow::Result<(bool, scheduler_user::client::Summary)>> {
    use scheduler_user::client::{Client, ClientConfig};
    let ns = ns.to_string();
    std::thread::spawn(move || {
        scheduler_user::netns::enter(&ns)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut cfg = ClientConfig::new(switch);
            cfg.tracker.task_timeout = deadline;
            cfg.tracker.max_attempts = 1;
            let mut client = Client::bind(cfg).await?;
            client.submit(&specs).await?;
            let idle = client.wait_idle(std::time::Instant::now() + deadline).await?;
            Ok((idle, client.summary()))
        })
    })
}

/// Root, iproute2 and a bpffs mount point: what the namespace testbed tests need.
pub fn netns_can_run() -> bool {
    require(
        is_root()
            && std::path::Path::new("/sys/fs/bpf").is_dir()
            && std::process::Command::new("ip").arg("-V").output().is_ok(),
        "root, iproute2 and /sys/fs/bpf for network namespaces and XDP",
    )
}

/// A software switch in `layout`'s switch namespace, admitting agents and executors as
/// `bolt testbed` configures it ([`Layout::access_rules`](scheduler_user::testbed::Layout::access_rules)).
pub fn switch_in(layout: &scheduler_user::testbed::Layout) -> scheduler_user::switch::SwitchHandle {
    use scheduler_user::switch::{spawn, SwitchConfig};
    let listen = std::net::SocketAddr::V4(layout.switch_socket());
    let access = layout.access_rules();
    scheduler_user::netns::run_in(&layout.switch_ns, move || {
        spawn(SwitchConfig { listen, access, ..SwitchConfig::default() })
    })
    .expect("switch")
}

pub mod cluster;
pub mod reorder;
