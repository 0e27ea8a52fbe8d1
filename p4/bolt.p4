/* bolt.p4: tier 2 of Bolt, the in-network task scheduler, for Tofino (TNA).
 *
 * This program mirrors the executable model in scheduler-user/src/queue (the software
 * switch runs the same algorithm). Every register action below names the model function
 * it mirrors; p4/README.md has the full mapping, the pass-by-pass layouts and the
 * resource budget. Wire layouts and constants mirror scheduler-common/src/layout.rs and
 * message.rs; scheduler-user/tests/p4_consistency.rs fails when they disagree.
 *
 * A packet meets the register arrays once per pass, in the model's stage order
 * (queue/registers.rs): add_ptr, retrieve_ptr, repairing, valid, rsrc, entry words.
 * Everything that needs another look is recirculated: the rest of a SUBMIT or RETURN,
 * a GET_TASK or REFILL_REQ moving one priority level down (RTRV_PRIO + 1), a SWAP step,
 * a REPAIR. State that is not on the wire travels in bolt_pass_h, a header that exists
 * only between this pipeline's egress and its ingress.
 */

#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

/* The first recirculation port of pipe 0 (the control plane sets the one it uses). */
#if __TARGET_TOFINO__ == 2
#define DEFAULT_RECIRC_PORT 6
#else
#define DEFAULT_RECIRC_PORT 68
#endif

/* Admission (validation, access lists) as a pass of its own, exclusive with the queue
 * pass, where 12 stages cannot hold both (p4/README.md, "Review findings"). */
#ifndef ADMISSION_OWN_PASS
#if __TARGET_TOFINO__ == 2
#define ADMISSION_OWN_PASS 0
#else
#define ADMISSION_OWN_PASS 1
#endif
#endif

#include "headers.p4"
#include "parser.p4"
#include "ingress.p4"
#include "egress.p4"

Pipeline(BoltIngressParser(),
         BoltIngress(),
         BoltIngressDeparser(),
         BoltEgressParser(),
         BoltEgress(),
         BoltEgressDeparser()) pipe;

Switch(pipe) main;
