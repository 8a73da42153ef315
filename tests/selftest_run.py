#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Self-test of what 'qhca run' makes of a test's output (tools/qhcatool/tap.py), no VM
needed: TAP parsing (test lines, directives, the plan, Bail out!), the verdict of a run (a red
run never reports green), the bounded capture of the output, the terminal filter, and TAP
and JUnit files that parse whatever the guest printed. Run by tests/selftest.sh; prints one
"ok - selftest: run: ..." or "not ok - ..." line a check, and exits non-zero after a failure.
"""
import os
import sys
import tempfile
import traceback
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from qhcatool import tap  # noqa: E402

bad = 0


def check(name, fn):
    global bad
    try:
        fn()
        print("ok - selftest: run: %s" % name)
    except Exception:	# an assertion, or anything the code under test raised
        bad += 1
        print("not ok - selftest: run: %s" % name)
        for line in traceback.format_exc().splitlines():
            print("#   " + line)


def parse(text):
    p = tap.TapParser()
    for line in text.split("\n"):
        p.line(line)
    return p


def run_verdict(text, rc, test="t"):
    return tap.verdict(parse(text), rc, test)


def eq(got, want):
    assert got == want, "got %r, want %r" % (got, want)


# ---- TAP test lines
def t_lines():
    p = parse("ok 1 - fine\nnot ok 2 - broken\nok 3\nok\nnot ok - nameless dash\nok 6 plain")
    eq(p.cases, [("fine", "pass", ""), ("broken", "fail", "not ok"), ("test 3", "pass", ""),
                 ("test 4", "pass", ""), ("nameless dash", "fail", "not ok"),
                 ("plain", "pass", "")])


def t_not_tap():
    # What the old pattern took for TAP: "ok" without a number or "-" after it, "okay",
    # unittest's "OK", an indented (subtest's, YAML) line, a comment.
    p = parse("ok so far\nokay\nOK\nok: done\n  ok 1 - sub\n    not ok 2 - sub\n# ok 1 - x\n"
              "not okay\nok 12abc\nnot ok")
    eq(p.cases, [("test 1", "fail", "not ok")])


def t_directives():
    p = parse("ok 1 - a # SKIP no kvm\nok 2 - b # skipped: later\nnot ok 3 - c # TODO bug 5\n"
              "ok 4 - d # TODO fixed meanwhile\nnot ok 5 - e # SKIP nope\n"
              "ok 6 - issue \\# 7 # todo\nok 7 - f #SKIP\nok 8 - g # TODO: not a directive\n"
              "ok 9 # SKIP")
    eq(p.cases, [("a", "skip", "no kvm"), ("b", "skip", "later"), ("c", "todo", "bug 5"),
                 ("d", "pass", ""), ("e", "fail", "not ok # SKIP nope"),
                 ("issue # 7", "pass", ""), ("f", "skip", ""),
                 ("g # TODO: not a directive", "pass", ""), ("test 9", "skip", "")])


def t_todo_not_failure():
    cases, rc = run_verdict("1..2\nok 1 - a\nnot ok 2 - b # TODO later", 0)
    eq(rc, 0)
    eq(tap.counts(cases), (1, 0, 1))


def t_skip_counts():
    cases, rc = run_verdict("ok 1 - a\nnot ok 2 - b\nok 3 - c # SKIP not here", 0)
    eq(rc, 1)
    eq(tap.counts(cases), (1, 1, 1))


# ---- the verdict: a red run never reports green
def t_rc_only_ok():
    cases, rc = run_verdict("ok 1 - fine\nok 2 - also", 1)
    eq(rc, 1)
    eq(cases[-1][:2], ("exit status 1", "fail"))
    eq(tap.counts(cases), (2, 1, 0))


def t_rc_with_failure():
    cases, rc = run_verdict("ok 1 - fine\nnot ok 2 - broken", 3)
    eq(rc, 3)
    eq(len(cases), 2)


def t_plan_short():
    cases, rc = run_verdict("1..5\nok 1 - a\nok 2 - b", 0)
    eq(rc, 1)
    eq(cases[-1][:2], ("plan 1..5 but 2 results", "fail"))


def t_plan_late_and_long():
    eq(run_verdict("ok 1\nok 2\n1..2", 0)[1], 0)
    cases, rc = run_verdict("1..1\nok 1\nok 2", 0)
    eq((rc, cases[-1][:2]), (1, ("plan 1..1 but 2 results", "fail")))


def t_plan_only_first():
    cases, rc = run_verdict("1..2\nok 1\nok 2\n1..7", 0)
    eq((rc, len(cases)), (0, 2))


def t_bail_out():
    cases, rc = run_verdict("1..3\nok 1 - a\nBail out! no database\nok 2 - after", 0)
    eq(rc, 1)
    eq([c[:2] for c in cases], [("a", "pass"), ("bail out: no database", "fail")])


def t_skip_all():
    cases, rc = run_verdict("1..0 # SKIP no device", 0, test="suite")
    eq((cases, rc), ([("suite", "skip", "no device")], 0))


def t_no_tap():
    eq(run_verdict("hello\nOK", 0, test="cmd"), ([("cmd", "pass", "")], 0))
    eq(run_verdict("about to fail", 3, test="cmd"), ([("cmd", "fail", "exit status 3")], 3))


def t_interrupted():
    cases, rc = tap.verdict(parse("1..4\nok 1 - a"), 124, "t",
                            interrupted=("timeout", "fail", "killed"))
    eq(rc, 124)
    eq([c[:2] for c in cases], [("a", "pass"), ("timeout", "fail")])


# ---- the capture: bounded, line by line
def t_capture_lines_across_blocks():
    c = tap.Capture()
    for b in (b"o", b"k 1 - spl", b"it\nnot ok 2 - b\r\n", b"ok 3 - last, no newline"):
        c.feed(b)
    c.close()
    eq([x[:2] for x in c.parser.cases], [("split", "pass"), ("b", "fail"),
                                         ("last, no newline", "pass")])


def t_capture_bounded():
    c = tap.Capture(keep=1000, line_max=64)
    c.feed(b"ok 1 - " + b"x" * 100000 + b"\n")	# one long line: cut for the parser
    for _ in range(100):
        c.feed(b"y" * 999 + b"\n")
    c.feed(b"not ok 2 - end\n")
    c.close()
    assert len(c.tail) <= 2000, len(c.tail)
    assert len(c.pending) == 0
    eq(c.parser.cases, [("x" * 57, "pass", ""), ("end", "fail", "not ok")])
    text = c.text()
    assert text.startswith("[qhca run: the first "), text[:80]
    assert text.endswith("not ok 2 - end\n")
    assert len(text.encode()) < 1100


def t_capture_line_no_newline():
    c = tap.Capture(keep=100, line_max=10)
    for _ in range(1000):
        c.feed(b"z" * 1000)	# no newline ever: nothing grows
    assert len(c.pending) <= 10 and len(c.tail) <= 200


def t_capture_bad_utf8():
    c = tap.Capture()
    c.feed(b"ok 1 - caf\xc3\n\xff\xfe\n")
    c.close()
    eq(c.parser.cases, [("caf\ufffd", "pass", "")])


# ---- the files: valid whatever the guest printed
NASTY = "esc \x1b[31mred\x1b[0m nul \x00 bel \x07 bs \x08 vt \x0b ff \x0c us \x1f " \
        "lone \ud800 fffe \ufffe ffff \uffff amp & lt < gt > q \" ' ]]> del \x7f c1 \x9b end"


def junit(cases, output, suite="s\x1b\x00"):
    fd, path = tempfile.mkstemp(suffix=".xml")
    os.close(fd)
    try:
        tap.write_junit(path, suite, cases, output, 1.5)
        return ET.parse(path).getroot(), open(path, "rb").read()
    finally:
        os.unlink(path)


def t_junit_control_chars():
    root, raw = junit([(NASTY, "fail", NASTY), ("n\nl", "skip", NASTY), ("t", "todo", "x")],
                      NASTY + "\n" + "\x00" * 10)
    s = root.find("testsuite")
    eq((s.get("tests"), s.get("failures"), s.get("skipped")), ("3", "1", "2"))
    out = s.find("system-out").text
    assert "\\x1b[31mred" in out and "\\x00" in out and "\\x07" in out and "\\ud800" in out, out
    assert "amp & lt < gt >" in out
    names = [c.get("name") for c in s.findall("testcase")]
    assert all("\x1b" not in n and "\n" not in n and "\x00" not in n for n in names), names
    eq(names[1], "n l")
    assert b"\x1b" not in raw and b"\x00" not in raw and b"\x07" not in raw


def t_junit_from_capture():
    c = tap.Capture()
    c.feed(b"\x1b[1mok 1 - bold\x1b[0m\n\x00\x07ok 2 - a\x1b]0;title\x07\n\xed\xa0\x80\n")
    c.close()
    cases, rc = tap.verdict(c.parser, 0, "t")
    root, _ = junit(cases, c.text())
    eq(len(root.find("testsuite").findall("testcase")), len(cases))


def t_tap_file():
    fd, path = tempfile.mkstemp(suffix=".tap")
    os.close(fd)
    try:
        tap.write_tap(path, [("a\nok 9 - fake # SKIP", "fail", ""), ("b\x1b[2J", "skip", "r\n#x"),
                             ("c", "todo", "later"), ("d", "pass", "")])
        text = open(path, encoding="utf-8").read()
    finally:
        os.unlink(path)
    lines = text.splitlines()
    eq(len(lines), 6)
    assert "\x1b" not in text, text
    back = parse(text)	# it reads back as written: no line forged by a name
    eq(back.plan, 4)
    eq([c[1] for c in back.cases], ["fail", "skip", "todo", "pass"])
    eq(back.cases[0][0], "a ok 9 - fake # SKIP")


def t_tty_filter():
    f = tap.TtyFilter()
    got = f(b"a\x1b[31mb\x07c\rd\te\nf\x00g\x7fh\xc2") + f(b"\x9bi\xc3\xa9") + f.flush()
    eq(got, b"a[31mbcd\te\nfgh" + b"i\xc3\xa9")


def t_libvirt_domain_xml_quotes_every_value():
    """What reaches the domain XML (paths, the bridge, the kernel command line, QEMU
    arguments) cannot make it say anything else: it parses, and every value reads back."""
    import importlib
    import xml.dom.minidom
    odd = "/tmp/a'b\"c<d>&e]]>f"
    os.environ["QHCA_RUN"] = odd + "/run"
    os.environ["QHCA_DEVICE_PROPS"] = "tx-batch=off,mtu=0x400"
    from qhcatool import common, libvirt
    importlib.reload(common)
    importlib.reload(libvirt)
    for bridge, fabric in ((odd, None), (None, "stream,id=fabric,addr.path=" + odd)):
        x = libvirt.domain_xml("n" + odd, 3, 1024, 2222, image=(odd + "/k", odd + "/i"),
                               cmdline="qhcavm=3 " + odd, bridge=bridge, fabric_netdev=fabric,
                               extra=["-trace", odd])
        dom = xml.dom.minidom.parseString(x)
        eq(dom.getElementsByTagName("kernel")[0].firstChild.data, odd + "/k")
        eq(dom.getElementsByTagName("cmdline")[0].firstChild.data, "qhcavm=3 " + odd)
        args = [a.getAttribute("value") for a in dom.getElementsByTagName("qemu:arg")]
        assert ["-trace", odd] in [args[k:k + 2] for k in range(len(args))], args
        assert "unix:%s/run/vm3.qmp,server=on,wait=off" % odd in args
        eq(dom.getElementsByTagName("qhca:run")[0].getAttribute("dir"),
           os.path.realpath(odd + "/run"))
        if bridge:
            eq(dom.getElementsByTagName("source")[-1].getAttribute("bridge"), odd)
            props = {p.getAttribute("name"): (p.getAttribute("type"), p.getAttribute("value"))
                     for p in dom.getElementsByTagName("qemu:property")}
            eq(props, {"tx-batch": ("bool", "false"), "mtu": ("unsigned", "1024")})
        else:
            assert "stream,id=fabric,addr.path=" + odd in args
            assert any(a.startswith("qhca,id=qhca0,netdev=fabric,mac=52:54:00:51:48:03,")
                       and a.endswith(",tx-batch=off,mtu=0x400") for a in args), args
    for uri, local in (("qemu:///system", True), ("qemu:///session", True),
                       ("qemu:///system?socket=/x/libvirt-sock", True),
                       ("qemu+ssh://host/system", False), ("qemu://host/system", False),
                       ("xen:///system", False)):
        eq(libvirt.local_uri(uri), local)


def t_migrate_refuses_what_cannot_move_and_rewrites_the_rest():
    """qhca migrate: the guests that cannot move are named with why; a guest's command line
    for its destination has sockets of its own, no ssh forward, the console log appended."""
    from qhcatool import migrate
    ok_vm = {"index": 1, "port": 1, "argv": []}
    eq(migrate.migratable({"netdev": "fabric"}, ok_vm), None)
    for state, vm, word in (({"netdev": "fabric"}, dict(ok_vm, libvirt={"uri": "x"}), "virsh"),
                            ({"netdev": "tap"}, dict(ok_vm, port=None), "fabric"),
                            ({"netdev": "fabric"}, dict(ok_vm, disk="/x.img"), "snapshot file"),
                            ({"netdev": "fabric", "shares": ["/x"]}, ok_vm, "9p"),
                            ({"netdev": "fabric", "rxe": True}, ok_vm, "virtio-net")):
        why = migrate.migratable(state, vm)
        assert why and word in why, (state, vm, why)
    run = migrate.RUN
    argv = ["qemu", "-chardev", "socket,id=console,path=%s/vm1.console,server=on,wait=off,"
            "logfile=%s/vm1.log" % (run, run), "-netdev",
            "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22", "-qmp",
            "unix:%s/vm1.qmp,server=on,wait=off" % run]
    out = migrate.incoming_argv(argv, 1, 3)
    eq(out[-2:], ["-incoming", "defer"])
    assert "path=%s/vm1.console.g3," % run in out[2] and "logappend=on" in out[2], out
    eq(out[4], "user,id=mgmt,restrict=on")
    eq(out[6], "unix:%s/vm1.qmp.g3,server=on,wait=off" % run)


def t_snapshot_qcow2_is_qemus_layout():
    """The vmstate image: a qcow2 v3 header QEMU takes (magic, version, 64 KiB clusters, the
    size, L1 at cluster 3, refcount table at cluster 1 naming block 2 with 4 clusters in use)."""
    import struct
    from qhcatool import snapshot
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "v.qcow2")
        snapshot.create_qcow2(p, 16 << 30)
        b = open(p, "rb").read()
    h = struct.unpack(">4sIQIIQIIQQIIQQQQII", b[:104])
    eq(h[0], b"QFI\xfb")
    eq((h[1], h[4], h[5], h[7], h[8], h[9], h[10], h[16], h[17]),
       (3, 16, 16 << 30, 32, 3 << 16, 1 << 16, 1, 4, 104))
    eq(struct.unpack(">Q", b[1 << 16:(1 << 16) + 8])[0], 2 << 16)
    eq(struct.unpack(">5H", b[2 << 16:(2 << 16) + 10]), (1, 1, 1, 1, 0))
    eq(len(b), 4 << 16)


for name, fn in sorted((k, v) for k, v in globals().items() if k.startswith("t_")):
    check(fn.__name__[2:].replace("_", " "), fn)
sys.exit(1 if bad else 0)
