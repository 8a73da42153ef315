#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""hello_rdma.py: hello_rdma.c in Python with pyverbs (python3-pyverbs, rdma-core's own
bindings). The server waits for one connection, receives a message and answers it; the
client connects, sends its greeting and prints the answer. RC QP, SEND/RECV, rdma_cm.

  guest 2:  python3 hello_rdma.py -s 192.168.77.2     (server, listens on port 7472)
  guest 1:  python3 hello_rdma.py 192.168.77.2        (client)
"""
import socket
import sys

import pyverbs.cm_enums as ce
from pyverbs.cmid import AddrInfo, CMID
from pyverbs.qp import QPCap, QPInitAttr

PORT = "7472"
MSG = 64


def main(argv):
    server = len(argv) == 3 and argv[1] == "-s"
    if len(argv) not in (2, 3) or (len(argv) == 3 and not server):
        sys.exit("usage: hello_rdma.py [-s] ADDRESS")
    addr, host = argv[-1], socket.gethostname()
    attr = QPInitAttr(cap=QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1))
    if server:
        ai = AddrInfo(src=addr, src_service=PORT, port_space=ce.RDMA_PS_TCP,
                      flags=ce.RAI_PASSIVE)
        listener = CMID(creator=ai, qp_init_attr=attr)
        listener.listen()
        cmid = listener.get_request()
    else:
        ai = AddrInfo(dst=addr, dst_service=PORT, port_space=ce.RDMA_PS_TCP)
        cmid = CMID(creator=ai, qp_init_attr=attr)
    rmr, smr = cmid.reg_msgs(MSG), cmid.reg_msgs(MSG)
    cmid.post_recv(rmr)	# before the connection exists, so the peer's SEND finds it
    if server:
        cmid.accept()
    else:
        cmid.connect()
        smr.write(("hello from %s" % host).encode().ljust(MSG, b"\0"), MSG)
        cmid.post_send(smr)
        cmid.get_send_comp()
    cmid.get_recv_comp()
    text = rmr.read(MSG, 0).rstrip(b"\0").decode()
    print("%s received: %s" % (host, text))
    if server:
        smr.write(("%s answers: %s" % (host, text)).encode()[:MSG].ljust(MSG, b"\0"), MSG)
        cmid.post_send(smr)
        cmid.get_send_comp()
    cmid.disconnect()


if __name__ == "__main__":
    main(sys.argv)
