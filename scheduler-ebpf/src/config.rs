//! The load-time configuration, patched into `.rodata` by the loader.

use aya_ebpf::Global;
use scheduler_common::{maps::XdpConfig, DEFAULT_PORT};

#[unsafe(no_mangle)]
static BOLT_CONFIG: Global<XdpConfig> = Global::new(XdpConfig::new(DEFAULT_PORT, 0, [0; 4]));

#[inline(always)]
pub fn get() -> XdpConfig {
    BOLT_CONFIG.load()
}
