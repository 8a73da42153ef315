#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Run every command of a tutorial page and compare its output with the page, in substance.

  tutorial_check.py docs/tutorial.md

The page's ```console blocks hold commands ("$ CMD", from the repository's root) each
followed by the output the page shows for it. Every command must exit with status 0, in
the page's order. Its output must match the page's in substance: addresses, keys, QP
numbers, PSNs and times change from run to run, so every word with a digit in it is
compared as "a number"; a story line ("12  0.345 ms  vm1 qhca  checked ...") is its
actor and first words, and the page's story lines of each guest must come in the real
story in the same order (the guests' steps interleave as each run's timing has it); every
other line the page shows must be a line of the real output. A line "..."
on the page stands for lines it leaves out.
"""
import re
import subprocess
import sys

STORY = re.compile(r"^\s*\d+\s+[\d.]+ ms\s+(vm\d+ cpu|vm\d+ qhca|wire)\s+(.*)$")


def shape(text, words=None):
    toks = text.split()
    if words:
        toks = toks[:words]
    return " ".join("#" if re.search(r"\d", t) else t for t in toks)


def story_shape(m):
    """(the guest whose step it is, the step's actor and first words, numbers as #)."""
    actor, text = m.group(1), m.group(2)
    vm = actor.split()[0] if actor != "wire" else text.split()[0]
    return vm, re.sub(r"\d+", "#", actor) + " " + shape(text, 3)


def blocks(path):
    """(line number, command, [expected output lines]) of every console block."""
    out, cmd, exp, start = [], None, [], 0
    inside = False
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not inside:
                inside = line.strip() == "```console"
                continue
            if line.strip() == "```":
                if cmd:
                    out.append((start, cmd, exp))
                cmd, exp, inside = None, [], False
                continue
            if line.startswith("$ "):
                if cmd:
                    out.append((start, cmd, exp))
                cmd, exp, start = line[2:], [], n
            elif cmd and cmd.endswith("\\"):
                cmd = cmd[:-1] + line.strip()
            elif cmd:
                exp.append(line)
    return out


def compare(expected, actual):
    """What of EXPECTED is not in ACTUAL, in substance (a list of messages)."""
    missing = []
    real_story = [story_shape(m) for m in map(STORY.match, actual) if m]
    real_lines = {shape(line) for line in actual}
    at = {}
    for line in expected:
        if not line.strip() or line.strip() == "...":
            continue
        m = STORY.match(line)
        if m:
            # In order among the steps of the same guest: the two guests' steps interleave
            # as the run's timing has it.
            vm, want = story_shape(m)
            mine = [sh for v, sh in real_story if v == vm]
            try:
                at[vm] = mine.index(want, at.get(vm, 0)) + 1
            except ValueError:
                missing.append("story step '%s' (as '%s') not found in %s's order" %
                               (line.strip(), want, vm))
            continue
        if shape(line) not in real_lines:
            missing.append("line '%s' not in the output" % line.strip())
    return missing


def main():
    path = sys.argv[1]
    failed = 0
    todo = blocks(path)
    if not todo:
        print("FAIL: %s has no console block" % path)
        return 1
    for start, cmd, expected in todo:
        p = subprocess.run(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=900)
        actual = p.stdout.splitlines()
        problems = [] if p.returncode == 0 else ["exit status %d" % p.returncode]
        problems += compare(expected, actual)
        print("%s %s:%d: %s" % ("ok  " if not problems else "FAIL", path, start, cmd))
        for msg in problems:
            print("    " + msg)
        if problems:
            failed += 1
            print("    its output was:\n" + "\n".join("      " + a for a in actual[-40:]))
    print("%d commands, %d failed" % (len(todo), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
