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

pub use crate::output::{table, OutputArgs};
use crate::xdp::PinDir;

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
