"""What bolt.p4 refuses at the door: internal ops from a front-panel port, senders the
ACLs do not list, malformed messages; and what it forwards untouched.

Runs with the same build and configuration as test_vectors.py.
"""

import struct

import ptf.testutils as testutils
from ptf.packet import Ether, IP, UDP, Raw
from bfruntime_client_base_tests import BfRuntimeTest

from test_vectors import ScenarioReplay, SWITCH_IP, SWITCH_MAC, SWITCH_PORT, host_mac

MAGIC = 0xB017
VERSION = 5  # scheduler-common VERSION: any other version is refused before these checks
OP_SUBMIT, OP_GET_TASK, OP_SWAP, OP_REPAIR = 1, 2, 10, 11
DE_BAD_MAGIC, DE_INTERNAL_OP, DE_BAD_LENGTH, DE_BAD_PRIORITY = 1, 4, 7, 8
STRANGER = "10.0.9.9"


def header(op, count=0, prio=1, rsrc=0, flags=0, magic=MAGIC):
    return struct.pack("!HBBBBBB", magic, VERSION, op, count, prio, rsrc, flags)


def task(tid, prio):
    return struct.pack("!IBBBB", tid, prio, 0, 0, 0) + bytes(16)


def submit(tasks, jid=1):
    return header(OP_SUBMIT, len(tasks), 0) + struct.pack("!II", 1, jid) + b"".join(tasks)


def get_task(prio=1):
    return header(OP_GET_TASK, 0, prio) + struct.pack("!HHI", 2, 1, 7)


class AdmissionTest(ScenarioReplay, BfRuntimeTest):
    scenario = "submit"

    def packet(self, src_ip, payload, dst_ip=SWITCH_IP, dport=SWITCH_PORT):
        return (Ether(dst=SWITCH_MAC, src=host_mac(src_ip))
                / IP(src=src_ip, dst=dst_ip, ttl=64)
                / UDP(sport=40000, dport=dport)
                / Raw(payload))

    def refused(self, port, pkt, counter, index):
        before = self.counter(counter, index)
        testutils.send_packet(self, port, pkt)
        testutils.verify_no_other_packets(self, timeout=1)
        self.assertEqual(self.counter(counter, index), before + 1, "%s[%d] did not count it" % (counter, index))

    def runTest(self):
        client = "10.0.1.1"
        port = self.port_of[client]
        empty = self.queue_state()

        # SWAP and REPAIR exist only between this pipeline's passes.
        self.refused(port, self.packet(client, header(OP_SWAP) + bytes(48)), "malformed", DE_INTERNAL_OP)
        self.refused(port, self.packet(client, header(OP_REPAIR) + bytes(8)), "malformed", DE_INTERNAL_OP)

        # SUBMIT only from allowed client prefixes; GET_TASK only from registered executors.
        self.refused(port, self.packet(STRANGER, submit([task(1, 1)])), "acl_denied", OP_SUBMIT)
        self.refused(port, self.packet(STRANGER, get_task()), "acl_denied", OP_GET_TASK)

        # Malformed: bad magic, a length that disagrees with the count, priority 0.
        self.refused(port, self.packet(client, header(OP_GET_TASK, magic=0xBEEF) + bytes(8)), "malformed",
                     DE_BAD_MAGIC)
        self.refused(port, self.packet(client, submit([task(1, 1)]) + bytes(4)), "malformed", DE_BAD_LENGTH)
        self.refused(port, self.packet(client, submit([task(1, 1), task(2, 0)])), "malformed", DE_BAD_PRIORITY)

        # Nothing of the above reached a queue.
        self.assertEqual(self.queue_state(), empty)

        # UDP to port 7171 of another host is plain traffic: forwarded as it came.
        other = "10.0.2.1"
        pkt = self.packet(client, submit([task(3, 1)]), dst_ip=other)
        testutils.send_packet(self, port, pkt)
        expected = pkt.copy()
        expected[Ether].src = SWITCH_MAC
        expected[Ether].dst = host_mac(other)
        testutils.verify_packet(self, expected, self.port_of[other])
        testutils.verify_no_other_packets(self, timeout=1)
        self.assertEqual(self.queue_state(), empty)
