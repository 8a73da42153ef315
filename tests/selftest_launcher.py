#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Self-test of the launcher's side of its trust boundary with the guests, no VM needed: what
'qhca cp I:DIR' writes on the host from a hostile guest's tar (sparse members, hard links,
the --max-bytes bound, symbolic links that leave the copy), how much of a guest's output
guest_run keeps and how it decodes it, what reaches a terminal of a guest's bytes (explain,
the serial log's tail), the serial log read as it grows; and the package's shape (cmd_up in
pieces, no import cycle, the module map). A stand-in for ssh runs the guest's side here: the
launcher's own command lines, with a fake tar that sends the archive a test built.

Run by tests/selftest.sh; prints one "ok - selftest: ..." or "not ok - selftest: ..." line a
check, and exits non-zero after a failure. With arguments, runs only the checks whose names
hold one of them (tests/selftest_launcher.py 'cp:').
"""
import argparse
import ast
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import traceback
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
QHCA = os.path.join(TOOLS, "qhca")
WORK = tempfile.mkdtemp(prefix="qhca-selftest.")
RUN = os.path.join(WORK, "run")
BIN = os.path.join(WORK, "bin")		# the stand-in ssh, first on PATH
GBIN = os.path.join(WORK, "guest-bin")	# what the "guest" runs instead of tar
GUEST = os.path.join(WORK, "guest")	# the "guest's" files (guest_kind looks here)
for d in (RUN, BIN, GBIN, GUEST):
    os.makedirs(d)
os.environ.update(QHCA_RUN=RUN, QHCA_CACHE=os.path.join(WORK, "cache"), QHCA_FAKE_GBIN=GBIN,
                  PATH=BIN + ":" + os.environ["PATH"])
with open(os.path.join(BIN, "ssh"), "w") as f:
    # Everything up to "--" is ssh's (options, root@127.0.0.1); the rest is the guest's
    # command line, run here by sh with the guest's tar first on PATH.
    f.write('#!/bin/sh\nwhile [ $# -gt 0 ]; do a=$1; shift; [ "$a" = -- ] && break; done\n'
            'PATH=$QHCA_FAKE_GBIN:$PATH exec sh -c "$*"\n')
with open(os.path.join(GBIN, "tar"), "w") as f:
    f.write('#!/bin/sh\nexec cat "$QHCA_FAKE_TAR"\n')	# a hostile guest's tar: our archive
for name in ("ssh", "tar"):
    os.chmod(os.path.join(BIN if name == "ssh" else GBIN, name), 0o755)
with open(os.path.join(RUN, "state.json"), "w") as f:
    json.dump({"started": 0, "netdev": "dgram", "vms": [{"index": 1, "ssh_port": 2222}]}, f)

sys.path.insert(0, TOOLS)
from qhcatool import explain, files, guest, vms  # noqa: E402

bad = 0
MiB = 1 << 20


TESTS = []


def test(name):
    """The decorated function is the check NAME (run in the order of this file)."""
    def register(fn):
        TESTS.append((name, fn))
        return fn
    return register


def check(name, fn):
    global bad
    try:
        fn()
        print("ok - selftest: %s" % name)
    except (Exception, SystemExit):	# an assertion, anything the code raised, a die()
        bad += 1
        print("not ok - selftest: %s" % name)
        for line in traceback.format_exc().splitlines():
            print("#   " + line)


def eq(got, want):
    assert got == want, "got %r, want %r" % (got, want)


# ---------------------------------------------------------------- hostile archives
def member(name, typ=tarfile.REGTYPE, data=b"", link="", mode=0o644, size=None):
    """One tar member, header and data: TYP (tarfile's), SIZE in the header if not DATA's."""
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.linkname = typ, mode, link
    ti.size = len(data) if size is None else size
    return ti.tobuf(tarfile.GNU_FORMAT) + data + b"\0" * (-len(data) % 512)


def gnu_sparse(name, regions, realsize):
    """An old GNU sparse member (type 'S', what GNU tar -S writes): REGIONS (offset, bytes)
    of a file of REALSIZE bytes; the archive holds only the regions' bytes."""
    data = b"".join(d for _, d in regions)
    buf = bytearray(member(name, data=data)[:512])
    buf[156:157] = b"S"
    for k, (off, d) in enumerate(regions):
        buf[386 + 24 * k:386 + 24 * k + 24] = b"%011o\0%011o\0" % (off, len(d))
    buf[483:495] = b"%011o\0" % realsize
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % sum(buf)
    return bytes(buf) + data + b"\0" * (-len(data) % 512)


def pax_sparse(name, regions, realsize):
    """The same as a pax member with GNU sparse 0.1 keywords (tar --format=posix -S)."""
    data = b"".join(d for _, d in regions)
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.pax_headers = {"GNU.sparse.size": str(realsize), "GNU.sparse.map": ",".join(
        "%d,%d" % (off, len(d)) for off, d in regions)}
    return ti.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512)


def archive(*members):
    return b"".join(members) + b"\0" * 1024


def cp_out(tar, src="loot", dst=None, opts=()):
    """'qhca cp OPTS 1:GUEST/SRC DST' with the guest's tar sending TAR: (status, stderr)."""
    os.makedirs(os.path.join(GUEST, src), exist_ok=True)
    path = os.path.join(WORK, "evil.tar")
    with open(path, "wb") as f:
        f.write(tar)
    p = subprocess.run([QHCA, "cp"] + list(opts) + ["1:" + os.path.join(GUEST, src), dst],
                       env=dict(os.environ, QHCA_FAKE_TAR=path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace", timeout=120)
    return p.returncode, p.stdout


def cp_rss(tar, dst):
    """'qhca cp 1:GUEST/loot DST' with the guest's tar sending the file TAR: (status, the
    peak RSS in KiB of the launcher and its children, output)."""
    os.makedirs(os.path.join(GUEST, "loot"), exist_ok=True)
    p = subprocess.run([sys.executable, "-c", "import resource, subprocess, sys\n"
                        "r = subprocess.run(sys.argv[1:])\n"
                        "print('rc=%d maxrss=%d' % (r.returncode, resource.getrusage("
                        "resource.RUSAGE_CHILDREN).ru_maxrss))",
                        QHCA, "cp", "1:" + os.path.join(GUEST, "loot"), dst],
                       env=dict(os.environ, QHCA_FAKE_TAR=tar), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    last = p.stdout.strip().split("\n")[-1]
    rc, rss = (int(w.split("=")[1]) for w in last.split())
    return rc, rss, p.stdout


def fresh(name):
    d = os.path.join(WORK, name)
    os.makedirs(d)
    return d


def allocated(top):
    """Bytes on disk under TOP: each inode's blocks once (st_blocks), as du counts."""
    seen, total = set(), 0
    for d, dirs, names in os.walk(top):
        for n in dirs + names:
            st = os.lstat(os.path.join(d, n))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def nothing_left(dst, out):
    """A refused copy leaves DST as it was: empty, no temporary directory, no part."""
    assert os.listdir(dst) == [], "left behind: %r\n%s" % (os.listdir(dst), out)


# ---- 1: what one cp may write
@test('cp: a GNU sparse member stays sparse on the host')
def cp_1_sparse_member_stays_sparse():
    """A 100 MiB file of two 4 KiB regions, as old GNU and as pax sparse members: a few KiB
    on disk, the regions where they were, zeros between."""
    head, end = os.urandom(4096), os.urandom(4096)
    size = 100 * MiB
    for make in (gnu_sparse, pax_sparse):
        dst = fresh("sparse-" + make.__name__)
        rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                                 make("loot/disk.img", [(0, head), (size - 4096, end)], size)),
                         dst=dst)
        eq((rc, make.__name__), (0, make.__name__))
        path = os.path.join(dst, "loot", "disk.img")
        eq(os.path.getsize(path), size)
        assert allocated(dst) < 256 << 10, "%s: %d bytes on disk for 8 KiB of data" % (
            make.__name__, allocated(dst))
        with open(path, "rb") as f:
            eq(f.read(4096), head)
            f.seek(size // 2)
            eq(f.read(4096), b"\0" * 4096)
            f.seek(size - 4096)
            eq(f.read(), end)


@test('cp: fifty hard links to 1 MiB are one file on the host, not 51 MiB')
def cp_1_hard_links_stay_links():
    """1 MiB and fifty hard links to it ('ln' fifty times in the guest): one file of 1 MiB
    on the host, fifty-one names."""
    dst = fresh("links")
    data = os.urandom(MiB)
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             member("loot/big", data=data),
                             *[member("loot/l%d" % k, tarfile.LNKTYPE, link="loot/big")
                               for k in range(50)]), dst=dst)
    eq(rc, 0)
    inodes = {os.stat(os.path.join(dst, "loot", n)).st_ino
              for n in ["big"] + ["l%d" % k for k in range(50)]}
    eq(len(inodes), 1)
    eq(os.stat(os.path.join(dst, "loot", "big")).st_nlink, 51)
    assert allocated(dst) < MiB + (256 << 10), "%d bytes on disk for 1 MiB" % allocated(dst)
    with open(os.path.join(dst, "loot", "l49"), "rb") as f:
        eq(f.read(), data)


@test('cp: a member past --max-bytes is refused, nothing left behind')
def cp_1_member_past_max_bytes_refused_nothing_left():
    """--max-bytes 1M: a 3 MiB member is refused, and nothing is left in the destination."""
    dst = fresh("past-bound")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             member("loot/small", data=b"x" * 1000),
                             member("loot/big", data=os.urandom(3 * MiB))),
                     dst=dst, opts=["--max-bytes", "1M"])
    assert rc != 0, out
    assert "past its bound of 1 MiB (--max-bytes)" in out and "loot/big" in out, out
    assert "Traceback" not in out, out
    nothing_left(dst, out)


@test('cp: the default bound (1 GiB) refuses a 2 GiB member at its header')
def cp_1_default_bound_refuses_before_reading():
    """No option: a member whose header says 2 GiB passes the default bound (1 GiB) and is
    refused at its header, before a byte of it is read (the archive has none)."""
    dst = fresh("default-bound")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             member("loot/huge", size=2 << 30)), dst=dst)
    assert rc != 0 and "past its bound of 1 GiB (--max-bytes)" in out, out
    nothing_left(dst, out)


@test('cp: many small members add up to the bound')
def cp_1_small_members_add_up():
    """Every member counts (at least a 4 KiB block), also one with no data: 200 empty files
    and 100 directories (no data block among them) pass 1 MiB; 200 empty files alone do
    not."""
    def many(dst, n, dirs):
        return cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                              *[member("loot/f%d" % k) for k in range(n)],
                              *[member("loot/d%d" % k, tarfile.DIRTYPE, mode=0o755)
                                for k in range(dirs)]), dst=dst, opts=["--max-bytes=1M"])
    dst = fresh("many")
    rc, out = many(dst, 200, 100)
    assert rc != 0 and "past its bound of 1 MiB" in out, out
    nothing_left(dst, out)
    rc, out = many(dst, 200, 0)
    assert rc == 0, out


@test("cp: directories only a member's name makes count against the bound")
def cp_1_implicit_directories_count():
    """No member for them, twenty names loot/K/a/a/.../f (200 levels) make 4000 directories
    (16 MiB on disk): each one made counts a block, so --max-bytes 1M refuses the second;
    a name below a file is refused."""
    dst = fresh("implicit-dirs")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             *[member("loot/%d/" % k + "a/" * 200 + "f") for k in range(20)]),
                     dst=dst, opts=["--max-bytes=1M"])
    assert rc != 0 and "past its bound of 1 MiB" in out and "Traceback" not in out, out
    nothing_left(dst, out)
    dst = fresh("below-a-file")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755), member("loot/f"),
                             member("loot/f/g")), dst=dst)
    assert rc != 0 and "Traceback" not in out, out
    nothing_left(dst, out)


@test("cp: a name over 256 levels or 4095 bytes is refused, no traceback, nothing left")
def cp_1_deep_or_long_names_refused():
    """Names 300 and 1200 levels deep (os.makedirs recursed past Python's limit), and one of
    4200 bytes in 21 names of 200: refused at the member, cleanly."""
    for k, (name, why) in enumerate(((("a/" * 300) + "f", "levels"),
                                     (("a/" * 1200) + "f", "levels"),
                                     ("/".join(["b" * 199] * 21), "bytes"),
                                     ("a\0b", "NUL"))):
        dst = fresh("deep-%d" % k)
        if why == "NUL":	# a pax path may hold one; no system call takes it
            ti = tarfile.TarInfo("loot/" + name)
            ti.pax_headers = {"path": "loot/a\0b"}
            bad = ti.tobuf(tarfile.PAX_FORMAT)
        else:
            bad = member("loot/" + name)
        rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755), bad), dst=dst)
        assert rc != 0 and why in out and "Traceback" not in out, (k, out[-3000:])
        nothing_left(dst, out)


@test("cp: malformed headers are refused cleanly, no traceback, nothing left")
def cp_1_malformed_headers_refused():
    """What tarfile itself raises on: 1000 empty pax or long-name headers in a row (it
    recursed past Python's limit, a RecursionError), sparse maps that are no numbers (pax
    0.1, 0.0 and 1.0: a ValueError)."""
    def pax(hdrs, data=b""):
        ti = tarfile.TarInfo("loot/f")
        ti.size, ti.pax_headers = len(data), hdrs
        return ti.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512)
    chains = []
    for typ in (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME):
        h = tarfile.TarInfo("././@LongLink")
        h.type = typ
        chains.append(h.tobuf(tarfile.USTAR_FORMAT) * 1000 + member("loot/f"))
    for k, bad in enumerate(chains + [
            pax({"GNU.sparse.map": "x,y", "GNU.sparse.size": "10"}),
            pax({"GNU.sparse.size": "zz", "GNU.sparse.numblocks": "1",
                 "GNU.sparse.offset": "0", "GNU.sparse.numbytes": "1"}),
            pax({"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                 "GNU.sparse.realsize": "10"}, data=b"zz\n")]):
        dst = fresh("malformed-%d" % k)
        rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755), bad), dst=dst)
        assert rc != 0 and "Traceback" not in out and "malformed" in out, (k, out[-1500:])
        nothing_left(dst, out)


@test('cp: a guest file past --max-bytes is refused, no part left')
def cp_1_file_past_bound_refused_nothing_left():
    """cp I:FILE (cat, not tar): a guest file of 5 MiB past --max-bytes 1M is refused, no
    part of it stays."""
    dst = fresh("file-bound")
    with open(os.path.join(GUEST, "big.bin"), "wb") as f:
        f.truncate(5 * MiB)
    p = subprocess.run([QHCA, "cp", "--max-bytes", "1M", "1:" + os.path.join(GUEST, "big.bin"),
                        dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    assert p.returncode != 0 and "past its bound of 1 MiB" in p.stdout, p.stdout
    nothing_left(dst, p.stdout)


@test('cp: a 64 MiB pax header is refused without holding it in memory')
def cp_1_huge_header_not_held_in_memory():
    """A pax header of 64 MiB (a name that long, say): refused without holding it in the
    launcher's memory (its peak RSS, ssh's stand-in and all, stays under 48 MiB)."""
    dst = fresh("huge-header")
    ti = tarfile.TarInfo("././@PaxHeader")
    ti.type, ti.size = tarfile.XHDTYPE, 64 * MiB
    path = os.path.join(WORK, "evil-header.tar")
    with open(path, "wb") as f:	# the header's 64 MiB are a hole: nothing on disk
        f.write(member("loot", tarfile.DIRTYPE, mode=0o755) + ti.tobuf(tarfile.USTAR_FORMAT))
        f.truncate(f.tell() + 64 * MiB + 1024)
    rc, rss, out = cp_rss(path, dst)
    assert rc != 0 and rss < 48 << 10, out[-2000:]
    nothing_left(dst, out)


@test("cp: pax global headers are refused, not gathered in memory")
def cp_1_global_headers_refused():
    """Sixty pax global headers ('g', which tarfile gathers for the rest of the archive) of
    900 KiB each, a directory after each: refused at the first (GNU tar writes none unless
    asked), the launcher's peak RSS under 48 MiB (it took them all, 54 MiB, before); and a
    single small one."""
    dst = fresh("global-headers")
    path = os.path.join(WORK, "evil-global.tar")
    with open(path, "wb") as f:	# each header's value is NULs, a hole: nothing on disk
        f.write(member("loot", tarfile.DIRTYPE, mode=0o755))
        for k in range(60):
            body = len("%d k%d=" % (921600, k))
            g = tarfile.TarInfo("pax_global_header")
            g.type, g.size = tarfile.XGLTYPE, 921600
            f.write(g.tobuf(tarfile.USTAR_FORMAT) + b"921600 k%d=" % k)
            f.seek(921600 - body - 1, 1)
            f.write(b"\n")
            f.write(member("loot/d%d" % k, tarfile.DIRTYPE, mode=0o755))
        f.truncate(f.tell() + 1024)
    rc, rss, out = cp_rss(path, dst)
    assert rc != 0 and "global header" in out and rss < 48 << 10, out[-2000:]
    nothing_left(dst, out)
    g = tarfile.TarInfo("pax_global_header")
    g.type, g.size = tarfile.XGLTYPE, len(b"15 comment=abc\n")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             g.tobuf(tarfile.USTAR_FORMAT) + b"15 comment=abc\n".ljust(512, b"\0"),
                             member("loot/f", data=b"x")), dst=dst)
    assert rc != 0 and "global header" in out, out
    nothing_left(dst, out)


@test("cp: GNU tar's own sparse archives (gnu, posix 1.0, 0.0, 0.1) come out sparse and exact")
def cp_gnu_tar_sparse():
    g = os.path.join(GUEST, "holes")
    os.makedirs(g)
    with open(os.path.join(g, "sp"), "wb") as f:
        f.write(b"A" * 5000)
        f.seek(50 * MiB)
        f.write(b"B" * 3000)
    want = open(os.path.join(g, "sp"), "rb").read()
    for fmt in (["--format=gnu"], ["--format=posix"], ["--format=posix", "--sparse-version=0.0"],
                ["--format=posix", "--sparse-version=0.1"]):
        tar = subprocess.run(["tar", "-C", GUEST, "-S", "-cf", "-"] + fmt + ["holes"],
                             stdout=subprocess.PIPE, check=True).stdout
        dst = fresh("gnu-tar" + "".join(fmt).replace("-", "").replace("=", ""))
        rc, out = cp_out(tar, src="holes", dst=dst)
        eq((fmt, rc), (fmt, 0))
        with open(os.path.join(dst, "holes", "sp"), "rb") as f:
            assert f.read() == want, fmt
        assert allocated(dst) < 64 << 10, (fmt, allocated(dst))


@test("cp: test-share.sh's hostile archives (beside, device, through, suid) write nothing unsafe")
def cp_vm_test_hostile_kinds():
    for kind, extra in (("beside", [member(".bashrc", data=b"evil\n")]),
                        ("device", [member("loot/disk", tarfile.BLKTYPE)]),
                        ("through", [member("loot/up", tarfile.SYMTYPE, link=WORK),
                                     member("loot/up/x", tarfile.SYMTYPE, link="y")]),
                        ("suid", [member("loot/s", data=b"#!/bin/sh\n", mode=0o4755)])):
        dst = fresh("hostile-" + kind)
        rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755), *extra), dst=dst)
        assert not os.path.lexists(os.path.join(WORK, "x")), kind
        if kind == "suid":
            eq(rc, 0)
            eq(oct(os.stat(os.path.join(dst, "loot", "s")).st_mode & 0o7777), "0o755")
        else:
            assert rc != 0 and "Traceback" not in out, (kind, out)
            nothing_left(dst, out)


@test("cp: a plain tree comes out whole, its modes kept (setuid bits aside)")
def cp_plain_tree():
    dst = fresh("plain")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o750),
                             member("loot/a", data=b"one\n", mode=0o640),
                             member("loot/sub", tarfile.DIRTYPE, mode=0o755),
                             member("loot/sub/b", data=b"", mode=0o755),
                             member("loot/sub/deeper/c", data=b"three\n")), dst=dst)
    eq(rc, 0)
    top = os.path.join(dst, "loot")
    eq(oct(os.stat(top).st_mode & 0o777), "0o750")
    eq(oct(os.stat(os.path.join(top, "a")).st_mode & 0o777), "0o640")
    eq(open(os.path.join(top, "a")).read() + open(os.path.join(top, "sub/deeper/c")).read(),
       "one\nthree\n")
    eq(os.path.getsize(os.path.join(top, "sub/b")), 0)
    eq(sorted(os.listdir(dst)), ["loot"])	# no temporary directory left


@test("cp: several sources, the last refused: none of them is copied")
def cp_several_sources_all_or_nothing():
    dst = fresh("several")
    with open(os.path.join(GUEST, "first.txt"), "w") as f:
        f.write("first\n")
    path = os.path.join(WORK, "evil.tar")
    with open(path, "wb") as f:
        f.write(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                        member("loot/k", tarfile.SYMTYPE, link="/")))
    p = subprocess.run([QHCA, "cp", "1:" + os.path.join(GUEST, "first.txt"),
                        "1:" + os.path.join(GUEST, "loot"), dst],
                       env=dict(os.environ, QHCA_FAKE_TAR=path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode != 0 and "leaves the copy" in p.stdout, p.stdout
    nothing_left(dst, p.stdout)


@test("cp: a guest that sends on after its archive's end is cut off, nothing left")
def cp_trailing_data():
    dst = fresh("trailing")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755)) + b"z" * (3 * MiB),
                     dst=dst)
    assert rc != 0 and "after its archive's end" in out, out
    nothing_left(dst, out)


@test('cp: --help states the bound and --max-bytes')
def cp_1_help_documents_the_bound():
    p = subprocess.run([QHCA, "cp", "--help"], stdout=subprocess.PIPE, text=True)
    eq(p.returncode, 0)
    assert "--max-bytes" in p.stdout and "1 GiB" in " ".join(p.stdout.split()), p.stdout


# ---- 2: symbolic links stay inside the copy
def link_case(name, links, extra=()):
    dst = fresh("links-" + name)
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             member("loot/sub", tarfile.DIRTYPE, mode=0o755),
                             member("loot/sub/file", data=b"inside\n"), *extra,
                             *[member("loot/" + n, tarfile.SYMTYPE, link=t)
                               for n, t in links]), dst=dst)
    return dst, rc, out


@test('cp: a link to an absolute path is refused')
def cp_2_absolute_link_refused():
    for target in ("/etc/passwd", "/", os.path.join(WORK, "links-inside")):
        dst, rc, out = link_case("abs%d" % len(target), [("key", target)])
        assert rc != 0 and "leaves the copy" in out, (target, out)
        nothing_left(dst, out)


@test('cp: a relative link that leaves the copy is refused')
def cp_2_relative_link_leaving_refused():
    for k, (n, target) in enumerate((("key", "../../etc/passwd"),
                                     ("sub/key", "../../x"),
                                     ("up", ".."),
                                     ("again", "../loot/sub/file"),	# out and back in
                                     ("deep", "sub/" + "../" * 40 + "etc/passwd"))):
        dst, rc, out = link_case("rel%d" % k, [(n, target)])
        assert rc != 0 and "leaves the copy" in out, (target, out)
        nothing_left(dst, out)


@test('cp: links that leave the copy only together are refused')
def cp_2_chains_of_links_leaving_refused():
    """Each link alone stays inside; followed together they leave: d -> '.' and up -> d/..
    (loot/./.. is loot's parent); a -> b/c/../.. with b -> sub and sub/c -> ../sub; three
    links deep; a loop."""
    for k, links in enumerate(([("d", "."), ("up", "d/..")],
                               [("a", "b/c/../.."), ("b", "sub"), ("sub/c", "../sub")],
                               [("x", "sub/y/../.."), ("sub/y", "z"), ("sub/z", "../sub/..")],
                               [("p", "q"), ("q", "p")])):
        dst, rc, out = link_case("chain%d" % k, links)
        assert rc != 0 and "leaves the copy" in out, (links, out)
        nothing_left(dst, out)


@test('cp: links that stay inside the copy are kept and work')
def cp_2_links_inside_keep_working():
    """Links that stay inside the copy (relative, through other links, dangling) are made
    and work, also when the copy is renamed on the way (cp 1:DIR NEWNAME)."""
    dst = fresh("links-inside")
    rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                             member("loot/sub", tarfile.DIRTYPE, mode=0o755),
                             member("loot/sub/file", data=b"inside\n"),
                             member("loot/rel", tarfile.SYMTYPE, link="sub/file"),
                             member("loot/sub/back", tarfile.SYMTYPE, link="../rel"),
                             member("loot/dir", tarfile.SYMTYPE, link="sub"),
                             member("loot/via", tarfile.SYMTYPE, link="dir/./file"),
                             member("loot/d", tarfile.SYMTYPE, link="."),
                             member("loot/sub/top", tarfile.SYMTYPE, link="../d/sub/.."),
                             member("loot/dangling", tarfile.SYMTYPE, link="not/there")),
                     dst=os.path.join(dst, "renamed"))
    assert rc == 0, out
    top = os.path.join(dst, "renamed")
    for name in ("rel", "sub/back", "via", "dir/file", "d/d/sub/top/rel"):
        with open(os.path.join(top, name)) as f:
            eq((name, f.read()), (name, "inside\n"))
    eq(os.readlink(os.path.join(top, "dangling")), "not/there")


@test("cp: the copy's top sent as a link is refused")
def cp_2_top_as_a_link_refused():
    dst = fresh("top-link")
    rc, out = cp_out(archive(member("loot", tarfile.SYMTYPE, link="/etc")), dst=dst)
    assert rc != 0, out
    nothing_left(dst, out)


@test("cp: a link's target over 4095 bytes is refused at its member")
def cp_2_long_link_target_refused():
    """A symbolic link to a/a/.../a (5000 bytes, a pax linkpath) and a hard link to a name
    of 5000 bytes: refused at the member, nothing left."""
    for k, typ in enumerate((tarfile.SYMTYPE, tarfile.LNKTYPE)):
        dst = fresh("long-target-%d" % k)
        ti = tarfile.TarInfo("loot/l")
        ti.type, ti.linkname = typ, ("loot/" if typ == tarfile.LNKTYPE else "") + "a/" * 2500
        rc, out = cp_out(archive(member("loot", tarfile.DIRTYPE, mode=0o755),
                                 ti.tobuf(tarfile.PAX_FORMAT)), dst=dst)
        assert rc != 0 and "a link to a name of 500" in out, (k, rc, out[:300])
        nothing_left(dst, out)


@test("cp: the check of links' ways takes time linear in their names")
def cp_2_link_walk_linear():
    """A target of 50000 names (the walk per name was linear in how deep it was: 12 s), and
    300 links 250 levels deep with targets of 2000 names (the check for a link below another
    was quadratic in how deep a link is): within 3 s together (about 0.1 s here)."""
    import time
    t0 = time.monotonic()
    eq(files.link_leaving({("l",): "a/" * 50000}), None)
    deep = {tuple("d%d" % k for k in range(250)) + ("l%d" % j,): "x/" * 2000
            for j in range(300)}
    eq(files.link_leaving(deep), None)
    eq(files.link_leaving({**deep, ("d0",): "."}), (next(iter(deep)), ("d0",)))
    took = time.monotonic() - t0
    assert took < 3, "%.1f s" % took


@test("cp: after the links are made, a link whose way leaves on the file system is refused")
def cp_2_file_system_check_after_the_fact():
    """link_leaving decides name by name; a case-folding directory (ext4's +F) takes 'B' for
    'b', so a way it passed (sub/a -> ../B/.. with b -> '.': B is no link, by name) may
    leave. The check after the fact asks the file system: here a link B -> b stands in for
    the folding (no file system here folds), and it refuses sub/a; the same tree without b
    passes. And with link_leaving made to pass everything, safe_extract still refuses a
    link up -> '..'."""
    import contextlib
    for name, leaves in (("folding", True), ("plain", False)):
        top = os.path.join(fresh("fs-check-" + name), "loot")
        os.makedirs(os.path.join(top, "sub"))
        if leaves:
            os.symlink(".", os.path.join(top, "b"))
        os.symlink("b", os.path.join(top, "B"))
        os.symlink("../B/..", os.path.join(top, "sub", "a"))
        os.symlink("../sub/../B/not/there/..", os.path.join(top, "sub", "dangling"))
        eq(files.fs_link_leaving(top), os.path.join(top, "sub", "a") if leaves else None)
    into = fresh("fs-check-wired")
    real, files.link_leaving = files.link_leaving, lambda links: None
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                files.safe_extract(io.BytesIO(archive(
                    member("loot", tarfile.DIRTYPE, mode=0o755),
                    member("loot/up", tarfile.SYMTYPE, link=".."))), into, "loot", "x",
                    files.Budget(files.MAX_BYTES))
                raise AssertionError("the link up -> .. was made and passed")
            except SystemExit:
                pass
    finally:
        files.link_leaving = real
    assert "leaves the copy" in err.getvalue(), err.getvalue()


# ---------------------------------------------------------------- 3: a guest's output
STATE = {"vms": [{"index": 1, "ssh_port": 2222}]}


@test('guest_run: 64 MiB of output kept to its head and tail, the cut said')
def guest_run_3_output_bounded():
    """64 MiB of output: what guest_run keeps is at most its cap (its head and its tail),
    says what it left out, and the launcher never holds the whole."""
    tracemalloc.start()
    try:
        rc, out = guest.guest_run(STATE, 1, "echo HEAD; head -c %d /dev/zero | tr '\\0' x; "
                                  "echo; echo TAIL" % (64 * MiB))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    eq(rc, 0)
    assert peak < 8 * MiB, "peak %d bytes" % peak
    assert len(out) <= MiB + 200, len(out)	# the cap: 1 MiB
    assert out.startswith("HEAD\nxxx") and out.endswith("xxx\nTAIL\n"), (out[:20], out[-20:])
    eq(len(out.encode()), MiB + len("\n[qhca: 63.0 MiB of the guest's output left out here]\n"))
    assert "\n[qhca: 63.0 MiB of the guest's output left out here]\n" in out, \
        out[MiB // 2 - 100:MiB // 2 + 200]


@test('guest_run: bytes that are no UTF-8 are replaced, not a traceback')
def guest_run_3_invalid_utf8_replaced():
    rc, out = guest.guest_run(STATE, 1, "printf 'caf\\303\\n\\377\\376 end\\n'; exit 3")
    eq((rc, out), (3, "caf\ufffd\n\ufffd\ufffd end\n"))


class Tty(io.TextIOWrapper):
    """A terminal standing in for stderr: what was written, in bytes."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)

    def isatty(self):
        return True

    def written(self):
        self.flush()
        return self.buffer.getvalue()


NASTY = r"printf '\033]0;pwned\007 hi \033[2J\377\302\233 end\n'"


def with_stderr(fn):
    old, sys.stderr = sys.stderr, Tty()
    try:
        try:
            fn()
        except SystemExit:
            pass
        return sys.stderr.written()
    finally:
        sys.stderr = old


@test("explain: the client's escape sequences do not reach the terminal")
def explain_3_client_output_filtered_on_a_terminal():
    """explain shows the client's output: its escape sequences and C1 controls do not reach
    the terminal, a byte that is no UTF-8 does not stop the launcher."""
    open(os.path.join(RUN, "vm1.qemu.log"), "w").close()
    old = explain.running_vm, explain.qmp
    explain.running_vm = lambda state, i: state["vms"][0]
    explain.qmp = lambda *a, **k: None
    try:
        args = argparse.Namespace(cmd=["--", NASTY], render=None, client=1, server=2,
                                  server_cmd=None, alone=True, out=os.path.join(WORK, "ex"),
                                  timeout=10, all=False)
        got = with_stderr(lambda: explain.cmd_explain(args))
    finally:
        explain.running_vm, explain.qmp = old
    assert b" hi " in got and b" end" in got, got
    assert b"\x1b" not in got and b"\x07" not in got and b"\xc2\x9b" not in got, got
    assert b"Traceback" not in got, got


def sparse_log(i, size, tail=b""):
    path = os.path.join(RUN, "vm%d.log" % i)
    with open(path, "wb") as f:
        f.truncate(size)
        f.seek(size)
        f.write(tail)
    return path


@test("log_tails: the serial log's tail read from its end, controls filtered")
def log_tails_3_bounded_and_filtered():
    """The serial log's last lines, from a log of 64 MiB: read from its end, the guest's
    escape sequences out on a terminal."""
    sparse_log(7, 64 * MiB, b"\n".join(b"line %d \x1b[2J\x1b]0;t\x07\xff" % k
                                       for k in range(20)) + b"\n")
    tracemalloc.start()
    try:
        got = with_stderr(lambda: vms.log_tails([7], lines=3))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB, "peak %d bytes" % peak
    assert b"line 17" in got and b"line 19" in got and b"line 16" not in got, got
    assert b"\x1b" not in got and b"\x07" not in got, got


def rchar():
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@test('ready_marks: reads only what the log grew by, a split mark counts once')
def ready_marks_3_incremental():
    """ready_marks reads what the guest added since its last look, not the whole log again;
    a mark split across two writes counts once."""
    path = sparse_log(8, 64 * MiB, b"boot qhca-guest-ready\n")
    vm = {"index": 8}
    eq(vms.ready_marks(vm), 1)
    for piece, want in ((b"reboot qhca-gue", 1), (b"st-ready\n", 2), (b"", 2)):
        with open(path, "ab") as f:
            f.write(piece)
        before = rchar()
        eq(vms.ready_marks(vm), want)
        assert rchar() - before < MiB, "read %d bytes again" % (rchar() - before)
    os.unlink(path)		# a new log ('start' moves the old one away): counted anew
    sparse_log(8, 0, b"qhca-guest-ready\n")
    eq(vms.ready_marks(vm), 1)


@test("ready_marks: counts as one whole read does, however the log is cut into reads")
def ready_marks_any_cut():
    import random
    rnd = random.Random(40)
    old = vms.LOG_CHUNK
    path = os.path.join(RUN, "vm9.log")
    try:
        for mark, disk in (("qhca-guest-ready", False), (" login: ", True)):
            for _ in range(200):
                vms.LOG_CHUNK = rnd.choice([1, 2, 3, 5, 7, 64])
                open(path, "wb").close()
                vms.MARKS_READ.pop(path, None)
                text = b""
                for _ in range(20):
                    m = mark.encode()
                    piece = rnd.choice([m, m[:rnd.randint(1, len(m))], m[rnd.randint(1, len(m)):],
                                        b" ", b"x" * rnd.randint(0, 5)])
                    text += piece
                    with open(path, "ab") as f:
                        f.write(piece)
                    eq((text, vms.ready_marks({"index": 9, "disk": disk})),
                       (text, text.count(mark.encode())))
    finally:
        vms.LOG_CHUNK = old


# ---------------------------------------------------------------- 4, 5: the package's shape
PKG = os.path.join(TOOLS, "qhcatool")


def functions(module):
    tree = ast.parse(open(os.path.join(PKG, module + ".py")).read())
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


@test('vms: cmd_up is in pieces of at most 100 lines, each with a docstring')
def vms_4_cmd_up_in_pieces():
    """cmd_up and every function of vms.py it calls are at most 100 lines, each with a
    docstring."""
    fns = functions("vms")
    todo, seen = ["cmd_up"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fn = fns[name]
        length = fn.end_lineno - fn.lineno + 1
        assert length <= 100, "%s is %d lines" % (name, length)
        assert ast.get_docstring(fn), "%s has no docstring" % name
        todo += [c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Name) and c.func.id in fns]
    assert len(seen) >= 5, seen


@test("package: no import cycle between the launcher's modules")
def package_4_no_import_cycle():
    """The modules' imports of each other at load time make no cycle."""
    graph = {}
    for f in os.listdir(PKG):
        if f.endswith(".py"):
            deps = set()
            for node in ast.parse(open(os.path.join(PKG, f)).read()).body:
                if isinstance(node, ast.ImportFrom) and node.level == 1:
                    deps |= {node.module} if node.module else {a.name for a in node.names}
            graph[f[:-3]] = deps
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", "import cycle: %s" % " -> ".join(path + [m])
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            visit(d, path + [m])
        state[m] = "done"
    for m in sorted(graph):
        visit(m, [])


@test('up: bad options are refused with their messages, nothing started')
def up_4_options_refused_before_anything_starts():
    """up's option checks (which the split keeps as they were) refuse with their messages
    and start nothing."""
    before = sorted(os.listdir(RUN))
    for argv, needle in ((["-n", "0"], "-n must be 1..16"),
                         (["--first", "250", "-n", "6"], "guests are numbered 1..254"),
                         (["--mem", "12x"], "must be a number of MiB"),
                         (["--mem", "100"], "at least 256 MiB"),
                         (["--netdev", "dgram", "--rxe"], "runs no fabric, so no --rxe"),
                         (["--ib", "--iwarp"], "two link layers"),
                         (["--netdev", "dgram", "-n", "3"], "exactly two guests"),
                         (["--spare-ports", "-1"], "0 or more"),
                         (["--trunk", "tcp:10.1.1.1:5000"], "loopback address"),
                         (["--trunk", "bogus"], "expected tcp:HOST:PORT"),
                         (["--fabric-tcp", "127.0.0.1:65530", "-n", "8"], "do not fit"),
                         (["--spare-ports", "60", "-n", "8"], "at most 64 ports")):
        p = subprocess.run([QHCA, "up"] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        assert p.returncode == 1 and needle in p.stdout, (argv, p.stdout)
    eq(sorted(os.listdir(RUN)), before)


@test('cli: qhca --help, up --help, cp --help')
def cli_4_help_works():
    for argv, needle in (([], "qhca up"), (["up"], "--spare-ports"), (["cp"], "PATH")):
        p = subprocess.run([QHCA] + argv + ["--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        assert p.returncode == 0 and needle in p.stdout, (argv, p.stdout)


@test("package: __init__'s module map names every module, one line each")
def package_5_module_map_lists_every_module():
    """__init__.py's module map: one line for every module of the package."""
    doc = ast.get_docstring(ast.parse(open(os.path.join(PKG, "__init__.py")).read()))
    named = [line.split()[0] for line in doc.split("\n") if line.startswith("  ")]
    modules = sorted(f[:-3] for f in os.listdir(PKG) if f.endswith(".py") and f != "__init__.py")
    eq(sorted(named), modules)	# each once, and no line that goes on from the one before


try:
    for name, fn in TESTS:
        if len(sys.argv) < 2 or any(word in name for word in sys.argv[1:]):
            check(name, fn)
finally:
    shutil.rmtree(WORK, ignore_errors=True)
sys.exit(1 if bad else 0)
