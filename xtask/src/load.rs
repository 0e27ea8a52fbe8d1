//! `cargo xtask load` and `cargo xtask unload`: what an operator runs on a worker host to
//! put the Bolt XDP program on an interface, or take it off with its tasks returned.
//! Both build `bolt` and run `bolt agent`, which owns the loader.

use std::process::Command;

use clap::Args;

use crate::run::{build_bolt, is_root, status};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Interface executors' GET_TASK arrives on.
    #[arg(long, value_name = "IF")]
    pub iface: String,
    /// Build and run the release binary.
    #[arg(long)]
    pub release: bool,
    /// Arguments for `bolt agent` (see `bolt agent --help`): at least --switch ADDR
    /// --node ID --resources BITS; e.g. --uplink IF --mode skb --ring-capacity N.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "AGENT ARGS")]
    pub agent_args: Vec<String>,
}

#[derive(Args, Debug)]
pub struct UnloadArgs {
    /// Interface the program was loaded for.
    #[arg(long, value_name = "IF")]
    pub iface: String,
    /// Build and run the release binary.
    #[arg(long)]
    pub release: bool,
    /// Arguments for `bolt agent --unload`, e.g. --pin-name NAME, or --switch ADDR to
    /// RETURN the tasks somewhere other than the configured switch.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "AGENT ARGS")]
    pub agent_args: Vec<String>,
}

/// Loads, configures, attaches and pins the program (`bolt agent --load-only`): it keeps
/// answering from its rings after this returns; run `bolt agent` to keep them filled.
pub fn load(args: &LoadArgs) -> anyhow::Result<()> {
    anyhow::ensure!(is_root(), "loading an XDP program needs root");
    let bolt = build_bolt(args.release)?;
    status(Command::new(bolt).args(["agent", "--iface", &args.iface]).args(&args.agent_args).arg("--load-only"))
}

/// RETURNs every task pinned for the interface to the switch, detaches the program and
/// removes its pins (`bolt agent --unload`).
pub fn unload(args: &UnloadArgs) -> anyhow::Result<()> {
    anyhow::ensure!(is_root(), "unloading an XDP program needs root");
    let bolt = build_bolt(args.release)?;
    status(Command::new(bolt).args(["agent", "--iface", &args.iface, "--unload"]).args(&args.agent_args))
}
