//! `bolt`: run and inspect the Bolt two-level task scheduler (the command line is
//! `scheduler_user::cli`).

fn main() -> anyhow::Result<()> {
    scheduler_user::cli::main()
}
