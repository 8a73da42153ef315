# SPDX-License-Identifier: GPL-2.0-or-later
"""The qhca launcher behind tools/qhca: boot VMs with a qhca RDMA device on the simulated
fabric and work inside them. One module a concern:

  cli      the command line (every verb and option; the usage text)
  common   paths, messages, the run's state file, guest numbering, MACs and ports
  vms      QEMU's command line and the guests' lifecycle: up, down, kill, reset, start, status
  guest    inside a guest: exec, ssh, console
  qmp      QEMU's machine protocol: link, device
  fabric   the fabric switch: starting it, its control socket, 'qhca fabric'
  netns    network namespaces and taps (--netdev tap, --fabric-netns)
  explain  'qhca explain': tracing and capture around a command
  run      'qhca run', for CI: up, setup, the test, TAP and JUnit, down
  tap      what 'run' makes of a test's output: TAP parsed, the verdict, the TAP and JUnit
           files (no guest needed: tests/selftest_run.py)
  story    the renderer of 'explain' (text, JSON lines, SVG); runs alone on a directory:
           python3 tools/qhcatool/story.py [--all] DIR
"""
