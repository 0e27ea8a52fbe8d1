//! The `bolt` command line as a binary these tests can name (the `bolt` binary belongs to
//! scheduler-user, whose binaries the tests of this crate cannot name): the same code.

fn main() -> anyhow::Result<()> {
    scheduler_user::cli::main()
}
