# SPDX-License-Identifier: GPL-2.0-or-later
"""The qhca launcher behind tools/qhca: boot VMs with a qhca RDMA device on the simulated
fabric and work inside them. One module a concern:

  cli       the command line (every verb and option; the usage text)
  common    paths, messages, the run's state file, guest numbering, MACs and ports
  vms       QEMU's command line and the guests' lifecycle: up, down, kill, reset, start, status
  guest     inside a guest: exec, ssh, console; guest_run, its output bounded
  files     files between host and guests: 'up --share' (9p), 'cp' (a guest's tar checked)
  kernel    a kernel of your own in the guests: 'up --kernel BZIMAGE --modules DIR'
  libvirt   the guests as libvirt domains: 'up --libvirt URI', their XML, virsh
  snapshot  'qhca snapshot save|load' and 'up --snapshot': savevm and loadvm of every guest
  migrate   'qhca migrate I': live migration to a new QEMU process on this host
  qmp       QEMU's machine protocol: link, device
  fabric    the fabric switch: starting it, its control socket, 'qhca fabric'
  netns     network namespaces and taps (--netdev tap, --fabric-netns)
  explain   'qhca explain': tracing and capture around a command
  run       'qhca run', for CI: up, setup, the test, TAP and JUnit, down
  tap       what 'run' makes of a test's output: TAP parsed, the verdict, TAP and JUnit files
  story     the renderer of 'explain' (text, JSON lines, SVG); alone: story.py [--all] DIR

tests/selftest_run.py and tests/selftest_launcher.py test them without a guest.
"""
