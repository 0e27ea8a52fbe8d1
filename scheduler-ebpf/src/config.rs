//! The configuration the loader writes into the one-slot config map before attaching.
//! A map rather than `.rodata` so that an agent opening the pinned maps reads the same
//! settings the program runs with.

use scheduler_common::maps::XdpConfig;

use crate::maps::BOLT_CONFIG;

#[inline(always)]
pub fn get() -> Option<&'static XdpConfig> {
    BOLT_CONFIG.get(0)
}
