#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""qhca-tcp: move bytes over TCP and print their count and MD5, for the VM tests.

  qhca-tcp serve PORT OUTFILE     accept one connection, write "<bytes> <md5>" to OUTFILE
  qhca-tcp send HOST PORT BYTES   send BYTES random bytes, print "<bytes> <md5>"
"""
import hashlib
import os
import socket
import sys


def serve(port, out):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.listen(1)
    c, _ = s.accept()
    h, n = hashlib.md5(), 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        h.update(d)
        n += len(d)
    with open(out + ".tmp", "w") as f:
        f.write("%d %s\n" % (n, h.hexdigest()))
    os.rename(out + ".tmp", out)


def send(host, port, nbytes):
    data = os.urandom(nbytes)
    s = socket.create_connection((host, port), timeout=30)
    s.sendall(data)
    s.close()
    print("%d %s" % (len(data), hashlib.md5(data).hexdigest()))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
