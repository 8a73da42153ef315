# SPDX-License-Identifier: GPL-2.0-or-later
"""Files between the host and the guests: 'up --share' (a host directory at the same path
in every guest, over QEMU's virtfs, 9p on virtio) and 'cp' (copies into and out of a guest
over ssh).

Why 9p and not virtio-fs: 9p is inside QEMU (no daemon beside each guest, no shared guest
memory backend), works under TCG as under KVM, and is fast enough for what a share is for
here, programs and their inputs; virtio-fs needs a virtiofsd process per share and the
guest's RAM in a shared memory backend (docs/tutorial.md, "Your own programs").

A guest is untrusted (docs/security.md): a read-only share refuses every change in QEMU
(readonly=on), a writable one keeps what a guest sets of owners, modes and device nodes in
extended attributes (security_model=mapped-xattr) instead of applying it to the host's
files, and what 'cp' takes out of a guest is checked member by member before anything is
written on the host.
"""
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

from .common import CACHE, RUN, die, info, load_state
from .guest import ssh_base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
# The guest's own directories: a share on one of them, or on a directory holding one,
# would hide what the guest runs on; below the first ones, only virtual file systems.
GUEST_SYSTEM = ("/bin", "/boot", "/etc", "/lib", "/lib64", "/sbin", "/usr", "/var", "/root/.ssh")
GUEST_VIRTUAL = ("/dev", "/proc", "/run", "/sys")
GUEST_KEEP = ("/", "/root", "/tmp", "/mnt")
# Below the system directories, these hold nothing the guest needs (/var/home: /home on
# image-based distributions).
GUEST_FREE = ("/usr/local", "/var/tmp", "/var/home", "/var/srv")
# x86 cuts the kernel command line at 2048 bytes; what the launcher puts there besides.
CMDLINE_MAX = 2047
CMDLINE_OTHER = 80


def inside(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def parse_shares(ro, rw):
    """The shares of 'up --share DIR' (read-only) and '--share-rw DIR': a list of
    (tag, absolute path, writable), checked."""
    shares = []
    mine = [os.path.realpath(p) for p in (CACHE, RUN, ROOT)]
    for paths, writable in ((ro or [], False), (rw or [], True)):
        for p in paths:
            if not p:
                die("--share: an empty path")
            path = os.path.realpath(p)
            if not os.path.isdir(path):
                die("--share %s: no such directory" % p)
            if path in GUEST_KEEP or any(inside(d, path) for d in GUEST_SYSTEM + GUEST_VIRTUAL) \
                    or any(inside(path, d) for d in GUEST_VIRTUAL) \
                    or (any(inside(path, d) for d in GUEST_SYSTEM)
                        and not any(inside(path, d) for d in GUEST_FREE)):
                die("--share %s: %s is a directory the guest itself needs; share a directory "
                    "elsewhere (under /home, /srv, /opt, /root/NAME, /tmp/NAME, ...)"
                    % (p, path))
            # The launcher's own files: a guest that could write them (or read the cache's
            # ssh keys) would reach the host.
            for m in mine:
                if inside(m, path) or (writable and inside(path, m)):
                    die("--share %s: %s holds qhca's cache, run directory or tree (%s), which "
                        "no guest may %s" % (p, path, m, "write" if writable else "read"))
            if any(path == s[1] for s in shares):
                die("--share %s: shared twice" % p)
            shares.append(("qhcashare%d" % len(shares), path, writable))
    for a in shares:
        for b in shares:
            if a is not b and inside(b[1], a[1]):
                die("--share %s and %s: one is inside the other; share one of them"
                    % (a[1], b[1]))
    return shares


def share_qemu_args(shares):
    """QEMU's arguments for SHARES and the kernel command line's word that tells the guest's
    init what to mount where (the path in hex: any byte may be in it)."""
    args, words = [], []
    for tag, path, writable in shares:
        model = ("security_model=mapped-xattr,fmode=0644,dmode=0755" if writable
                 else "security_model=none,readonly=on")
        args += ["-fsdev", "local,id=%s,path=%s,%s" % (tag, path.replace(",", ",,"), model),
                 "-device", "virtio-9p-pci,fsdev=%s,mount_tag=%s" % (tag, tag)]
        words.append("%s:%s:%s" % (tag, path.encode().hex(), "rw" if writable else "ro"))
    word = ("qhcashare=" + ",".join(words)) if words else ""
    if len(word) > CMDLINE_MAX - CMDLINE_OTHER:
        die("--share: the paths take %d bytes of the guest kernel's command line (2048 at "
            "most, hex-encoded); share fewer or shorter paths" % len(word))
    return args, word


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
    p = subprocess.Popen(ssh_base(state, i) + ["--", "if [ -d %s ]; then echo d; elif [ -e %s ]; "
                                               "then echo f; fi" % (q, q)],
                         stdout=subprocess.PIPE)
    answer = p.stdout.read(8)	# no more: the guest decides how much it sends
    p.stdout.close()
    if p.wait() not in (0, -13):	# -13: the guest sent more, SIGPIPE
        die("cp: guest %d does not answer over ssh (status %d)" % (i, p.returncode))
    kind = answer.decode(errors="replace").strip()
    return kind if kind in ("d", "f") else ""


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
        full = os.path.abspath(src)	# '.' and '..' name the directory itself
        parent, name = os.path.dirname(full), os.path.basename(full)
        if not name:
            die("cp: %s: copy a directory below /, not / itself" % src)
        if stat.S_ISDIR(st.st_mode):
            if dkind == "d":
                script = "tar -C %s -xf -" % shlex.quote(dst)
            elif dkind:
                die("cp: %d:%s is a file; a directory cannot replace it" % (i, dst))
            else:
                # A new directory DST: unpacked in a directory of its own beside it, then
                # renamed (never merged into a namesake that is there already).
                gparent = os.path.dirname(dst.rstrip("/")) or "."
                script = ("t=$(mktemp -d %s/.qhca-cp.XXXXXX) && tar -C \"$t\" -xf - && "
                          "mv -- \"$t\"/%s %s && rmdir -- \"$t\"" % (
                              shlex.quote(gparent), shlex.quote(name), shlex.quote(dst)))
            pipe(["tar", "-C", parent, "-cf", "-", "--", name],
                 ssh_base(state, i) + ["--", script], "copying %s into guest %d" % (src, i))
        else:
            path = os.path.join(dst, name) if dkind == "d" else dst
            with open(src, "rb") as f:
                r = guest_sh(state, i, "cat > %s && chmod %o -- %s" % (
                    shlex.quote(path), stat.S_IMODE(st.st_mode), shlex.quote(path)), stdin=f)
            if r.returncode:
                die("cp: writing %d:%s failed (status %d)" % (i, path, r.returncode))


def safe_extract(stream, into, top, what):
    """Unpack the tar STREAM (from a guest: untrusted) into the fresh directory INTO: only
    directories, regular files and symbolic links, every name relative and below TOP (None:
    any relative name), no owner and no mode bits beyond the permissions; links are made
    last, so nothing is ever written through one. Dies with WHAT on anything else."""
    links = []
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tf:
            for m in tf:
                name = os.path.normpath(m.name)
                parts = name.split("/")
                if os.path.isabs(m.name) or ".." in parts or name in (".", "") and \
                        not m.isdir():
                    die("cp: %s: the guest sent %r, a name outside the copy" % (what, m.name))
                if top is not None and parts[0] != top:
                    die("cp: %s: the guest sent %r, not below %r" % (what, m.name, top))
                dest = os.path.join(into, name)
                if m.isdir():
                    os.makedirs(dest, mode=0o755, exist_ok=True)
                    os.chmod(dest, (m.mode & 0o777) | 0o700)
                elif m.isfile():
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    src = tf.extractfile(m)
                    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 (m.mode & 0o777) | 0o600)
                    with os.fdopen(fd, "wb") as out:
                        shutil.copyfileobj(src, out)
                elif m.issym():
                    links.append((m.linkname, dest))
                elif m.islnk():	# a hard link: a copy of a file unpacked before it
                    first = os.path.normpath(m.linkname)
                    if os.path.isabs(first) or ".." in first.split("/") or \
                            (top is not None and first.split("/")[0] != top) or \
                            not os.path.isfile(os.path.join(into, first)) or \
                            os.path.islink(os.path.join(into, first)):
                        die("cp: %s: the guest sent %r, a link to %r outside the copy"
                            % (what, m.name, m.linkname))
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    shutil.copyfile(os.path.join(into, first), dest)
                else:
                    die("cp: %s: the guest sent %r, a %s: only files, directories and links "
                        "are copied" % (what, m.name, "device" if m.ischr() or m.isblk()
                                        else "special file"))
    except (tarfile.TarError, OSError) as e:
        die("cp: %s: %s" % (what, e))
    real = os.path.realpath(into)
    for target, dest in links:
        # Its directory must be one unpacked here, reached through no link (a link made
        # before it could point anywhere).
        parent = os.path.dirname(dest)
        if not os.path.isdir(parent) or \
                os.path.realpath(parent) != os.path.join(real, os.path.relpath(parent, into)):
            die("cp: %s: the guest sent a link %r whose directory is no directory of the copy"
                % (what, os.path.relpath(dest, into)))
        try:
            os.symlink(target, dest)
        except OSError as e:
            die("cp: %s: %s" % (what, e))


def copy_out(state, i, srcs, dst):
    if len(srcs) > 1 and not os.path.isdir(dst):
        die("cp: %s is not a directory, and there are %d sources" % (dst, len(srcs)))
    for src in srcs:
        kind = guest_kind(state, i, src)
        if not kind:
            die("cp: %d:%s: no such file or directory in guest %d" % (i, src, i))
        norm = os.path.normpath(src)
        name = os.path.basename(norm)
        parent = os.path.dirname(norm) or "."
        into = dst if os.path.isdir(dst) else os.path.dirname(os.path.abspath(dst))
        if not os.path.isdir(into):
            die("cp: %s: no such directory" % into)
        final = os.path.join(dst, name) if os.path.isdir(dst) else dst
        if os.path.lexists(final) and kind == "d":
            die("cp: %s is there already; copy into a directory that does not hold %s"
                % (final, name))
        # Everything lands in a fresh directory beside the destination first, then moves.
        tmp = tempfile.mkdtemp(prefix=".qhca-cp.", dir=into)
        try:
            if kind == "d":
                p = subprocess.Popen(ssh_base(state, i) + ["--", "tar -C %s -cf - -- %s"
                                                           % (shlex.quote(parent),
                                                              shlex.quote(name))],
                                     stdout=subprocess.PIPE)
                safe_extract(p.stdout, tmp, name, "%d:%s" % (i, src))
                if p.wait():
                    die("cp: reading %d:%s failed (status %d)" % (i, src, p.returncode))
                os.rename(os.path.join(tmp, name), final)
            else:
                part = os.path.join(tmp, "file")
                with open(part, "wb") as f:
                    r = guest_sh(state, i, "cat -- %s" % shlex.quote(src), stdout=f)
                if r.returncode:
                    die("cp: reading %d:%s failed (status %d)" % (i, src, r.returncode))
                os.replace(part, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


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
