# SPDX-License-Identifier: GPL-2.0-or-later
"""Guest side of test-pyverbs.sh: run rdma-core's verbs test suite (Debian's python3-pyverbs,
unchanged) module by module on one device, each module under a time limit, and print one
JSON line per module: ran, passed, failed, errors, skipped, the test that hung if any, and
the reasons of the skips.

usage: python3 - DEVICE [SECONDS_PER_MODULE [MODULE,...]] < pyverbs_run.py

On an iWARP device (an RNIC: Linux siw, qhca's link=iwarp) the suite runs with GID 0 (an
iWARP port has one GID, from its MAC), and the tests of IWARP_NOT are not run: each asks
for what iWARP does not have, and is counted as a skip with its reason.
"""
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

SRC = "/usr/share/doc/rdma-core/tests"
WORK = "/tmp/pyverbs"
RESULT = re.compile(r"\.\.\. (ok|FAIL|ERROR|skipped '(.*)'|expected failure|unexpected success)$")
STARTED = re.compile(r"^(test_\w+) \(")


def unpack():
    """The suite as Debian ships it (some modules gzipped): a runnable copy in /tmp."""
    shutil.rmtree(WORK, ignore_errors=True)
    shutil.copytree(SRC, os.path.join(WORK, "tests"))
    for gz in glob.glob(os.path.join(WORK, "tests", "*.py.gz")):
        with gzip.open(gz, "rb") as f, open(gz[:-3], "wb") as out:
            out.write(f.read())
        os.unlink(gz)


# Tests that ask for what iWARP does not have (rdma-core 56's test_rdmacm), with the reason
# (the first two fail alike on siw; the READ passes there, siw not checking the sink's
# rights). Skipped on an iWARP device, and counted as skips.
IWARP_NOT = {
    "test_rdmacm.CMTestCase.test_rdmacm_async_traffic":
        "iWARP: no ACK timeout to set (rdma_cm's RDMA_OPTION_ID_ACK_TIMEOUT is IB/RoCE's, TCP "
        "retransmits on iWARP; the test checks the QP's timeout after accept, and skips irdma)",
    "test_rdmacm.CMTestCase.test_rdmacm_async_traffic_external_qp":
        "iWARP: no CONNECT_RESPONSE event (the kernel's rdma_cm reports ESTABLISHED as the "
        "MPA reply comes; an external QP cannot be moved to RTR/RTS by hand)",
    "test_rdmacm.CMTestCase.test_rdmacm_async_read":
        "iWARP: a READ's sink needs remote write rights (RFC 5040: the Read Response is "
        "placed by the sink's STag; Linux's rdma_rw adds them on iWARP); rdma_reg_read gives "
        "local write and remote read only, so an RNIC ends the connection (siw does not check)",
}


def is_iwarp(dev):
    try:
        return "RNIC" in open("/sys/class/infiniband/%s/node_type" % dev).read()
    except OSError:
        return False


def roce_v2_ipv4_gid(dev):
    """The index of the port's RoCE v2 GID of an IPv4 address."""
    base = "/sys/class/infiniband/%s/ports/1" % dev
    for path in sorted(glob.glob(base + "/gids/*"), key=lambda p: int(os.path.basename(p))):
        i = os.path.basename(path)
        try:
            gid = open(path).read().strip()
            kind = open(base + "/gid_attrs/types/" + i).read().strip()
        except OSError:
            continue
        if gid.startswith("0000:0000:0000:0000:0000:ffff:") and "v2" in kind:
            return int(i)
    raise SystemExit("%s: no RoCE v2 GID of an IPv4 address" % dev)


def module_tests(module):
    """The module's tests as unittest names (Class.test_name), in file order."""
    names, cls = [], None
    with open(os.path.join(WORK, "tests", module + ".py")) as f:
        for line in f:
            m = re.match(r"class (\w+)\(", line)
            if m:
                cls = m.group(1)
            m = re.match(r"    def (test_\w+)\(", line)
            if m and cls:
                names.append("%s.%s" % (cls, m.group(1)))
    return names


def run_module(dev, gid, module, limit, leave_out=None):
    """LEAVE_OUT: {test name: reason} of this module not to run, counted as skips."""
    targets = ["tests." + module]
    if leave_out:
        present = module_tests(module)
        leave_out = {k: v for k, v in leave_out.items() if k.split(".", 1)[1] in present}
        targets = ["tests.%s.%s" % (module, t) for t in present
                   if "%s.%s" % (module, t) not in leave_out]
    cmd = ["python3", "tests/run_tests.py", "--dev", dev, "--port", "1", "--gid", str(gid),
           "-v"] + targets
    try:
        p = subprocess.run(cmd, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=limit)
        out, hung, status = p.stdout.decode(errors="replace"), None, p.returncode
    except subprocess.TimeoutExpired as ex:
        out = (ex.stdout or b"").decode(errors="replace")
        hung, status = "?", None
    res = {"module": module, "ran": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0,
           "hung": None, "skips": [], "failures": []}
    current = None
    for line in out.splitlines():
        m = STARTED.match(line)
        if m:
            current = m.group(1)
        m = RESULT.search(line)
        if not m:
            continue
        res["ran"] += 1
        word = m.group(1)
        if word == "ok" or word == "expected failure":
            res["passed"] += 1
        elif word.startswith("skipped"):
            res["skipped"] += 1
            res["skips"].append("%s: %s" % (current, m.group(2)))
        elif word == "ERROR":
            res["errors"] += 1
            res["failures"].append(current)
        else:
            res["failed"] += 1
            res["failures"].append(current)
        current = None
    # Left out: skips, never counted as run
    res["left_out"] = len(leave_out or {})
    for name, why in sorted((leave_out or {}).items()):
        res["skipped"] += 1
        res["skips"].append("%s: %s (left out)" % (name.split(".")[-1], why))
    if hung:
        res["hung"] = current or hung
    # A module that cannot even be imported reports one error and no test line; a run that
    # failed (a crash, a signal, an import error) with no failure counted is one error too:
    # its exit status is never lost.
    if not hung and status != 0 and res["failed"] + res["errors"] == 0:
        res["errors"] += 1
        res["failures"].append("(module: exit status %s)" % status)
    with open("/tmp/pyverbs-%s-%s.log" % (dev, module), "w") as f:
        f.write(out)
    return res


def main():
    dev = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    unpack()
    iwarp = is_iwarp(dev)
    gid = 0 if iwarp else roce_v2_ipv4_gid(dev)
    modules = sorted(os.path.basename(p)[:-3]
                     for p in glob.glob(os.path.join(WORK, "tests", "test_*.py")))
    if len(sys.argv) > 3:
        wanted = sys.argv[3].split(",")
        missing = [m for m in wanted if m not in modules]
        if missing:
            raise SystemExit("no module %s in the suite" % ", ".join(missing))
        modules = wanted
    for module in modules:
        leave_out = {k: v for k, v in IWARP_NOT.items()
                     if iwarp and k.startswith(module + ".")}
        print(json.dumps(run_module(dev, gid, module, limit, leave_out)), flush=True)


if __name__ == "__main__":
    main()
