# SPDX-License-Identifier: GPL-2.0-or-later
"""Working inside a running guest: 'exec', 'ssh', 'console', and commands run for other
verbs over ssh (guest_run: their output bounded and decoded leniently, docs/security.md).
"""
import os
import select
import shlex
import socket
import subprocess
import sys
import termios
import tty

from .common import RUN, SSH_KEY, die, info, load_state, size_text, vm_entry
from .tap import TtyFilter

# The most of a guest command's output guest_run keeps (its first and last half): the rest
# is counted and left out, whatever the guest prints.
OUTPUT_KEEP = 1 << 20


def ssh_base(state, i, tty_mode=False):
    vm = vm_entry(state, i)
    cmd = ["ssh", "-p", str(vm["ssh_port"]), "-i", SSH_KEY,
           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
           "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
           "-o", "ServerAliveInterval=15"]
    cmd += ["-t"] if tty_mode else ["-T"]
    if vm.get("ssh_netns"):	# a QEMU that libvirt runs in that namespace ('up --netns')
        cmd = ["ip", "netns", "exec", vm["ssh_netns"]] + cmd
    return cmd + ["root@127.0.0.1"]


def cmd_exec(args):
    state = load_state()
    argv = args.cmd
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        die("usage: qhca exec I -- CMD...")
    # One argument is a shell command line; several are quoted as an argument vector.
    remote = argv[0] if len(argv) == 1 else " ".join(shlex.quote(a) for a in argv)
    cmd = ssh_base(state, args.index) + ["--", remote]
    os.execvp(cmd[0], cmd)


def cmd_ssh(args):
    state = load_state()
    cmd = ssh_base(state, args.index, tty_mode=True)
    os.execvp(cmd[0], cmd)


def cmd_console(args):
    state = load_state()
    vm_entry(state, args.index)
    path = os.path.join(RUN, "vm%d.console" % args.index)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        die("cannot connect to %s: %s" % (path, e))
    info("console of vm%d; leave with Ctrl-]" % args.index)
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd) if os.isatty(fd) else None
    try:
        if old:
            tty.setraw(fd)
        s.sendall(b"\r")
        while True:
            r, _, _ = select.select([s, fd], [], [])
            if s in r:
                data = s.recv(4096)
                if not data:
                    break
                os.write(sys.stdout.fileno(), data)
            if fd in r:
                data = os.read(fd, 1024)
                if not data or b"\x1d" in data:
                    break
                s.sendall(data)
    finally:
        if old:
            termios.tcsetattr(fd, termios.TCSADRAIN, old)
    sys.stderr.write("\r\n")
    return 0


def guest_run(state, i, cmd, background_log=None, keep=OUTPUT_KEEP):
    """Run CMD (one shell line) in guest I; with BACKGROUND_LOG detached, its output and
    status in that guest file (.rc beside it). Returns (status, output): its stdout and
    stderr, decoded leniently (a byte that is no UTF-8 becomes U+FFFD), at most KEEP bytes of
    them (the first and the last half; a line between says how much was left out)."""
    if background_log:
        cmd = ("rm -f {l} {l}.rc; setsid sh -c '{c} > {l} 2>&1; echo $? > {l}.rc' "
               "< /dev/null > /dev/null 2>&1 &").format(l=background_log,
                                                        c=cmd.replace("'", "'\\''"))
    p = subprocess.Popen(ssh_base(state, i) + ["--", cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    head, tail, total = bytearray(), bytearray(), 0
    with p.stdout:
        for data in iter(lambda: p.stdout.read1(65536), b""):
            total += len(data)
            room = keep // 2 - len(head)
            if room > 0:
                head += data[:room]
                data = data[room:]
            tail += data
            if len(tail) > keep - keep // 2:
                del tail[:len(tail) - (keep - keep // 2)]
    out = head.decode("utf-8", "replace")
    if total > len(head) + len(tail):
        out += "\n[qhca: %s of the guest's output left out here]\n" % size_text(
            total - len(head) - len(tail))
    return p.wait(), out + tail.decode("utf-8", "replace")


def terminal_text(text, stream=None):
    """A guest's TEXT as it may go to STREAM (default stderr): on a terminal without the
    control characters that would drive it (tap.TtyFilter: escape sequences, bells, carriage
    returns, C1 controls; newlines and tabs stay), elsewhere as it is."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return text
    f = TtyFilter()
    data = text.encode("utf-8", "replace")
    return (f(data) + f.flush()).decode("utf-8", "replace")
