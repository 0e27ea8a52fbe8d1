//! `cargo xtask`: the project's build, set-up and test tasks.
//!
//! Each task lives in its own module; adding one is a variant in [`Task`] and a match arm.

mod demo;
mod ebpf;
mod load;
mod p4;
mod python;
mod run;
mod setup;
mod test;
mod testbed;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Bolt's build, set-up and test tasks",
    long_about = "Bolt's build, set-up and test tasks.\n\n\
                  Run `cargo xtask setup` once on a fresh Debian 12 machine (as root), then \
                  `cargo xtask test` to build everything and run every test."
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run Bolt end to end on this machine with a short two-priority workload (a batch client
    /// whose jobs queue, an interactive client at a higher priority) and print what the
    /// clients measured: two-level on the namespace testbed with the XDP tier when it can
    /// (root), one-level on loopback otherwise. It says which mode it ran in.
    Demo(demo::DemoArgs),
    /// Install what building and testing need: Debian packages (rustc-web for the BPF
    /// target, LLVM 22, bpftool, ethtool, iproute2, redis-server, python3-venv),
    /// bpf-linker 0.13.0, and a mounted bpffs.
    /// Idempotent: only what is missing is installed.
    Setup(setup::SetupArgs),
    /// Build the XDP object (scheduler-ebpf) for bpfel-unknown-none.
    BuildEbpf(ebpf::BuildArgs),
    /// Set up, build everything including the XDP object, and run `cargo test --workspace`
    /// (kernel tests included: they need root).
    Test(test::TestArgs),
    /// The Tofino P4 program: check, build (needs $SDE), test (PTF) and deploy.
    P4(p4::P4Args),
    /// Load the Bolt XDP program on a worker host's interface and leave it attached
    /// (`bolt agent --load-only`).
    Load(load::LoadArgs),
    /// Return every task pinned for an interface to the switch and take the program off
    /// (`bolt agent --unload`).
    Unload(load::UnloadArgs),
    /// A Bolt cluster in network namespaces on this machine: up, down, show.
    Testbed(testbed::TestbedArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Demo(args) => demo::run(&args),
        Task::Setup(args) => setup::run(&args),
        Task::BuildEbpf(args) => ebpf::build(&args).map(|object| println!("{}", object.display())),
        Task::Test(args) => test::run(&args),
        Task::P4(args) => p4::run(args),
        Task::Load(args) => load::load(&args),
        Task::Unload(args) => load::unload(&args),
        Task::Testbed(args) => testbed::run(&args),
    }
}
