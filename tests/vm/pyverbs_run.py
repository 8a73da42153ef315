# SPDX-License-Identifier: GPL-2.0-or-later
"""Guest side of test-pyverbs.sh: run rdma-core's verbs test suite (Debian's python3-pyverbs,
unchanged) module by module on one device, each module under a time limit, and print one
JSON line per module: ran, passed, failed, errors, skipped, the test that hung if any, and
the reasons of the skips.

usage: python3 - DEVICE [SECONDS_PER_MODULE] < pyverbs_run.py
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


def run_module(dev, gid, module, limit):
    cmd = ["python3", "tests/run_tests.py", "--dev", dev, "--port", "1", "--gid", str(gid),
           "-v", "tests." + module]
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
    gid = roce_v2_ipv4_gid(dev)
    modules = sorted(os.path.basename(p)[:-3]
                     for p in glob.glob(os.path.join(WORK, "tests", "test_*.py")))
    for module in modules:
        print(json.dumps(run_module(dev, gid, module, limit)), flush=True)


if __name__ == "__main__":
    main()
