# SPDX-License-Identifier: GPL-2.0-or-later
"""A kernel of your own in the guests: 'up --kernel BZIMAGE --modules DIR' boots it with
the flavour image's userland. The image's kernel layer is replaced by one made for that
kernel (scripts/kernel-layer.sh: the modules the guests need from DIR, and qhca.ko built
with 'make driver KDIR=YOUR-TREE')."""
import os
import re
import struct
import subprocess

from .common import CACHE, RUN, die, info

# A kernel release as uname -r prints it; it names directories and files of the cache.
RELEASE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]*\Z")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def module_dir(path):
    """DIR as make modules_install INSTALL_MOD_PATH=DIR left it, or its lib/modules/RELEASE
    itself: the RELEASE directory."""
    path = os.path.realpath(path)
    top = os.path.join(path, "lib", "modules")
    if os.path.isdir(top):
        rels = [r for r in sorted(os.listdir(top)) if os.path.isdir(os.path.join(top, r))]
        if len(rels) != 1:
            die("--modules %s: want one kernel in lib/modules, found %s"
                % (path, ", ".join(rels) or "none"))
        return os.path.join(top, rels[0])
    if os.path.exists(os.path.join(path, "modules.dep")):
        return path
    die("--modules %s: no lib/modules/RELEASE in it, nor a modules.dep (make modules_install "
        "INSTALL_MOD_PATH=%s)" % (path, path))


def bzimage_release(path):
    """The release an x86 bzImage was built as (the first word of its version string, which
    the boot protocol's header points at), or None when PATH is no bzImage."""
    try:
        with open(path, "rb") as f:
            head = f.read(0x10000)
    except OSError:
        return None
    if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
        return None
    off = struct.unpack_from("<H", head, 0x20E)[0] + 0x200
    if not 0x200 < off < len(head):
        return None
    words = head[off:off + 256].split(b"\0")[0].split()
    return words[0].decode("ascii", "replace") if words else None


def own_kernel_image(kernel, modules, flavour_image_dir):
    """(kernel, initrd) for 'up --kernel KERNEL --modules MODULES': the flavour's base and
    qhca layers with a kernel layer for KERNEL, written to the run directory."""
    if not kernel:
        die("--modules goes with --kernel BZIMAGE (the flavour's own kernel has its modules)")
    kernel = os.path.realpath(kernel)
    if not os.path.isfile(kernel):
        die("--kernel %s: no such file (the bzImage, arch/x86/boot/bzImage)" % kernel)
    if not modules:
        die("--kernel needs --modules DIR: the kernel's modules (make modules_install "
            "INSTALL_MOD_PATH=DIR), from which the guests get theirs")
    moddir = module_dir(modules)
    rel = os.path.basename(moddir)
    if not RELEASE_RE.match(rel):
        die("--modules %s: %r is no kernel release" % (modules, rel))
    built = bzimage_release(kernel)
    if built is None:
        die("--kernel %s: not an x86 bzImage (arch/x86/boot/bzImage)" % kernel)
    if built != rel:
        die("--kernel %s is %s, but --modules %s holds the modules of %s"
            % (kernel, built, modules, rel))
    ko = os.path.join(CACHE, "driver-kdir", rel, "guest-driver", "qhca.ko")
    if not os.path.isfile(ko):
        die("no qhca.ko for %s: run 'make driver KDIR=YOUR-TREE' in the qhca tree first" % rel)
    parts = [os.path.join(flavour_image_dir, f) for f in ("base.cpio", "qhca.cpio", "libtop")]
    for p in parts:
        if not os.path.isfile(p):
            die("%s missing: build the flavour's image first (make image)" % p)
    with open(parts[2]) as f:
        libtop = f.read().strip()
    os.makedirs(RUN, exist_ok=True)
    layer = os.path.join(RUN, "kernel-%s.cpio" % rel)
    info("kernel %s: its layer of modules and qhca.ko" % rel)
    # Lenient: a small kernel of your own may lack modules the longer tiers use (a warning).
    if subprocess.run(["bash", os.path.join(ROOT, "scripts", "kernel-layer.sh"), "--lenient",
                       moddir, ko, libtop, layer]).returncode:
        die("the kernel layer for %s could not be made (see above)" % rel)
    initrd = os.path.join(RUN, "initrd-%s.cpio" % rel)
    with open(initrd + ".tmp", "wb") as out:
        for p in (parts[0], layer, parts[1]):
            with open(p, "rb") as f:
                while True:
                    chunk = f.read(1 << 22)
                    if not chunk:
                        break
                    out.write(chunk)
    os.replace(initrd + ".tmp", initrd)
    os.unlink(layer)
    return kernel, initrd
