# SPDX-License-Identifier: GPL-2.0-or-later
"""'qhca run': one command for CI (docs/ci.md). Boot the guests as 'up' does (any of its
options: flavour, kernel, disk image, shares), install packages into them, run setup
commands in each, run the test command in one guest, write its result as TAP and JUnit
XML, take everything down and exit with the test's status.

The test's output is read as TAP (tap.py) when it has TAP lines ("ok N - name", "not ok N -
name", "# SKIP" and "# TODO" directives, the plan "1..N", "Bail out!"): each test line
becomes a test case of its own. Without them the command is one test case, passed when it
exits 0. A run that is red never reports green: a status other than 0 with no failed case,
a plan that does not match the results, a bail out, a test killed after --test-timeout, a
run cancelled by SIGTERM, SIGHUP or SIGINT (CI cancelling the job), an 'up' or a setup step
that failed, each is a failing case of its own. The exit status is the command's (1 when it
exited 0 but a case failed; 124 after --test-timeout; 128+N after signal N).

The guest's output is read in blocks, never whole: a bounded tail of it is kept for JUnit,
each line cut to a length for the TAP parser; on a terminal, its control characters are
taken out before it is shown.
"""
import concurrent.futures
import os
import select
import shlex
import signal
import subprocess
import sys
import time

from .common import die, info, load_state
from .files import copy_in
from .guest import ssh_base
from .tap import Capture, TtyFilter, counts, verdict, write_junit, write_tap
from .vms import cmd_down, cmd_up

# With --leave-up the test's shell writes its process group here first, so that a test killed
# after --test-timeout or a cancellation does not go on in the guests left running: the ssh
# server starts each session in a process group of its own, and the group is killed.
REMOTE_PGID = "/tmp/qhca-run-test.pgid"


class Cancelled(BaseException):
    """Raised in the main thread by SIGTERM, SIGHUP or SIGINT: the job was cancelled."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class Signals:
    """While a run goes on, the first SIGTERM, SIGHUP or SIGINT raises Cancelled: the run
    writes its TAP and JUnit with a failing 'cancelled' case and takes the guests down. After
    the first, and once defer() is called (the way down), a signal is only noted, so that
    nothing cuts the way down short."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

    def __init__(self):
        self.got = None
        self.raising = True
        self.old = {s: signal.signal(s, self._handler) for s in self.SIGNALS}

    def _handler(self, signum, frame):
        if self.got is None:
            self.got = signum
            if self.raising:
                self.raising = False
                raise Cancelled(signum)

    def defer(self):
        self.raising = False

    def restore(self):
        for s, h in self.old.items():
            signal.signal(s, h)


def echo(data, tty, out=None):
    """Show DATA, guest output, on our stdout (filtered by TTY when that is a terminal).
    Returns False when stdout is gone (a closed pipe): the run goes on without showing."""
    out = out or sys.stdout.buffer
    try:
        out.write(tty(data) if tty else data)
        out.flush()
        return True
    except (BrokenPipeError, ValueError):
        # As cli.py does: the reader went away; later writes go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False


def show_tail(text):
    """The end of a failed step's output, on stderr (its controls out on a terminal)."""
    data = text[-4000:].encode("utf-8", "replace")
    if sys.stderr.isatty():
        f = TtyFilter()
        data = f(data) + f.flush()
    sys.stderr.buffer.write(data if data.endswith(b"\n") or not data else data + b"\n")
    sys.stderr.flush()


def guest_sh(state, i, cmd, stream=False, timeout=None, capture=None):
    """Run CMD in guest I over ssh, its stdout and stderr read in blocks into CAPTURE (a
    tap.Capture: a bounded tail, TAP parsed line by line); with STREAM also shown on our
    stdout as it comes. After TIMEOUT seconds ssh is killed. Returns (status, capture); the
    status is None after the timeout. Whatever ends this (a signal too), ssh does not stay."""
    capture = capture if capture is not None else Capture()
    p = subprocess.Popen(ssh_base(state, i) + ["--", cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    tty = TtyFilter() if stream and sys.stdout.isatty() else None
    deadline = time.monotonic() + timeout if timeout else None
    fd = p.stdout.fileno()
    try:
        while True:
            wait = None
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    return None, capture
            if not select.select([fd], [], [], wait)[0]:
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            capture.feed(data)
            if stream:
                stream = echo(data, tty)
        if stream and tty:
            echo(tty.flush(), None)
        try:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            return p.wait(wait), capture
        except subprocess.TimeoutExpired:
            return None, capture
    finally:
        capture.close()
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()


def kill_remote(state, i):
    """Kill the test's process group in guest I (its number in REMOTE_PGID). 'kill -9 -N':
    busybox's kill (qhca's image) takes no '--'."""
    try:
        subprocess.run(ssh_base(state, i) + [
            "--", 'p=$(cat %s) && [ "$p" -gt 1 ] && kill -9 "-$p"' % REMOTE_PGID],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pass


def install(state, indexes, debs):
    """Copy the packages DEBS into each guest and install them with apt (and what they need
    from the guest's own repositories, which a disk guest may have), in all the guests at
    once (DKMS compiles for minutes in each). Returns None, or what failed and its output."""
    names = [os.path.basename(d) for d in debs]

    def one(i):
        info("vm%d: installing %s" % (i, " ".join(names)))
        guest_sh(state, i, "mkdir -p /root/qhca-run")
        try:
            copy_in(state, list(debs), i, "/root/qhca-run/")
        except SystemExit:
            return "vm%d: copying the packages in failed" % i, ""
        rc, out = guest_sh(state, i, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                           + " ".join(shlex.quote("/root/qhca-run/" + n) for n in names))
        if rc:
            return "vm%d: apt-get install failed (status %d)" % (i, rc), out.text()
        info("vm%d: installed" % i)
        return None

    # Not 'with': a signal must not wait for apt in the guests; 'down' ends their ssh.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(indexes))
    try:
        results = list(pool.map(one, indexes))
    finally:
        pool.shutdown(wait=False)
    return next((r for r in results if r), None)


class Outcome:
    """What a run has come to so far: kept when a signal cuts it short."""

    def __init__(self):
        self.cases = []
        self.rc = 1
        self.output = ""
        self.phase = "qhca up"
        self.capture = None	# the test's, once it runs
        self.where = None	# (state, guest) of the test, once it runs
        self.up = False		# the guests are this run's to take down


def in_guests(args, out, debs, test, timeout):
    """Install, set up and run the test in the guests 'up' booted; the result in OUT."""
    state = load_state()
    indexes = [vm["index"] for vm in state["vms"]]
    on = args.on if args.on is not None else indexes[0]
    out.phase = "install"
    fail = install(state, indexes, debs) if debs else None
    if not fail:
        out.phase = "setup"
        for setup in args.setup or []:
            for i in indexes:
                s, cap = guest_sh(state, i, setup)
                if s:
                    fail = "vm%d: setup '%s' failed (status %d)" % (i, setup, s), cap.text()
                    break
            if fail:
                break
    if fail:	# a failing case "install" or "setup"; the test does not run
        info(fail[0])
        if fail[1]:
            show_tail(fail[1])
        out.output = fail[0] + "\n" + fail[1]
        out.cases, out.rc = [(out.phase, "fail", fail[0])], 1
        return
    info("vm%d: %s" % (on, test))
    out.phase = "the test"
    out.capture = Capture()
    out.where = state, on
    remote = test
    if args.leave_up:
        remote = "cut -d ' ' -f 5 /proc/$$/stat > %s 2> /dev/null\n%s" % (REMOTE_PGID, test)
    rc, _ = guest_sh(state, on, remote, stream=True, timeout=timeout, capture=out.capture)
    out.phase = "after the test"
    if rc is None:
        info("vm%d: %s: killed after --test-timeout %g s" % (on, test, timeout))
        if args.leave_up:
            kill_remote(state, on)
        out.cases, out.rc = verdict(out.capture.parser, 124, test, interrupted=(
            "timeout", "fail", "killed after --test-timeout %g s" % timeout))
    else:
        out.cases, out.rc = verdict(out.capture.parser, rc, test)
    p, f, s = counts(out.cases)
    info("vm%d: %s: status %d; %d passed, %d failed, %d skipped" % (
        on, test, out.rc, p, f, s))


def ours(t0):
    """Whether the state file is of guests this run began to boot (since T0)."""
    state = load_state()
    return bool(state) and state.get("started", 0) >= t0


def cmd_run(args):
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        die("usage: qhca run [up options] [--install DEB]... [--setup CMD]... [--on I] "
            "[--test-timeout SECONDS] [--tap FILE] [--junit FILE] -- CMD...")
    test = cmd[0] if len(cmd) == 1 else " ".join(shlex.quote(a) for a in cmd)
    debs = [os.path.abspath(d) for d in args.install or []]
    for d in debs:
        if not d.endswith(".deb") or not os.path.isfile(d):
            die("--install %s: no such .deb file" % d)
    if debs and not args.disk:
        die("--install needs --disk: qhca's own image has no package manager")
    for path in (args.tap, args.junit):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            die("%s: its directory does not exist" % path)
    if args.on is not None and not args.first <= args.on <= args.first + args.n - 1:
        die("--on %d: the guests are %s (--first %d, -n %d)" % (
            args.on, "%d..%d" % (args.first, args.first + args.n - 1) if args.n > 1
            else str(args.first), args.first, args.n))
    timeout = getattr(args, "test_timeout", None)
    if timeout is not None and not timeout > 0:
        die("--test-timeout must be a number of seconds above 0")
    suite = args.suite or "qhca run"
    t0 = time.time()
    out = Outcome()
    sig = Signals()
    try:
        try:
            try:
                status = cmd_up(args)
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else 1
            if status:
                out.cases = [("qhca up", "fail", "qhca up failed (status %d)" % status)]
                out.output = "qhca up failed (status %d): no test ran" % status
                info("qhca up failed: no test ran")
            else:
                out.up = True
                in_guests(args, out, debs, test, timeout)
        except Cancelled as c:
            name = signal.Signals(c.signum).name
            info("%s: cancelled during %s; down, then the reports" % (name, out.phase))
            why = ("cancelled", "fail", "qhca run got %s during %s" % (name, out.phase))
            if out.capture is not None and out.phase == "the test":
                out.cases, _ = verdict(out.capture.parser, 0, test, interrupted=why)
                if args.leave_up:
                    kill_remote(*out.where)
            else:
                out.cases = out.cases + [why]
            out.rc = 128 + c.signum
            out.up = out.up or ours(t0)
        finally:
            sig.defer()
            out.phase = "qhca down"
            if out.up and not args.leave_up:
                try:
                    cmd_down(args)
                except SystemExit:
                    out.cases.append(("qhca down", "fail", "qhca down failed"))
                    out.rc = out.rc or 1
    finally:
        sig.restore()
    if sig.got and not any(c[0] == "cancelled" for c in out.cases):
        out.cases.append(("cancelled", "fail", "qhca run got %s during %s" % (
            signal.Signals(sig.got).name, out.phase)))
        out.rc = 128 + sig.got
    output = out.capture.text() if out.capture is not None else out.output
    if args.tap:
        write_tap(args.tap, out.cases)
    if args.junit:
        write_junit(args.junit, suite, out.cases, output, time.time() - t0)
    return out.rc
