# SPDX-License-Identifier: GPL-2.0-or-later
"""qhca: boot VMs with a qhca RDMA device on the simulated fabric, and work inside them.

  qhca up [-n N]            boot N VMs (default 2, at most 16) on a fresh fabric; return when
                            all are ready
  qhca exec I -- CMD...     run CMD in guest I (1..N, or from --first), print its output, exit
                            with its status
  qhca ssh I                interactive shell in guest I (over ssh)
  qhca console I            the serial console of guest I (leave with Ctrl-])
  qhca link I up|down       set guest I's port link (QMP set_link), e.g. to test port events
  qhca device I [--json]    the device's own view of its objects (QPs with state, PSNs and
                            queue indices, CQs, SRQs, regions and keys), read over QMP
  qhca explain -- CMD...    run CMD in guest 1 (and its server in guest 2) with the devices'
                            step trace and the fabric's capture on, then tell what happened
                            step by step: story.txt, story.jsonl, sequence.svg and
                            capture.pcapng in $QHCA_RUN/explain (docs/tutorial.md)
  qhca kill I               SIGKILL guest I's QEMU, as a crash would; it stays in the set,
                            stopped, and 'start I' boots it again
  qhca reset I [--no-wait]  a system reset of guest I (QMP system_reset): the guest reboots in
                            the same QEMU; waits until it is ready again
  qhca start I              boot a killed or stopped guest I again with its saved command line
                            (same MAC, same ssh port, same fabric port); waits until ready
  qhca fabric ...           the fabric switch's control socket, see below
  qhca status               what is running (each guest running or stopped)
  qhca paths                print the cache and run directories in use
  qhca down                 stop the VMs and the fabric; nothing is left running
  qhca run [up options] [--install DEB]... [--setup CMD]... [--test-timeout S] [--tap F]
           [--junit F] -- CMD
                            for CI: up, install the packages, run the setup commands in every
                            guest and CMD in the first, write TAP/JUnit, down, exit with CMD's
                            status (docs/ci.md)

'up' options: --mem MIB gives each guest MIB of memory (default $QHCA_VM_MEM, else 1024:
eight guests fit a 24 GiB host with room to spare); --timeout S (default 180 s, plus 30 s for
each guest beyond 2, since N TCG guests share the host's cores; $QHCA_BOOT_TIMEOUT replaces
the default); --seed N, --fabric-script FILE and --capture FILE start the fabric with that
random seed, that script of timed events and a pcapng capture of the whole fabric; --rxe
gives each guest a virtio-net NIC on the fabric too (192.168.78.I) for Linux rxe ('rdma link
add rxe0 type rxe netdev NIC' in the guest), and --siw the same NIC with Linux siw on it, the
iWARP device siw0, made at boot (docs/iwarp.md); --ib
makes the guests' ports InfiniBand (device property link=ib) on a fabric that is an IB switch:
run a subnet manager in a guest ('qhca exec 1 -- opensm -B') to bring them up
(docs/infiniband.md).

'up' options for more than one switch or host (docs/fabric.md, "More than one host"):
  --first I               number the guests I..I+N-1 (MAC, 192.168.77.I, vmI, logs; exec, ssh,
                          kill, start, reset take these numbers); fabric ports 1..N carry them
  --fabric-tcp HOST:P     fabric port K also listens on TCP HOST:P+K-1 (qhca-fabric --tcp);
                          HOST must be a loopback address unless --fabric-netns is given
  --trunk ADDR            one more fabric port that connects out to another switch's port,
                          ADDR tcp:HOST:PORT (HOST loopback unless --fabric-netns) or
                          unix:PATH; repeatable; these ports come after the guests' (and
                          the virtio-net NICs' of --rxe, --siw)
  --spare-ports K         K more fabric ports, last, that wait for another switch's trunk (or a
                          QEMU started by hand): unix sockets, and TCP with --fabric-tcp
  --fabric-netns NS       run the fabric inside the existing network namespace NS, so that its
                          TCP listens on (and its trunks reach) that namespace's addresses; the
                          guests still reach it through its unix sockets (root)
  --netdev fabric|dgram|tap  what the guests' qhca devices are attached to: the fabric (default);
                          dgram: exactly 2 guests point to point over UDP on 127.0.0.1, no
                          fabric; tap: a tap each on a Linux bridge inside a network namespace
                          qhca-<hash of the run dir> that 'up' creates and 'down' removes, no
                          fabric (root)
  --bridge BR [--netns NS]  the taps on your existing bridge BR (in namespace NS), say one
                          joined to other hosts by VXLAN; 'down' removes only the taps (root)
  --libvirt URI           the guests as libvirt domains (virsh define, start; 'down' undefines
                          them), on the fabric or on --bridge with libvirt's taps
                          (docs/libvirt.md)

The fabric, seen from the switch (port I is guest I's qhca port, port I-F+1 with --first F;
with --rxe or --siw ports N+1..2N are the virtio-net NICs; then come --trunk's ports and the
spare ones). PORTS is N, N-M, N,M,... or all; 'in' is what guest I sends into the fabric, 'out'
what the fabric sends to guest I, neither both:

  qhca fabric show [--json]                 per port: connected, link, impairments set, counters
  qhca fabric set PORTS [in|out] KEY=VALUE... impair: loss, reorder, dup, corrupt (percent: 5,
                                            0.5%), delay, jitter (100us, 2ms, 1s; plain = us),
                                            rate (Mbit/s, 0 unlimited), mtu (bytes, 0 no limit),
                                            drop (the next N RDMA packets, ACKs aside)
  qhca fabric clear [PORTS]                 every impairment off (default: all ports)
  qhca fabric link PORTS up|down            a link down in the switch drops everything both
                                            ways (unlike 'qhca link', which the guest sees)
  qhca fabric zero                          counters to zero
  qhca fabric capture FILE | stop           a pcapng capture of the whole fabric
  qhca fabric seed N                        restart the random streams from seed N
  qhca fabric at TIME COMMAND...            run a fabric command after TIME (2s, 500ms, 100us)
  qhca fabric script FILE                   run FILE's timed events, times from now: lines like
                                            'at 2s port 2 loss=5%', 'at 5s port 1 down'
  qhca fabric raw LINE...                   send any command line, print the reply

The control socket is $QHCA_RUN/fabric/control.sock: one command a line, one line of JSON
back ({"ok": true, ...} or {"ok": false, "error": ...}, which qhca reports with status 1).

Everything lives in the run directory ($QHCA_RUN, default $QHCA_CACHE/run): per VM the
serial log vmI.log, QEMU's own output vmI.qemu.log and its command line vmI.cmdline, and
with 'up --pcap' its fabric traffic vmI.pcap ('start' keeps the previous ones as vmI.log.prev,
vmI.qemu.log.prev, vmI.pcap.prev); the fabric's log fabric.log; state.json (pids, ssh ports,
command lines, the guests' numbers and fabric ports, the namespace of --netdev tap). Builds come from the cache, made by 'make' in the qhca tree: $QHCA_CACHE if
set, else ${XDG_CACHE_HOME:-$HOME/.cache}/qhca (the same rule as the Makefile and
scripts/lib.sh).
"""
import argparse
import os
import sys

from .common import CACHE, DEFAULT_FLAVOUR, DEFAULT_MEM, FLAVOURS, RUN
from .explain import cmd_explain
from .fabric import cmd_fabric
from .files import MAX_BYTES, cmd_cp, parse_size
from .guest import cmd_console, cmd_exec, cmd_ssh
from .migrate import cmd_migrate
from .snapshot import cmd_snapshot
from .qmp import cmd_device, cmd_link
from .run import cmd_run
from .vms import boot_timeout, cmd_down, cmd_kill, cmd_reset, cmd_start, cmd_status, cmd_up


def cmd_paths(args):
    print("cache %s" % CACHE)
    print("run %s" % RUN)
    return 0


def size_arg(text):
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def add_up_options(p):
    """The options of 'up', which 'run' takes too."""
    p.add_argument("-n", type=int, default=2, help="number of VMs, 1..16 (default 2)")
    p.add_argument("--mem", default=DEFAULT_MEM, metavar="MIB",
                   help="memory of each guest in MiB (default $QHCA_VM_MEM, else 1024: "
                        "8 guests fit a 24 GiB host)")
    p.add_argument("--flavour", choices=FLAVOURS, default=DEFAULT_FLAVOUR,
                   help="the guests' Debian: debian13 (Debian 13 and its kernel), debian12, "
                        "newest (unstable's userland, the newest kernel); default "
                        "$QHCA_FLAVOUR, else debian13 (docs/flavours.md)")
    p.add_argument("--kernel", metavar="BZIMAGE",
                   help="boot this kernel of your own with the flavour's userland; with "
                        "--modules, and qhca.ko from 'make driver KDIR=YOUR-TREE'")
    p.add_argument("--modules", metavar="DIR",
                   help="the modules of --kernel: make modules_install INSTALL_MOD_PATH=DIR")
    p.add_argument("--disk", metavar="IMAGE",
                   help="boot this disk image (raw or qcow2, with its own boot loader and "
                        "systemd) instead of qhca's image; never written: the guests' writes "
                        "last as long as its QEMU (docs/install-guest.md)")
    p.add_argument("--share", action="append", metavar="DIR",
                   help="DIR of the host at the same path in every guest, read-only "
                        "(virtfs); repeatable")
    p.add_argument("--share-rw", action="append", metavar="DIR",
                   help="as --share, and the guests may write to it (as QEMU's user)")
    p.add_argument("--timeout", type=int, default=None,
                   help="seconds to wait for every guest (default $QHCA_BOOT_TIMEOUT, else "
                        "180 plus 30 for each guest beyond 2)")
    p.add_argument("--trace", help="QEMU trace pattern, e.g. 'qhca_*' (goes to vmI.qemu.log)")
    p.add_argument("--keep", action="store_true", help="keep VMs running if boot fails")
    p.add_argument("--snapshot", action="store_true",
                   help="restore the guests from their state saved after an earlier boot with "
                        "--snapshot (saved now if there is none, or the image, QEMU or the "
                        "command line changed): ready in seconds (docs/migration.md)")
    p.add_argument("--rxe", action="store_true",
                   help="also give each VM a virtio-net NIC on the fabric (192.168.78.I) for rxe")
    p.add_argument("--siw", action="store_true",
                   help="--rxe's virtio-net NIC, and on it Linux siw (soft-iWARP) as the RDMA "
                        "device siw0 in each guest (siw.ko built from Debian's source: "
                        "make siw)")
    p.add_argument("--iwarp", action="store_true",
                   help="iWARP: the qhca ports are RNICs (link=iwarp) that terminate TCP "
                        "and run MPA/DDP/RDMAP; rdma_cm programs use them (docs/iwarp.md)")
    p.add_argument("--ib", action="store_true",
                   help="InfiniBand: the qhca ports are IB (link=ib), the fabric an IB switch; "
                        "a subnet manager in a guest brings them up (opensm -B)")
    p.add_argument("--pcap", action="store_true",
                   help="record each VM's fabric traffic in vmI.pcap (QEMU filter-dump)")
    p.add_argument("--seed", type=int, help="the fabric's random seed (repeatable impairments)")
    p.add_argument("--fabric-script", metavar="FILE",
                   help="a script of timed fabric events, run from the fabric's start")
    p.add_argument("--capture", metavar="FILE",
                   help="a pcapng capture of the whole fabric from its start")
    p.add_argument("--first", type=int, default=1, metavar="I",
                   help="number the guests I..I+N-1 (default 1); fabric ports 1..N carry them")
    p.add_argument("--fabric-tcp", metavar="HOST:P",
                   help="fabric port K also listens on TCP HOST:P+K-1 (HOST loopback, or any "
                        "address of --fabric-netns)")
    p.add_argument("--trunk", action="append", metavar="ADDR",
                   help="one more fabric port, connected out to another switch's port: "
                        "tcp:HOST:PORT or unix:PATH (repeatable)")
    p.add_argument("--spare-ports", type=int, default=0, metavar="K",
                   help="K more fabric ports, last, waiting for another switch's trunk")
    p.add_argument("--fabric-netns", metavar="NS",
                   help="run the fabric inside the existing network namespace NS (root)")
    p.add_argument("--netdev", choices=["fabric", "dgram", "tap"], default=None,
                   help="the qhca devices on the fabric (default), point to point over UDP "
                        "on 127.0.0.1 (dgram, 2 guests), or on taps of a bridge in a network "
                        "namespace of their own (tap, root)")
    p.add_argument("--bridge", metavar="BR",
                   help="--netdev tap on the existing Linux bridge BR (yours: a site's "
                        "network, a VXLAN to other hosts) instead of a bridge of qhca's own; "
                        "implies --netdev tap (root)")
    p.add_argument("--netns", metavar="NS",
                   help="the network namespace the bridge of --bridge is in, and the daemon "
                        "of --libvirt (default: this one)")
    p.add_argument("--libvirt", metavar="URI",
                   help="run the guests as libvirt domains of URI (e.g. qemu:///system): "
                        "virsh define and start, on the fabric or on --bridge "
                        "(docs/libvirt.md)")


def main():
    ap = argparse.ArgumentParser(prog="qhca", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("up", help="boot N VMs on a fresh fabric")
    add_up_options(p)
    p.set_defaults(fn=cmd_up)
    p = sub.add_parser("run", help="CI: up, install, set up, run a test command in a guest, "
                       "write TAP/JUnit, down; exit with the test's status (docs/ci.md)")
    add_up_options(p)
    p.add_argument("--install", action="append", metavar="DEB",
                   help="a .deb to install with apt in every guest first (with --disk); "
                        "repeatable")
    p.add_argument("--setup", action="append", metavar="CMD",
                   help="a shell command run in every guest before the test (its failure "
                        "fails the run); repeatable")
    p.add_argument("--on", type=int, metavar="I", help="the guest that runs the test (default "
                   "the first)")
    p.add_argument("--test-timeout", type=float, metavar="SECONDS",
                   help="kill the test after SECONDS: a failing 'timeout' case, exit status "
                        "124 (default: no limit)")
    p.add_argument("--tap", metavar="FILE", help="write the result as TAP")
    p.add_argument("--junit", metavar="FILE", help="write the result as JUnit XML")
    p.add_argument("--suite", metavar="NAME", help="the JUnit test suite's name")
    p.add_argument("--leave-up", action="store_true",
                   help="leave the guests running after the test (default: down)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("migrate", help="live-migrate guest I to a new QEMU process, its QPs "
                       "open and traffic running (docs/migration.md)")
    p.add_argument("index", type=int)
    p.add_argument("--timeout", type=int, default=120,
                   help="seconds the move may take (default %(default)s)")
    p.add_argument("--no-wait", action="store_true",
                   help="return when the guest runs there, without waiting for ssh")
    p.set_defaults(fn=cmd_migrate)
    p = sub.add_parser("snapshot", help="save or load a snapshot of every guest at once "
                       "(QEMU's savevm, loadvm), QPs open: 'snapshot save NAME', 'snapshot "
                       "load NAME'")
    p.add_argument("verb", choices=["save", "load"])
    p.add_argument("name")
    p.set_defaults(fn=cmd_snapshot)
    p = sub.add_parser("kill", help="SIGKILL guest I's QEMU, as a crash would")
    p.add_argument("index", type=int)
    p.set_defaults(fn=cmd_kill)
    for verb, hlp, fn in (("reset", "system reset of guest I; wait until it is ready again",
                           cmd_reset),
                          ("start", "boot a killed or stopped guest I again", cmd_start)):
        p = sub.add_parser(verb, help=hlp)
        p.add_argument("index", type=int)
        p.add_argument("--no-wait", action="store_true", help="return without waiting")
        p.add_argument("--timeout", type=int, default=boot_timeout(1),
                       help="seconds to wait for the guest (default %(default)s)")
        p.set_defaults(fn=fn)
    p = sub.add_parser("fabric", help="the fabric switch's control socket",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="PORTS: N, N-M, N,M,... or all. 'in': frames the guest sends into "
                              "the fabric;\n'out': frames the fabric sends to the guest; "
                              "neither: both.")
    p.set_defaults(fn=cmd_fabric)
    fsub = p.add_subparsers(dest="fverb", required=True)
    f = fsub.add_parser("show", help="ports, impairments and counters")
    f.add_argument("--json", action="store_true", help="print the fabric's reply as it is")
    f = fsub.add_parser("set", help="set impairments: PORTS [in|out] KEY=VALUE...",
                        description="KEYs: loss, reorder, dup, corrupt (percent: 5, 5%, 0.5%); "
                                    "delay, jitter (100 = us, 100us, 2ms, 1s); rate (Mbit/s, "
                                    "0 = unlimited); mtu (largest Ethernet payload, 0 = no "
                                    "limit)")
    f.add_argument("ports")
    f.add_argument("settings", nargs=argparse.REMAINDER, metavar="[in|out] KEY=VALUE")
    f = fsub.add_parser("clear", help="every impairment off (default: all ports)")
    f.add_argument("ports", nargs="?")
    f = fsub.add_parser("link", help="a port's link in the switch up or down")
    f.add_argument("ports")
    f.add_argument("state", choices=["up", "down"])
    fsub.add_parser("zero", help="counters to zero")
    f = fsub.add_parser("capture", help="capture FILE: pcapng of the whole fabric; capture stop")
    f.add_argument("what", nargs="+", metavar="FILE|stop")
    f = fsub.add_parser("seed", help="restart the random streams from seed N")
    f.add_argument("seed", type=int)
    f = fsub.add_parser("at", help="run a fabric command after TIME (2s, 500ms, 100us)")
    f.add_argument("time")
    f.add_argument("command", nargs=argparse.REMAINDER)
    f = fsub.add_parser("script", help="run a file of timed events ('at 2s port 2 loss=5%%')")
    f.add_argument("file")
    f = fsub.add_parser("raw", help="send any command line, print the reply")
    f.add_argument("line", nargs="+")
    p = sub.add_parser("exec", help="run a command in guest I")
    p.add_argument("index", type=int)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p.set_defaults(fn=cmd_exec)
    p = sub.add_parser("cp", help="copy files and directories into or out of a guest: "
                                  "cp SRC... I:PATH, cp I:PATH... DIR")
    p.add_argument("--max-bytes", type=size_arg, default=MAX_BYTES, metavar="SIZE",
                   help="a copy out of a guest writes at most SIZE on the host (default 1 GiB; "
                        "K, M, G, T: powers of 1024), counted in 4 KiB blocks: one for every "
                        "file, directory and link, one for every directory made, and the "
                        "blocks a file's data fills (a sparse file's holes fill none); past "
                        "it the copy fails and leaves nothing")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(fn=cmd_cp)
    p = sub.add_parser("ssh", help="interactive shell in guest I")
    p.add_argument("index", type=int)
    p.set_defaults(fn=cmd_ssh)
    p = sub.add_parser("console", help="serial console of guest I")
    p.add_argument("index", type=int)
    p.set_defaults(fn=cmd_console)
    p = sub.add_parser("device", help="guest I's qhca device's own view of its objects: "
                                      "QPs (state, PSNs, queue indices), CQs, SRQs, regions")
    p.add_argument("index", type=int)
    p.add_argument("--json", action="store_true", help="the device's JSON as it is")
    p.set_defaults(fn=cmd_device)
    p = sub.add_parser("explain", help="run an RDMA operation with tracing on and tell what "
                       "happened, step by step: story, JSON lines, SVG, capture")
    p.add_argument("--client", type=int, default=1, metavar="I",
                   help="the guest that runs CMD (default 1)")
    p.add_argument("--server", type=int, default=2, metavar="J",
                   help="the guest that runs the server (default 2)")
    p.add_argument("--server-cmd", metavar="CMD",
                   help="the server's command line (default: CMD itself for perftest and "
                   "ibv_*_pingpong, whose client then gets 192.168.77.J; none otherwise)")
    p.add_argument("--out", metavar="DIR", help="where to write (default $QHCA_RUN/explain)")
    p.add_argument("--timeout", type=int, default=120, metavar="S",
                   help="the client's time limit (default 120 s)")
    p.add_argument("--alone", action="store_true",
                   help="run CMD in the client guest only, no server (two processes of one "
                   "guest, say), even for a program that pairs itself")
    p.add_argument("--render", metavar="DIR", help="only render DIR, written before, again")
    p.add_argument("--all", action="store_true",
                   help="also the steps of the kernel's own QPs (rdma_cm's and the SM's MADs, "
                   "IPoIB), which the story leaves out by default")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p.set_defaults(fn=cmd_explain)
    p = sub.add_parser("link", help="set guest I's qhca port link up or down")
    p.add_argument("index", type=int)
    p.add_argument("state", choices=["up", "down"])
    p.set_defaults(fn=cmd_link)
    p = sub.add_parser("status", help="what is running")
    p.set_defaults(fn=cmd_status)
    p = sub.add_parser("paths", help="print the cache and run directories in use")
    p.set_defaults(fn=cmd_paths)
    p = sub.add_parser("down", help="stop the VMs and the fabric")
    p.set_defaults(fn=cmd_down)
    args = ap.parse_args()
    try:
        code = args.fn(args) or 0
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (qhca fabric show | head): quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)
