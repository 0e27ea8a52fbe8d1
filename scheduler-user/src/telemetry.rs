//! Logging set-up shared by every `bolt` command: `tracing` to stderr, filtered by
//! RUST_LOG (default `info`).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Safe to call more than once (later calls are no-ops).
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: logs redirected to files stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
