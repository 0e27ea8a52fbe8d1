//! `<round, index>` queue pointers (thesis §3.2.2).
//!
//! A pointer is one u32: the low `log2(capacity)` bits are the index, the high bits the
//! round number. With a power-of-two capacity, `read_and_increment` is a plain wrapping
//! add that carries from index into round, and the occupancy is the wrapping difference
//! `add_ptr - retrieve_ptr` read as a signed number: 0 is empty, >= capacity is full,
//! negative means retrieve_ptr ran past add_ptr (empty retrievals) and needs repair.
//! The thesis prototype splits 32 bits as 17-bit index and 15-bit round (128 K entries).

/// Geometry of one circular queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    capacity: u32,
    mask: u32,
}

impl Ring {
    /// `capacity` must be a power of two between 2 and 2^30.
    pub fn new(capacity: u32) -> Result<Ring, String> {
        if !capacity.is_power_of_two() || !(2..=1 << 30).contains(&capacity) {
            return Err(format!("queue capacity {capacity} must be a power of two from 2 to 2^30"));
        }
        Ok(Ring { capacity, mask: capacity - 1 })
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Bits of the pointer used by the index.
    pub fn index_bits(&self) -> u32 {
        self.capacity.trailing_zeros()
    }

    #[inline(always)]
    pub fn index(&self, ptr: u32) -> usize {
        (ptr & self.mask) as usize
    }

    #[inline(always)]
    pub fn round(&self, ptr: u32) -> u32 {
        ptr >> self.index_bits()
    }

    /// `add_ptr - retrieve_ptr` as a signed distance.
    #[inline(always)]
    pub fn distance(add: u32, retrieve: u32) -> i32 {
        add.wrapping_sub(retrieve) as i32
    }

    #[inline(always)]
    pub fn is_full(&self, add: u32, retrieve: u32) -> bool {
        Self::distance(add, retrieve) >= self.capacity as i32
    }

    /// True when `ptr` is at or past `add` (no queued slot there), in wrapping order.
    #[inline(always)]
    pub fn at_or_past(ptr: u32, add: u32) -> bool {
        Self::distance(ptr, add) >= 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_capacities() {
        assert!(Ring::new(0).is_err());
        assert!(Ring::new(3).is_err());
        assert!(Ring::new(1).is_err());
        assert!(Ring::new(1 << 17).is_ok());
    }

    #[test]
    fn round_carries_from_index() {
        let r = Ring::new(1 << 17).unwrap();
        let p = (1u32 << 17) - 1;
        assert_eq!((r.round(p), r.index(p)), (0, (1 << 17) - 1));
        let p = p.wrapping_add(1);
        assert_eq!((r.round(p), r.index(p)), (1, 0));
        assert_eq!(r.index_bits(), 17);
    }

    #[test]
    fn distance_survives_round_wrap() {
        let r = Ring::new(8).unwrap();
        let retrieve = u32::MAX - 2;
        let add = retrieve.wrapping_add(8);
        assert_eq!(Ring::distance(add, retrieve), 8);
        assert!(r.is_full(add, retrieve));
        assert!(!r.is_full(add.wrapping_sub(1), retrieve));
        assert_eq!(Ring::distance(retrieve, add), -8);
        assert_eq!(r.index(add), r.index(retrieve));
    }
}
