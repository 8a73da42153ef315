# SPDX-License-Identifier: GPL-2.0-or-later
"""Files between the host and the guests: 'up --share' (a host directory at the same path
in every guest, over QEMU's virtfs, 9p on virtio) and 'cp' (copies into and out of a guest
over ssh).

Why 9p and not virtio-fs: 9p is inside QEMU (no daemon beside each guest, no shared guest
memory backend), works under TCG as under KVM, and is fast enough for what a share is for
here, programs and their inputs; virtio-fs needs a virtiofsd process per share and the
guest's RAM in a shared memory backend (docs/tutorial.md, "Your own programs").
"""
import os
import shlex
import stat
import subprocess
import sys

from .common import die, info, load_state
from .guest import ssh_base

# The guest's own directories: a share there would hide what the guest runs on.
GUEST_SYSTEM = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin",
                "/sys", "/usr", "/var")
GUEST_KEEP = ("/", "/root", "/root/.ssh", "/tmp", "/mnt")


def parse_shares(ro, rw):
    """The shares of 'up --share DIR' (read-only) and '--share-rw DIR': a list of
    (tag, absolute path, writable), checked."""
    shares = []
    for paths, writable in ((ro or [], False), (rw or [], True)):
        for p in paths:
            path = os.path.realpath(p)
            if not os.path.isdir(path):
                die("--share %s: no such directory" % p)
            if path in GUEST_KEEP or any(path == d or path.startswith(d + "/")
                                         for d in GUEST_SYSTEM):
                die("--share %s: %s is a directory the guest itself needs; share a directory "
                    "elsewhere (under /home, /srv, /opt, /root/NAME, /tmp/NAME, ...)"
                    % (p, path))
            if any(path == s[1] for s in shares):
                die("--share %s: shared twice" % p)
            shares.append(("qhcashare%d" % len(shares), path, writable))
    for a in shares:
        for b in shares:
            if a is not b and b[1].startswith(a[1] + "/"):
                die("--share %s and %s: one is inside the other; share one of them"
                    % (a[1], b[1]))
    return shares


def share_qemu_args(shares):
    """QEMU's arguments for SHARES and the kernel command line's word that tells the guest's
    init what to mount where (the path in hex: any byte may be in it)."""
    args, words = [], []
    for tag, path, writable in shares:
        args += ["-fsdev", "local,id=%s,path=%s,security_model=none%s"
                 % (tag, path.replace(",", ",,"), "" if writable else ",readonly=on"),
                 "-device", "virtio-9p-pci,fsdev=%s,mount_tag=%s" % (tag, tag)]
        words.append("%s:%s:%s" % (tag, path.encode().hex(), "rw" if writable else "ro"))
    return args, ("qhcashare=" + ",".join(words)) if words else ""


# ---------------------------------------------------------------- qhca cp
def split_spec(spec):
    """'I:PATH' -> (I, PATH); a local path -> (None, path). A local path with a colon is
    written ./a:b."""
    head, sep, rest = spec.partition(":")
    if sep and head.isdigit():
        if not rest:
            die("cp %s: the guest's path is missing (I:PATH)" % spec)
        return int(head), rest
    return None, spec


def guest_sh(state, i, script, stdin=None, stdout=None):
    return subprocess.run(ssh_base(state, i) + ["--", script], stdin=stdin, stdout=stdout)


def guest_kind(state, i, path):
    """'d', 'f' or '' (no such path) for PATH in guest I."""
    q = shlex.quote(path)
    p = subprocess.run(ssh_base(state, i) + ["--", "if [ -d %s ]; then echo d; elif [ -e %s ]; "
                                             "then echo f; fi" % (q, q)],
                       stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        die("cp: guest %d does not answer over ssh (status %d)" % (i, p.returncode))
    return p.stdout.strip()


def pipe(producer, consumer, what):
    """Run PRODUCER | CONSUMER (argument vectors); die with WHAT if either fails."""
    a = subprocess.Popen(producer, stdout=subprocess.PIPE)
    b = subprocess.Popen(consumer, stdin=a.stdout)
    a.stdout.close()
    rb, ra = b.wait(), a.wait()
    if ra or rb:
        die("cp: %s failed (status %d, %d)" % (what, ra, rb))


def copy_in(state, srcs, i, dst):
    dkind = guest_kind(state, i, dst)
    if len(srcs) > 1 and dkind != "d":
        die("cp: %d:%s is not a directory in guest %d, and there are %d sources"
            % (i, dst, i, len(srcs)))
    for src in srcs:
        try:
            st = os.stat(src)
        except OSError as e:
            die("cp: %s: %s" % (src, e.strerror))
        name = os.path.basename(os.path.normpath(src))
        if stat.S_ISDIR(st.st_mode):
            if dkind == "d":
                script = "tar -C %s -xf -" % shlex.quote(dst)
            elif dkind:
                die("cp: %d:%s is a file; a directory cannot replace it" % (i, dst))
            else:
                # A new directory DST: unpacked in a directory of its own beside it, then
                # renamed (never merged into a namesake that is there already).
                parent = os.path.dirname(dst.rstrip("/")) or "/"
                script = ("t=$(mktemp -d %s/.qhca-cp.XXXXXX) && tar -C \"$t\" -xf - && "
                          "mv \"$t\"/%s %s && rmdir \"$t\"" % (
                              shlex.quote(parent), shlex.quote(name), shlex.quote(dst)))
            pipe(["tar", "-C", os.path.dirname(os.path.abspath(src)), "-cf", "-", name],
                 ssh_base(state, i) + ["--", script], "copying %s into guest %d" % (src, i))
        else:
            path = os.path.join(dst, name) if dkind == "d" else dst
            with open(src, "rb") as f:
                r = guest_sh(state, i, "cat > %s && chmod %o %s" % (
                    shlex.quote(path), stat.S_IMODE(st.st_mode), shlex.quote(path)), stdin=f)
            if r.returncode:
                die("cp: writing %d:%s failed (status %d)" % (i, path, r.returncode))


def copy_out(state, i, srcs, dst):
    if len(srcs) > 1 and not os.path.isdir(dst):
        die("cp: %s is not a directory, and there are %d sources" % (dst, len(srcs)))
    for src in srcs:
        kind = guest_kind(state, i, src)
        if not kind:
            die("cp: %d:%s: no such file or directory in guest %d" % (i, src, i))
        name = os.path.basename(os.path.normpath(src))
        if kind == "d":
            if os.path.isdir(dst):
                target = dst
            else:
                os.makedirs(dst)
                target = None
            parent = os.path.dirname(os.path.normpath(src)) or "/"
            if target:
                pipe(ssh_base(state, i) + ["--", "tar -C %s -cf - %s"
                                           % (shlex.quote(parent), shlex.quote(name))],
                     ["tar", "-C", target, "-xf", "-"], "copying %d:%s" % (i, src))
            else:	# into the new directory DST itself
                pipe(ssh_base(state, i) + ["--", "tar -C %s -cf - ." % shlex.quote(src)],
                     ["tar", "-C", dst, "-xf", "-"], "copying %d:%s" % (i, src))
        else:
            path = os.path.join(dst, name) if os.path.isdir(dst) else dst
            with open(path, "wb") as f:
                r = guest_sh(state, i, "cat %s" % shlex.quote(src), stdout=f)
            if r.returncode:
                os.unlink(path)
                die("cp: reading %d:%s failed (status %d)" % (i, src, r.returncode))


def cmd_cp(args):
    """qhca cp SRC... DST: files and directories (recursively) into or out of a guest; a
    guest's path is I:PATH, as scp writes it."""
    if len(args.paths) < 2:
        die("usage: qhca cp SRC... DST (a guest's path is I:PATH)")
    state = load_state()
    specs = [split_spec(p) for p in args.paths]
    srcs, (di, dst) = specs[:-1], specs[-1]
    guests = {i for i, _ in srcs if i is not None}
    if di is not None and not guests:
        copy_in(state, [p for _, p in srcs], di, dst)
    elif di is None and len(guests) == 1 and all(i is not None for i, _ in srcs):
        copy_out(state, guests.pop(), [p for _, p in srcs], dst)
    else:
        die("cp: copy from the host into one guest (cp FILE... I:PATH) or from one guest to "
            "the host (cp I:PATH... DIR); between guests, copy through the host")
    info("cp: %d item%s copied" % (len(srcs), "" if len(srcs) == 1 else "s"))
    sys.stdout.flush()
    return 0
