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
written on the host, within a bound on what it may write (--max-bytes).
"""
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

from .common import CACHE, RUN, die, info, load_state, size_text
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


# What one 'cp' out of a guest may write on the host (--max-bytes), counted in the 4 KiB
# blocks a file system stores: one for every member (its inode or directory entry, and its
# tar headers from where the member before it ends, more if they are longer), one for every
# directory made (also one that only a member's name makes), and the blocks a file's data
# fills (a sparse file's holes fill none: its apparent size is not bounded, only the blocks
# a file system with holes allocates for it).
MAX_BYTES = 1 << 30
BLOCK = 4096
# The most of one member's headers (a pax or GNU long-name header, a sparse map) read before
# the member comes: tarfile holds a header whole in memory.
HEADER_MAX = 1 << 20
# How deep a symbolic link may lead through others (the kernel's MAXSYMLINKS).
LINK_DEPTH = 40
# The longest name of a member and target of a link (PATH_MAX less its NUL), and the most
# names a member's path may have: every directory a member's name makes is made (and counted)
# one by one, and a link's way is walked name by name.
PATH_BYTES = 4095
PATH_DEPTH = 256
CHUNK = 1 << 20		# bytes read and written at a time
SIZE_RE = re.compile(r"(\d+)([KMGT]?)(?:i?B)?$", re.I)


def parse_size(text):
    """'1G', '512M', '64k', '4096' -> bytes (K, M, G, T: powers of 1024); ValueError else."""
    m = SIZE_RE.match(text.strip())
    if not m:
        raise ValueError("%r is no size (a number of bytes, or with K, M, G or T)" % text)
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def blocks(start, end):
    """The bytes of the BLOCK-sized blocks that the bytes START..END-1 of a file touch."""
    return 0 if end <= start else ((end + BLOCK - 1) // BLOCK - start // BLOCK) * BLOCK


class Budget:
    """What one 'cp' may still write on the host: LIMIT bytes, as blocks() counts them."""

    def __init__(self, limit):
        self.limit, self.used = limit, 0

    def take(self, nbytes, what, name):
        if self.used + nbytes > self.limit:
            die("cp: %s: %s would take this copy past its bound of %s (--max-bytes); "
                "nothing is copied" % (what, name, size_text(self.limit)))
        self.used += nbytes


class HeaderTooLong(Exception):
    pass


class GuestStream:
    """The guest's tar stream as tarfile reads it, metered: past the data of the last member
    (allow()) at most HEADER_MAX, and the record tarfile reads ahead, before the next member
    comes, so no header that tarfile reads whole grows the launcher's memory with it."""

    def __init__(self, f):
        self.f, self.count, self.limit = f, 0, HEADER_MAX

    def read(self, n):
        data = self.f.read(n)
        self.count += len(data)
        if self.count > self.limit + 2 * tarfile.RECORDSIZE:
            raise HeaderTooLong()
        return data

    def allow(self, end):
        """The member read last ends at offset END of the stream."""
        self.limit = end + HEADER_MAX


def check_path(text, what, name, kind, depth=True):
    """Die with WHAT unless TEXT (a member's NAME, KIND "a name"; or its link's target)
    is a path the host can take: at most PATH_BYTES bytes, no NUL, and (DEPTH) at most
    PATH_DEPTH names."""
    raw = os.fsencode(text)
    levels = sum(1 for p in raw.split(b"/") if p not in (b"", b".")) if depth else 0
    if len(raw) > PATH_BYTES or b"\0" in raw or levels > PATH_DEPTH:
        die("cp: %s: the guest sent %r, %s %s (at most %d bytes%s, no NUL)"
            % (what, name[:200] + ("..." if len(name) > 200 else ""), kind,
               "with a NUL" if b"\0" in raw else "of %d bytes" % len(raw)
               + (" and %d levels" % levels if depth else ""),
               PATH_BYTES, " and %d levels" % PATH_DEPTH if depth else ""))


def make_dirs(into, parts, budget, what, name):
    """The directories INTO/PARTS[0]/.../PARTS[-1] that are not there yet, made one by one
    (0755), each counted a block in BUDGET: those of a member's name that no member of the
    archive made (NAME, for WHAT's message). Dies if one of them is no directory."""
    k = len(parts)
    while k:	# the deepest one there (most often all of them are)
        try:
            st = os.lstat(os.path.join(into, *parts[:k]))
        except FileNotFoundError:
            k -= 1
            continue
        if not stat.S_ISDIR(st.st_mode):
            die("cp: %s: the guest sent %r, but %r is no directory"
                % (what, name, "/".join(parts[:k])))
        break
    path = os.path.join(into, *parts[:k])
    for part in parts[k:]:
        budget.take(BLOCK, what, "%r (its directory %r)" % (name, part))
        path = os.path.join(path, part)
        os.mkdir(path, 0o755)


def data_regions(m, what):
    """The (offset, length) of the data of the file member M: the whole file, or a sparse
    member's regions (checked: in order, apart, inside the file); holes stay holes."""
    if m.size < 0:
        die("cp: %s: the guest sent %r with a size of %d" % (what, m.name, m.size))
    if m.sparse is None:
        return [(0, m.size)]
    regions, end = [], 0
    for off, n in m.sparse:
        if n == 0:		# GNU's unused entries
            continue
        if n < 0 or off < end or off + n > m.size:
            die("cp: %s: the guest sent %r, a sparse file whose map is no map of it"
                % (what, m.name))
        regions.append((off, n))
        end = off + n
    return regions


def write_regions(tf, m, regions, fd):
    """The data of the file member M into the new file FD: REGIONS where they are, then the
    file's size (a sparse file's holes are never written)."""
    m.sparse = regions if m.sparse is not None else None	# tarfile reads by the map checked
    member = tf.extractfile(m)
    raw = member.raw	# unbuffered: it reads no further than asked, never back
    with member, os.fdopen(fd, "wb") as out:
        for off, n in regions:
            raw.seek(off)
            out.seek(off)
            while n > 0:
                data = raw.read(min(CHUNK, n))
                out.write(data)
                n -= len(data)
        out.truncate(m.size)


def link_leaving(links):
    """LINKS: {a symbolic link's path below the copy's top (a tuple of names): its target}.
    The first link that is wrong: (it, None) if its way, every link on it followed as the
    kernel follows them, leaves the top (an absolute target, '..' above the top) or leads
    LINK_DEPTH links deep (a loop); (it, the link above it) if it is below another link;
    None if every one stays inside. What a name that is no link holds does not matter: it is
    taken for a directory, as whatever may be made there later would be.

    The links' paths are a tree of names (node 0 the top, up[node] the node above, kid[node,
    name] one below), and a place on a way is (a node, how many names below it the way went
    where no link is): each name of a target costs the same, however deep the way is."""
    kid, up, via, link = {}, [None], [None], {}
    below = None
    for path in links:
        node = 0
        for name in path:
            if node in link and below is None:
                below = (path, link[node])
            nxt = kid.get((node, name))
            if nxt is None:
                nxt = kid[node, name] = len(up)
                up.append(node)
                via.append(path)	# the first link whose path went through it
            node = nxt
        if via[node] is not path and below is None:	# a link went on below this one
            below = (via[node], path)
        link[node] = path
    if below:
        return below
    ends = {}

    class Leaves(Exception):
        pass

    def end(node, depth):
        if node in ends:
            return ends[node]
        target = links[link[node]]
        if depth > LINK_DEPTH or target.startswith("/"):
            raise Leaves()
        where, past = up[node], 0
        for name in target.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                if past:
                    past -= 1
                elif where == 0:
                    raise Leaves()
                else:
                    where = up[where]
            elif past:
                past += 1
            else:
                nxt = kid.get((where, name))
                if nxt is None:
                    past = 1
                elif nxt in link:
                    where, past = end(nxt, depth + 1)
                else:
                    where = nxt
        ends[node] = (where, past)
        return where, past

    for node, path in link.items():
        try:
            end(node, 0)
        except Leaves:
            return path, None
    return None


def fs_link_leaving(top):
    """After the fact, on the file system itself: the first symbolic link below TOP (a path
    with no link on it) whose way, each name looked up in the file system as the kernel
    looks it up, leaves TOP, as link_leaving decides (an absolute target, '..' above TOP,
    LINK_DEPTH links deep or a loop); None if every one stays inside. It differs from
    link_leaving only where the file system takes a name for another one: a case-folding
    directory (ext4's +F) takes 'B' for the link 'b'. Each name of a target is looked up
    once (a link's end is kept), however many links lead through it."""
    ends, busy = {}, object()

    class Leaves(Exception):
        pass

    def end(link, depth):
        known = ends.get(link)
        if known is busy or depth > LINK_DEPTH:
            raise Leaves()
        if known:
            return known
        ends[link] = busy
        target = os.readlink(link)
        if target.startswith("/"):
            raise Leaves()
        where, past = os.path.dirname(link), 0	# past: names below WHERE that are not there
        for name in target.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                if past:
                    past -= 1
                elif where == top:
                    raise Leaves()
                else:
                    where = os.path.dirname(where)
            elif past:
                past += 1
            else:
                path = where + "/" + name
                try:
                    st = os.lstat(path)
                except (FileNotFoundError, NotADirectoryError):
                    past = 1
                    continue
                except OSError:		# too long a path, say: it cannot be told
                    raise Leaves() from None
                if stat.S_ISLNK(st.st_mode):
                    where, past = end(path, depth + 1)
                else:
                    where = path	# a file: as link_leaving, taken for a directory
        ends[link] = (where, past)
        return ends[link]

    todo = [top]
    while todo:
        with os.scandir(todo.pop()) as entries:
            for e in entries:
                if e.is_symlink():
                    try:
                        end(e.path, 0)
                    except Leaves:
                        return e.path
                elif e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
    return None


def safe_extract(stream, into, top, what, budget):
    """Unpack the tar STREAM (from a guest: untrusted) into the fresh directory INTO: only
    directories, regular files (a sparse one with its holes), hard links to files of the copy
    (links, not copies) and symbolic links whose way stays inside the copy, every name
    relative and below TOP (None: any relative name), no owner and no mode bits beyond the
    permissions, and no more than BUDGET has left. Symbolic links are made last, so nothing
    is ever written through one. Dies with WHAT on anything else."""
    src = GuestStream(stream)
    links = {}
    try:
        with tarfile.open(fileobj=src, mode="r|") as tf:
            end = 0		# where the member read last ends: the next one's headers start
            while True:
                m = tf.next()
                # A pax global header ('g') is no member: tarfile keeps what it says for
                # the rest of the archive (tf.pax_headers), header after header; GNU tar
                # writes none unless asked.
                if tf.pax_headers or m is not None and m.offset != end:
                    die("cp: %s: the guest sent a pax global header%s; a copy takes none"
                        % (what, "" if m is None else " before %r" % m.name[:200]))
                if m is None:
                    break
                tf.members = []		# in a stream there is no going back to one
                headers, end = m.offset_data - end, tf.offset
                check_path(m.name, what, m.name, "a name")
                name = os.path.normpath(m.name)
                parts = name.split("/")
                if os.path.isabs(m.name) or ".." in parts or name in (".", "") and \
                        not m.isdir():
                    die("cp: %s: the guest sent %r, a name outside the copy" % (what, m.name))
                if top is not None and parts[0] != top:
                    die("cp: %s: the guest sent %r, not below %r" % (what, m.name, top))
                dest = os.path.join(into, name)
                budget.take(blocks(0, max(headers, 1)), what, repr(m.name))
                if m.isdir():
                    src.allow(m.offset_data)
                    make_dirs(into, parts, budget, what, m.name)
                    os.chmod(dest, (m.mode & 0o777) | 0o700)
                elif m.isfile():
                    regions = data_regions(m, what)
                    budget.take(sum(blocks(off, off + n) for off, n in regions), what,
                                "%r (%s)" % (m.name, size_text(m.size)))
                    src.allow(m.offset_data + sum(n for _, n in regions))
                    make_dirs(into, parts[:-1], budget, what, m.name)
                    write_regions(tf, m, regions, os.open(
                        dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                        (m.mode & 0o777) | 0o600))
                elif m.issym():
                    src.allow(m.offset_data)
                    check_path(m.linkname, what, m.name, "a link to a name", depth=False)
                    rel = tuple(parts[1:] if top is not None else parts)
                    if not rel:
                        die("cp: %s: the guest sent %r, a link, for the directory itself"
                            % (what, m.name))
                    links[rel] = m.linkname
                elif m.islnk():	# a hard link: to a file unpacked before it
                    src.allow(m.offset_data)
                    check_path(m.linkname, what, m.name, "a link to a name", depth=False)
                    first = os.path.normpath(m.linkname)
                    if os.path.isabs(first) or ".." in first.split("/") or \
                            (top is not None and first.split("/")[0] != top) or \
                            not os.path.isfile(os.path.join(into, first)) or \
                            os.path.islink(os.path.join(into, first)):
                        die("cp: %s: the guest sent %r, a link to %r outside the copy"
                            % (what, m.name, m.linkname))
                    make_dirs(into, parts[:-1], budget, what, m.name)
                    os.link(os.path.join(into, first), dest, follow_symlinks=False)
                else:
                    die("cp: %s: the guest sent %r, a %s: only files, directories and links "
                        "are copied" % (what, m.name, "device" if m.ischr() or m.isblk()
                                        else "special file"))
    except HeaderTooLong:
        die("cp: %s: the guest sent a tar header of more than %s (a name, a pax header, a "
            "sparse map)" % (what, size_text(HEADER_MAX)))
    except (tarfile.TarError, OSError) as e:
        die("cp: %s: %s" % (what, e))
    except (ValueError, RecursionError) as e:	# what tarfile raises on some headers
        die("cp: %s: the guest sent a malformed tar header (%s: %s)"
            % (what, type(e).__name__, str(e)[:200]))

    def member_name(path):
        return "/".join(((top,) if top is not None else ()) + path)
    wrong = link_leaving(links)
    if wrong and wrong[1]:	# no link below another: its directory would be the link's
        die("cp: %s: the guest sent a link %r below the link %r"
            % (what, member_name(wrong[0]), member_name(wrong[1])))
    if wrong:
        die("cp: %s: the guest sent a link %r -> %r whose way leaves the copy (an absolute "
            "target, '..' above the copy, or a loop)"
            % (what, member_name(wrong[0]), links[wrong[0]]))
    root = os.path.join(into, top) if top is not None else into
    for path, target in links.items():
        # Its directory must be one unpacked here, a real one (no link is made yet).
        dest = os.path.join(root, *path)
        parent = os.path.dirname(dest)
        if not os.path.isdir(parent) or os.path.islink(parent):
            die("cp: %s: the guest sent a link %r whose directory is no directory of the copy"
                % (what, os.path.relpath(dest, into)))
        try:
            os.symlink(target, dest)
        except OSError as e:
            die("cp: %s: %s" % (what, e))
    if links:	# the same, asked of the file system (one that folds case takes 'B' for 'b')
        try:
            out = fs_link_leaving(os.path.normpath(os.path.abspath(root)))
        except OSError as e:
            die("cp: %s: %s" % (what, e))
        if out:
            die("cp: %s: the guest sent a link %r -> %r whose way leaves the copy on this "
                "file system (a directory that folds case, say, takes one name for another)"
                % (what, os.path.relpath(out, into), os.readlink(out)))


def fetch_tree(state, i, parent, name, into, budget, what):
    """Guest I's directory PARENT/NAME (its tar over ssh) unpacked into INTO/NAME."""
    p = subprocess.Popen(ssh_base(state, i) + ["--", "tar -C %s -cf - -- %s"
                                               % (shlex.quote(parent), shlex.quote(name))],
                         stdout=subprocess.PIPE)
    try:
        safe_extract(p.stdout, into, name, what, budget)
        extra = 0	# what tar pads its last record with; a guest could send on for ever
        while extra <= HEADER_MAX:
            data = p.stdout.read(65536)
            if not data:
                break
            extra += len(data)
        else:
            die("cp: %s: the guest sends on after its archive's end" % what)
        if p.wait():
            die("cp: reading %s failed (status %d)" % (what, p.returncode))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    top = os.path.join(into, name)
    if not os.path.isdir(top) or os.path.islink(top):
        die("cp: %s: the guest sent no directory %r" % (what, name))


def fetch_file(state, i, src, path, budget, what):
    """Guest I's file SRC (cat over ssh) into the new file PATH."""
    p = subprocess.Popen(ssh_base(state, i) + ["--", "cat -- %s" % shlex.quote(src)],
                         stdout=subprocess.PIPE)
    try:
        budget.take(BLOCK, what, repr(src))
        got = 0
        with open(path, "xb") as f:
            while True:
                data = p.stdout.read(CHUNK)
                if not data:
                    break
                budget.take(blocks(got, got + len(data)), what,
                            "%r (more than %s)" % (src, size_text(got + len(data))))
                f.write(data)
                got += len(data)
        if p.wait():
            die("cp: reading %s failed (status %d)" % (what, p.returncode))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def copy_out(state, i, srcs, dst, limit=MAX_BYTES):
    """Guest I's SRCS into DST (a directory, or with one source its new name), within LIMIT
    bytes (Budget): each source unpacked or written beside DST first, and moved into place
    only once every one has come, so a copy refused leaves nothing."""
    if len(srcs) > 1 and not os.path.isdir(dst):
        die("cp: %s is not a directory, and there are %d sources" % (dst, len(srcs)))
    into = dst if os.path.isdir(dst) else os.path.dirname(os.path.abspath(dst))
    if not os.path.isdir(into):
        die("cp: %s: no such directory" % into)
    plan = []
    for src in srcs:
        kind = guest_kind(state, i, src)
        if not kind:
            die("cp: %d:%s: no such file or directory in guest %d" % (i, src, i))
        norm = os.path.normpath(src)
        name = os.path.basename(norm)
        if name in ("", ".", ".."):
            die("cp: %d:%s: copy a directory by its name (%d:/root/DIR), not / or .. itself"
                % (i, src, i))
        final = os.path.join(dst, name) if os.path.isdir(dst) else dst
        if os.path.lexists(final) and kind == "d":
            die("cp: %s is there already; copy into a directory that does not hold %s"
                % (final, name))
        if kind == "f" and os.path.isdir(final):
            die("cp: %s is a directory; a file cannot replace it" % final)
        if any(final == p[3] for p in plan):
            die("cp: %d:%s and another source would both be %s" % (i, src, final))
        plan.append((src, kind, name, final, os.path.dirname(norm) or "."))
    budget = Budget(limit)
    tmp = tempfile.mkdtemp(prefix=".qhca-cp.", dir=into)
    try:
        moves = []
        for k, (src, kind, name, final, parent) in enumerate(plan):
            part = os.path.join(tmp, str(k))
            os.mkdir(part)
            what = "%d:%s" % (i, src)
            if kind == "d":
                fetch_tree(state, i, parent, name, part, budget, what)
                moves.append((os.path.join(part, name), final, os.rename))
            else:
                fetch_file(state, i, src, os.path.join(part, "file"), budget, what)
                moves.append((os.path.join(part, "file"), final, os.replace))
        for path, final, move in moves:
            try:
                move(path, final)
            except OSError as e:
                die("cp: %s: %s" % (final, e.strerror or e))
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
        copy_out(state, guests.pop(), [p for _, p in srcs], dst, args.max_bytes)
    else:
        die("cp: copy from the host into one guest (cp FILE... I:PATH) or from one guest to "
            "the host (cp I:PATH... DIR); between guests, copy through the host")
    info("cp: %d item%s copied" % (len(srcs), "" if len(srcs) == 1 else "s"))
    sys.stdout.flush()
    return 0
