//! `bolt testbed up|down|show`: the namespace testbed with its switch and agents running
//! in the background (what `cargo xtask testbed` runs).

use clap::{Args, Subcommand};

use super::{existing_namespaces, services, Layout, ServicesConfig, Testbed};

/// Arguments of `bolt testbed`.
#[derive(Args, Debug)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub action: TestbedAction,
}

#[derive(Subcommand, Debug)]
pub enum TestbedAction {
    /// Create the namespaces and links, start `bolt switch` in the switch namespace and a
    /// `bolt agent` (XDP, generic mode) in every worker host. Prints the layout. Already up
    /// with the same workers: prints it again; anything else in the way: fails.
    Up(UpArgs),
    /// Stop the agents (they RETURN their tasks) and the switch, delete the namespaces and
    /// any pins left. Nothing there is not an error.
    Down(NameArg),
    /// Print the layout of a testbed that is up, as JSON.
    Show(NameArg),
}

#[derive(Args, Debug)]
pub struct NameArg {
    /// Testbed name: prefixes its namespaces and interfaces (1 to 10 of a-z, 0-9).
    #[arg(long, default_value = "bolt")]
    pub name: String,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Worker nodes (each a host namespace with executor namespaces behind it).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=super::MAX_WORKERS as i64))]
    pub workers: u16,
    /// Executor namespaces behind each worker host, each on its own link (all served by
    /// the host's one set of rings).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=super::MAX_EXECUTOR_LINKS as i64))]
    pub executor_links: u8,
    /// Do not start agents (XDP stays off; executors then reach the switch directly).
    #[arg(long)]
    pub no_agents: bool,
    /// Do not start an object store on each worker host (`bolt object serve` at the host's
    /// uplink address, port 7180).
    #[arg(long)]
    pub no_stores: bool,
    /// An extra argument for every `bolt agent` (repeat, e.g. --agent-arg=--batch --agent-arg=32).
    #[arg(long = "agent-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub agent_args: Vec<String>,
    /// An extra argument for `bolt switch` (repeat).
    #[arg(long = "switch-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub switch_args: Vec<String>,
    /// Print the layout as JSON (for scripts) instead of a summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run_cli(args: TestbedArgs) -> anyhow::Result<()> {
    match args.action {
        TestbedAction::Up(a) => up(a),
        TestbedAction::Down(n) => down(&n.name),
        TestbedAction::Show(n) => {
            let layout = services::layout(&n.name).ok_or_else(|| anyhow::anyhow!("testbed {} is not up", n.name))?;
            println!("{}", serde_json::to_string_pretty(&layout)?);
            Ok(())
        }
    }
}

fn up(a: UpArgs) -> anyhow::Result<()> {
    let name = &a.name.name;
    let layout = Layout::plan(name, a.workers, a.executor_links)?;
    let present = existing_namespaces(name);
    if !present.is_empty() {
        let same = services::layout(name).is_some_and(|l| l == layout)
            && present.len() == layout.namespaces().len()
            && services::all_running(name);
        anyhow::ensure!(
            same,
            "testbed {name} is partly or differently up ({} namespaces: {}); run `bolt testbed down --name {name}` first",
            present.len(),
            present.join(" ")
        );
        tracing::info!(name, "testbed is up already");
        return print(&layout, a.json);
    }
    let testbed = Testbed::create(layout)?;
    let cfg = ServicesConfig {
        bolt: std::env::current_exe()?,
        agents: !a.no_agents,
        stores: !a.no_stores,
        agent_args: a.agent_args,
        switch_args: a.switch_args,
    };
    // On failure `testbed` is dropped here and removes the namespaces again.
    services::start(testbed.layout(), &cfg)?;
    let layout = testbed.persist();
    print(&layout, a.json)
}

fn down(name: &str) -> anyhow::Result<()> {
    Layout::plan(name, 1, 1)?;
    services::stop(name)?;
    Testbed::destroy(name)?;
    tracing::info!(name, "testbed is down");
    Ok(())
}

fn print(layout: &Layout, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(layout)?);
        return Ok(());
    }
    println!("testbed {}: switch {} in namespace {}", layout.name, layout.switch_socket(), layout.switch_ns);
    for w in &layout.workers {
        println!(
            "  node {}: host {} (uplink {} {}, XDP there and on each executor link; object store {})",
            w.node,
            w.host_ns,
            w.uplink,
            w.uplink_addr,
            w.store_addr()
        );
        for e in &w.executors {
            println!("    executors in {} at {} (link {}, host {})", e.ns, e.addr, e.host_iface, e.gateway);
        }
    }
    println!("logs and process ids: {}", services::state_dir(&layout.name).display());
    Ok(())
}
