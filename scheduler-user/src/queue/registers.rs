//! The switch's register discipline, made checkable. A Tofino pipeline places each
//! register array in one stage; a packet meets the stages in order and may touch each
//! array once per pass. The model names every array by its stage and, in debug builds
//! (all tests), asserts that a pass touches arrays once each and in stage order. This is
//! what lets bolt.p4 mirror the model one RegisterAction per access.

/// Pipeline stages, in the order a pass meets them. The P4 program places the register
/// arrays in the same order (p4/README.md maps each to its RegisterActions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Stage {
    /// `add_ptr[prio]`: `<round, index>` of the next free slot.
    AddPtr = 0,
    /// `retrieve_ptr[prio]`: `<round, index>` of the next task to hand out.
    RetrievePtr = 1,
    /// `is_repairing`: two bits per priority (add, retrieve) in one bitmask.
    RepairFlags = 2,
    /// `is_valid[prio][index]`: the slot holds a task not yet handed out.
    Valid = 3,
    /// `task_rsrc[prio][index]`: the slot's resource bitmap (TRSRC).
    Rsrc = 4,
    /// `task_entry[prio][index]`: the rest of the ENTRY (spread over several arrays in P4).
    Entry = 5,
}

/// Register arrays touched by the current pass.
#[derive(Default)]
pub struct PassTracker {
    #[cfg(debug_assertions)]
    touched: u64,
    #[cfg(debug_assertions)]
    last: Option<Stage>,
}

impl PassTracker {
    /// Starts a new pass: every array may be touched once again.
    #[inline(always)]
    pub fn begin(&mut self) {
        #[cfg(debug_assertions)]
        {
            self.touched = 0;
            self.last = None;
        }
    }

    /// Records one access to `stage`'s array for priority index `prio` (0-based).
    #[inline(always)]
    pub fn touch(&mut self, stage: Stage, prio: usize) {
        #[cfg(debug_assertions)]
        {
            // The flags register is one array shared by all priorities.
            let slot = if stage == Stage::RepairFlags { 0 } else { prio };
            let bit = 1u64 << (stage as u32 * 8 + slot as u32);
            assert!(self.touched & bit == 0, "{stage:?}[{prio}] accessed twice in one pass");
            if let Some(last) = self.last {
                assert!(stage > last, "{stage:?} accessed after {last:?}: out of pipeline order");
            }
            self.touched |= bit;
            self.last = Some(stage);
        }
        #[cfg(not(debug_assertions))]
        let _ = (stage, prio);
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "accessed twice")]
    fn second_access_in_a_pass_is_caught() {
        let mut t = PassTracker::default();
        t.begin();
        t.touch(Stage::Valid, 0);
        t.touch(Stage::Valid, 0);
    }

    #[test]
    #[should_panic(expected = "out of pipeline order")]
    fn backwards_access_is_caught() {
        let mut t = PassTracker::default();
        t.begin();
        t.touch(Stage::Valid, 0);
        t.touch(Stage::AddPtr, 0);
    }

    #[test]
    fn a_new_pass_resets() {
        let mut t = PassTracker::default();
        t.begin();
        t.touch(Stage::AddPtr, 1);
        t.touch(Stage::Entry, 1);
        t.begin();
        t.touch(Stage::AddPtr, 1);
    }
}
