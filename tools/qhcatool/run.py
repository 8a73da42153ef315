# SPDX-License-Identifier: GPL-2.0-or-later
"""'qhca run': one command for CI (docs/ci.md). Boot the guests as 'up' does (any of its
options: flavour, kernel, disk image, shares), install packages into them, run setup
commands in each, run the test command in one guest, write its result as TAP and JUnit
XML, take everything down and exit with the test's status.

The test's output is read as TAP when it has TAP lines ("ok N - name", "not ok N - name",
"# SKIP" directives): each becomes a test case of its own. Without them the command is one
test case, passed when it exits 0. Either way the exit status is the command's (1 when it
passed but a TAP line says "not ok").
"""
import os
import re
import shlex
import subprocess
import sys
import time
from xml.sax.saxutils import escape, quoteattr

from .common import die, info, load_state
from .files import copy_in
from .guest import ssh_base
from .vms import cmd_down, cmd_up

# TAP's result lines are lower case ("OK" alone is unittest's summary); its directives not.
TAP_RE = re.compile(r"^(not )?ok\b(?:\s+\d+)?(?:\s*-)?\s*(.*?)\s*(?:#\s*((?i:SKIP|TODO))\b\s*(.*))?$")


def tap_cases(output):
    """The TAP lines of OUTPUT as (name, 'pass'|'fail'|'skip', reason), in order."""
    cases = []
    for line in output.splitlines():
        m = TAP_RE.match(line.strip())
        if not m:
            continue
        failed, name, directive, reason = m.groups()
        if directive and directive.upper() == "SKIP":
            cases.append((name or "test %d" % (len(cases) + 1), "skip", reason or ""))
        else:
            cases.append((name or "test %d" % (len(cases) + 1), "fail" if failed else "pass",
                          ""))
    return cases


def write_tap(path, cases):
    with open(path, "w") as f:
        f.write("1..%d\n" % len(cases))
        for k, (name, result, reason) in enumerate(cases, 1):
            if result == "skip":
                f.write("ok %d - %s # SKIP %s\n" % (k, name, reason))
            else:
                f.write("%s %d - %s\n" % ("ok" if result == "pass" else "not ok", k, name))


def write_junit(path, suite, cases, output, seconds):
    fails = sum(1 for c in cases if c[1] == "fail")
    skips = sum(1 for c in cases if c[1] == "skip")
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        f.write('<testsuites tests="%d" failures="%d" skipped="%d" time="%.1f">\n'
                % (len(cases), fails, skips, seconds))
        f.write('  <testsuite name=%s tests="%d" failures="%d" skipped="%d" time="%.1f">\n'
                % (quoteattr(suite), len(cases), fails, skips, seconds))
        for name, result, reason in cases:
            f.write('    <testcase classname=%s name=%s>' % (quoteattr(suite), quoteattr(name)))
            if result == "fail":
                f.write('<failure message="failed"/>')
            elif result == "skip":
                f.write('<skipped message=%s/>' % quoteattr(reason))
            f.write('</testcase>\n')
        f.write('    <system-out>%s</system-out>\n' % escape(output[-1000000:]))
        f.write('  </testsuite>\n</testsuites>\n')


def guest_sh(state, i, cmd, stream):
    """Run CMD in guest I; with STREAM its output goes to our stdout as it comes. Returns
    (status, output)."""
    p = subprocess.Popen(ssh_base(state, i) + ["--", cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    chunks = []
    for line in iter(p.stdout.readline, b""):
        chunks.append(line)
        if stream:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
    return p.wait(), b"".join(chunks).decode("utf-8", "replace")


def install(state, indexes, debs):
    """Copy the packages DEBS into each guest and install them with apt (and what they need
    from the guest's own repositories, which a disk guest may have)."""
    names = [os.path.basename(d) for d in debs]
    for i in indexes:
        info("vm%d: installing %s" % (i, " ".join(names)))
        guest_sh(state, i, "mkdir -p /root/qhca-run", False)
        try:
            copy_in(state, list(debs), i, "/root/qhca-run/")
        except SystemExit:
            return "vm%d: copying the packages in failed" % i
        rc, out = guest_sh(state, i, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                           + " ".join(shlex.quote("/root/qhca-run/" + n) for n in names), False)
        if rc:
            sys.stderr.write(out[-4000:])
            return "vm%d: apt-get install failed (status %d)" % (i, rc)
    return None


def cmd_run(args):
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        die("usage: qhca run [up options] [--install DEB]... [--setup CMD]... "
            "[--tap FILE] [--junit FILE] -- CMD...")
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
    suite = args.suite or "qhca run"
    t0 = time.time()
    rc, output, cases = 1, "", []
    if cmd_up(args):
        output = "qhca up failed (see above)"
        cases = [("qhca up", "fail", "")]
    else:
        try:
            state = load_state()
            indexes = [vm["index"] for vm in state["vms"]]
            on = args.on if args.on is not None else indexes[0]
            if on not in indexes:
                die("--on %d: the guests are %s" % (on, ", ".join(map(str, indexes))))
            err = install(state, indexes, debs) if debs else None
            for setup in args.setup or []:
                if err:
                    break
                for i in indexes:
                    s, out = guest_sh(state, i, setup, False)
                    if s:
                        sys.stderr.write(out[-4000:])
                        err = "vm%d: setup '%s' failed (status %d)" % (i, setup, s)
                        break
            if err:
                info(err)
                output, cases = err, [("setup", "fail", "")]
            else:
                info("vm%d: %s" % (on, test))
                rc, output = guest_sh(state, on, test, True)
                cases = tap_cases(output)
                if not cases:
                    cases = [(test, "pass" if rc == 0 else "fail", "")]
                elif rc == 0 and any(c[1] == "fail" for c in cases):
                    rc = 1
                info("vm%d: %s: status %d; %d passed, %d failed, %d skipped" % (
                    on, test, rc, sum(c[1] == "pass" for c in cases),
                    sum(c[1] == "fail" for c in cases), sum(c[1] == "skip" for c in cases)))
        finally:
            if not args.leave_up:
                cmd_down(args)
    if args.tap:
        write_tap(args.tap, cases)
    if args.junit:
        write_junit(args.junit, suite, cases, output, time.time() - t0)
    if cases and cases[0][0] in ("qhca up", "setup") and cases[0][1] == "fail":
        return 1
    return rc
