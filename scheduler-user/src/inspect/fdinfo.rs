//! What the kernel says about a pinned BPF object in /proc/self/fdinfo: for an XDP link,
//! the interface index it is attached to (aya's `LinkInfo` does not expose it).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// `key: value` lines of the fdinfo of the object pinned at `path`.
pub fn pinned_fdinfo(path: &Path) -> anyhow::Result<HashMap<String, String>> {
    let fd = bpf_obj_get(path)?;
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}

/// BPF_OBJ_GET: a file descriptor of the object pinned at `path`.
fn bpf_obj_get(path: &Path) -> anyhow::Result<OwnedFd> {
    const BPF_OBJ_GET: libc::c_long = 7;
    /// The BPF_OBJ_* member of `union bpf_attr`, padded to the size the kernel checks.
    #[repr(C)]
    struct ObjAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
        path_fd: i32,
        pad: [u8; 108],
    }
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
    let attr = ObjAttr { pathname: c_path.as_ptr() as u64, bpf_fd: 0, file_flags: 0, path_fd: 0, pad: [0; 108] };
    // SAFETY: attr is a valid, zero-padded bpf_attr that outlives the call; the path is
    // NUL-terminated.
    let fd = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_OBJ_GET, &attr as *const ObjAttr, std::mem::size_of::<ObjAttr>() as u32)
    };
    if fd < 0 {
        anyhow::bail!("opening the pinned object {}: {}", path.display(), std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
