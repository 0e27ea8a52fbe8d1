//! RETURN credit: a host may hand back to tier 2 at most what tier 2 handed it. Each
//! REFILL of n tasks to an agent adds n to that agent's credit; each RETURN entry takes
//! one. An entry beyond the credit is not queued: its task goes back to its client as
//! QUEUE_FULL. So a host cannot queue more work than it received (forged entries are
//! bounded by what it was given), and an honest host whose task is refused (a stolen task
//! the thief RETURNs, whose credit the victim holds) loses nothing: the client resubmits.
//!
//! **What the credit is keyed on.** A RETURN carries no node id, and the node id of a
//! REFILL_REQ is whatever its sender writes; the one thing in both that the sender does
//! not choose is its IPv4 source address (agents are admitted by `--agents`, and the
//! network delivers their addresses: see docs/reliability.md). So the credit belongs to
//! the agent's address: REFILLs are credited to their destination, RETURNs charged to
//! their source, both the same address because the agent asks and returns from its
//! uplink address.
//!
//! **Layout.** A fixed table of [`CREDIT_SLOTS`] slots, as two P4 registers of that size:
//! `credit_owner[slot]` (the address the slot belongs to) and `credit[slot]`, with
//! `slot = CRC-32(address) mod CREDIT_SLOTS`. A REFILL to an address that does not own
//! its slot takes the slot over, starting from 0; the former owner's later RETURNs then
//! bounce to their clients. Nothing is lost and nothing forged is queued, whichever
//! agents share a slot.

use std::net::{Ipv4Addr, SocketAddrV4};

use scheduler_common::{Entry, JobRef};

use super::tier2::Answer;

/// Slots of the credit table: agents tracked at once without sharing.
pub const CREDIT_SLOTS: usize = 4096;

/// The per-agent RETURN credit of one switch.
pub struct ReturnCredit {
    owner: Box<[u32]>,
    credit: Box<[u32]>,
}

impl Default for ReturnCredit {
    fn default() -> Self {
        ReturnCredit { owner: vec![0; CREDIT_SLOTS].into(), credit: vec![0; CREDIT_SLOTS].into() }
    }
}

/// The slot of `agent`: CRC-32 (IEEE, as the Tofino hash unit's `CRC32`) of its four
/// address bytes in wire order, low bits.
pub fn slot(agent: Ipv4Addr) -> usize {
    let mut crc = !0u32;
    for b in agent.octets() {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    (!crc) as usize % CREDIT_SLOTS
}

impl ReturnCredit {
    /// Tier 2 sent `tasks` tasks to `agent` in a REFILL. Returns true when the slot
    /// changed owner (the former owner's credit is gone).
    pub fn grant(&mut self, agent: Ipv4Addr, tasks: u32) -> bool {
        let (i, a) = (slot(agent), u32::from(agent));
        let taken_over = self.owner[i] != a;
        if taken_over {
            self.owner[i] = a;
            self.credit[i] = 0;
        }
        self.credit[i] = self.credit[i].saturating_add(tasks);
        taken_over && tasks > 0
    }

    /// How many of `entries` returned entries from `agent` its credit covers; those are
    /// charged to it.
    pub fn take(&mut self, agent: Ipv4Addr, entries: u32) -> u32 {
        let i = slot(agent);
        if self.owner[i] != u32::from(agent) {
            return 0;
        }
        let covered = entries.min(self.credit[i]);
        self.credit[i] -= covered;
        covered
    }

    /// The part of a RETURN from `src` that its credit covers (possibly none), charged to
    /// it, and how many entries it did not cover. Each of those goes back to its own
    /// client as QUEUE_FULL, as the pipeline bounces a RETURN entry it cannot queue.
    pub fn cover_return<'m>(
        &mut self,
        entries: &'m [Entry],
        src: SocketAddrV4,
        out: &mut Vec<Answer>,
    ) -> (&'m [Entry], u64) {
        let covered = self.take(*src.ip(), entries.len() as u32) as usize;
        for entry in &entries[covered..] {
            let to = SocketAddrV4::new(entry.client_ip.into(), entry.client_port());
            let job = JobRef::new(entry.uid(), entry.jid());
            out.push(Answer::QueueFull { to, job, tasks: std::iter::once(entry.task).collect() });
        }
        (&entries[..covered], (entries.len() - covered) as u64)
    }

    /// The credit `agent` holds now.
    pub fn of(&self, agent: Ipv4Addr) -> u32 {
        let i = slot(agent);
        if self.owner[i] == u32::from(agent) {
            self.credit[i]
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_return_is_covered_only_by_what_was_refilled_to_the_same_address() {
        let mut c = ReturnCredit::default();
        let (agent, other) = (ip("10.77.1.2"), ip("10.77.2.2"));
        assert_ne!(slot(agent), slot(other));
        assert_eq!(c.take(agent, 3), 0, "nothing given, nothing returned");
        c.grant(agent, 5);
        assert_eq!(c.take(other, 5), 0, "another address cannot spend it");
        assert_eq!(c.take(agent, 3), 3);
        assert_eq!(c.take(agent, 16), 2, "only what is left");
        assert_eq!(c.take(agent, 1), 0);
        assert_eq!(c.of(agent), 0);
    }

    #[test]
    fn a_shared_slot_belongs_to_the_last_address_refilled() {
        let mut c = ReturnCredit::default();
        let a = ip("10.0.0.1");
        let b = (1..=u32::MAX).map(|k| Ipv4Addr::from(u32::from(a) + k)).find(|b| slot(*b) == slot(a)).unwrap();
        c.grant(a, 4);
        assert!(c.grant(b, 2), "b takes the slot over");
        assert_eq!((c.of(a), c.of(b)), (0, 2));
        assert_eq!(c.take(a, 1), 0);
        assert!(!c.grant(b, 1));
        assert_eq!(c.take(b, 9), 3);
    }

    #[test]
    fn the_slot_hash_is_crc32() {
        // CRC-32 of the ASCII "1234" is 0x9BE3E0A3 (the check value of the standard tables).
        assert_eq!(slot(Ipv4Addr::new(b'1', b'2', b'3', b'4')), 0x9BE3_E0A3 % CREDIT_SLOTS);
    }
}
