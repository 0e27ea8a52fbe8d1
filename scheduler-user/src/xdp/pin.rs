//! Where a program attached to an interface keeps its pins.

use std::path::{Path, PathBuf};

use scheduler_common::maps::PIN_ROOT;

/// `/sys/fs/bpf/bolt/<iface>/` (or another root, for tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinDir(PathBuf);

impl PinDir {
    /// The directory for interface `iface` under the standard root.
    pub fn for_interface(iface: &str) -> anyhow::Result<PinDir> {
        PinDir::under(Path::new(PIN_ROOT), iface)
    }

    /// The directory for `name` under `root` (which must be on a bpffs).
    pub fn under(root: &Path, name: &str) -> anyhow::Result<PinDir> {
        anyhow::ensure!(
            !name.is_empty() && !name.contains('/') && name != "." && name != "..",
            "not a usable pin directory name: {name:?}"
        );
        Ok(PinDir(root.join(name)))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn map(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn program(&self) -> PathBuf {
        self.0.join("prog")
    }

    pub fn link(&self) -> PathBuf {
        self.0.join("link")
    }

    /// The link of a further interface the same program is attached to (a host's uplink):
    /// `link-<iface>`, with dots replaced (bpffs refuses dots in names).
    pub fn link_for(&self, iface: &str) -> PathBuf {
        self.0.join(format!("link-{}", iface.replace('.', "_")))
    }

    /// Every link pinned here: [`PinDir::link`] and each [`PinDir::link_for`].
    pub fn links(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return Vec::new();
        };
        let mut links: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n == "link" || n.starts_with("link-")))
            .collect();
        links.sort();
        links
    }

    /// True when a program was attached and pinned here.
    pub fn is_attached(&self) -> bool {
        self.link().exists()
    }

    /// Creates the directory; fails with a hint when it is not on a bpffs.
    pub fn create(&self) -> anyhow::Result<()> {
        let mount = self.0.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
        anyhow::ensure!(
            is_bpffs(mount),
            "{} is not on a bpf filesystem: mount one (`mount -t bpf bpf /sys/fs/bpf`, done by `cargo xtask setup`)",
            self.0.display()
        );
        std::fs::create_dir_all(&self.0)
            .map_err(|e| anyhow::anyhow!("creating pin directory {}: {e}", self.0.display()))
    }

    /// Removes every pin and the directory itself. Missing files are not an error.
    pub fn remove(&self) -> anyhow::Result<()> {
        match std::fs::read_dir(&self.0) {
            Ok(entries) => {
                for e in entries {
                    let p = e?.path();
                    std::fs::remove_file(&p).map_err(|err| anyhow::anyhow!("unpinning {}: {err}", p.display()))?;
                }
                std::fs::remove_dir(&self.0)?;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// True when `path` lies on a mounted bpf filesystem (where pins can be created).
pub fn is_bpffs(path: &Path) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == BPF_FS_MAGIC
    }
}
