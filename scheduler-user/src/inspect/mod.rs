//! bpftool-style inspection of a running Bolt: `bolt prog`, `bolt map`, `bolt ring` and
//! `bolt stats` read the XDP programs and maps pinned under /sys/fs/bpf/bolt/ on this
//! host; `bolt switch stats` reads a switch's metrics endpoint. Every command prints a
//! table, or JSON with -j/-p (schemas in docs/cli.md).

mod fdinfo;
pub mod maps;
pub mod prog;
pub mod ring;
pub mod stats;

use std::path::{Path, PathBuf};

use scheduler_common::maps::PIN_ROOT;
use serde::Serialize;

use crate::xdp::PinDir;

/// The output options every inspection command takes (before or after the object).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct OutputArgs {
    /// Print JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
    /// Print indented JSON (implies --json).
    #[arg(short = 'p', long)]
    pub pretty: bool,
    /// Show the paths of pinned objects.
    #[arg(short = 'f', long)]
    pub bpffs: bool,
}

impl OutputArgs {
    /// The options given before the object and after it, together.
    pub fn merge(self, other: OutputArgs) -> OutputArgs {
        OutputArgs {
            json: self.json || other.json,
            pretty: self.pretty || other.pretty,
            bpffs: self.bpffs || other.bpffs,
        }
    }

    pub fn is_json(&self) -> bool {
        self.json || self.pretty
    }

    /// Prints `value` as JSON (compact or pretty) or, without -j/-p, as `text` renders it.
    pub fn print<T: Serialize>(&self, value: &T, text: impl FnOnce(&T) -> String) -> anyhow::Result<()> {
        let out = if self.pretty {
            serde_json::to_string_pretty(value)?
        } else if self.json {
            serde_json::to_string(value)?
        } else {
            text(value)
        };
        use std::io::Write;
        match writeln!(std::io::stdout().lock(), "{}", out.trim_end()) {
            // A reader that stopped reading (`| head`) is not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            r => Ok(r?),
        }
    }
}

/// A host's Bolt program as found on the bpffs: one directory of pins per node.
#[derive(Clone, Debug)]
pub struct PinnedNode {
    /// The directory name under /sys/fs/bpf/bolt/ (the first executor-facing interface,
    /// or the agent's --pin-name).
    pub name: String,
    pub dir: PinDir,
}

/// Every node pinned under `root` (normally /sys/fs/bpf/bolt), by name; only `only` when
/// given. A name asked for that has no pins is an error; none at all is an empty list.
pub fn pinned_nodes_under(root: &Path, only: Option<&str>) -> anyhow::Result<Vec<PinnedNode>> {
    if let Some(name) = only {
        let dir = PinDir::under(root, name)?;
        anyhow::ensure!(
            dir.path().is_dir(),
            "nothing pinned for {name:?}: no {} (pins are named after the agent's first --iface or its --pin-name)",
            dir.path().display()
        );
        return Ok(vec![PinnedNode { name: name.to_string(), dir }]);
    }
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::anyhow!("reading {}: {e}", root.display())),
    };
    let mut nodes = Vec::new();
    for entry in entries {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        nodes.push(PinnedNode { dir: PinDir::under(root, &name)?, name });
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(nodes)
}

/// [`pinned_nodes_under`] the standard root.
pub fn pinned_nodes(only: Option<&str>) -> anyhow::Result<Vec<PinnedNode>> {
    pinned_nodes_under(Path::new(PIN_ROOT), only)
}

/// `path` as a string when -f asked for pinned paths.
fn shown_path(out: &OutputArgs, path: PathBuf) -> Option<String> {
    out.bpffs.then(|| path.display().to_string())
}

/// Left-aligned columns: a header row and rows of cells.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < width.len() {
                width[i] = width[i].max(cell.len());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
