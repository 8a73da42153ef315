# SPDX-License-Identifier: GPL-2.0-or-later
"""What 'qhca run' (run.py, docs/ci.md) makes of a test's output, without a guest: the TAP
read from it (TAP 13/14: test lines, the plan, "Bail out!", the SKIP and TODO directives),
the verdict of the run (a red run never reports green), and the TAP and JUnit files written
from them, valid whatever bytes the guest printed. The output is read in blocks and kept
bounded: a tail for JUnit's <system-out>, each line cut to a length for the parser.
tests/selftest_run.py checks all of it (make check's selftest tier).
"""
import re
from xml.sax.saxutils import escape, quoteattr

OUTPUT_KEEP = 1 << 20	# bytes of the test's output kept for JUnit's <system-out> (its tail)
LINE_MAX = 4096		# bytes of a line the TAP parser sees; the rest of a longer line is cut

# A test line (TAP 13/14): "ok" or "not ok" at the start of the line (case-sensitive), then
# the end of the line, or whitespace and a test number or "-". "ok so far", "okay" and
# unittest's "OK" are none.
TEST_RE = re.compile(r"(not )?ok(?:$|[ \t]+(?:(\d+)(?=$|[ \t])|(?=-)))[ \t]*(.*)$")
# The directive after an unescaped "#": SKIP (also "skipped", "skipping": SKIP\S*) or TODO,
# in any case, then the end or whitespace and the reason.
DIRECTIVE_RE = re.compile(r"[ \t]*(?:(skip)\S*|(todo))(?:$|[ \t]+(.*)$)", re.I)
PLAN_RE = re.compile(r"1\.\.(\d+)[ \t]*(?:#[ \t]*(.*))?$")
BAIL_RE = re.compile(r"[ \t]*Bail out!(.*)$")

# What XML 1.0 does not allow in a document at all (not even as &#N;): the C0 controls but
# tab, newline and carriage return; surrogates, which alone are no character; U+FFFE, U+FFFF.
XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# In a name (a test case's, a suite's, a TAP line's) no control character at all: a newline
# would end a TAP line, an escape would drive a terminal showing the report.
NAME_BAD = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# What a terminal takes as a command: the C0 controls but newline and tab, DEL, and the C1
# controls (in UTF-8: C2 80..C2 9F; CSI, U+009B, starts a sequence as ESC [ does).
TTY_BAD = re.compile(b"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def _visible(m):
    """A character XML or a terminal may not get, written as its code: \\x1b, \\ud800."""
    c = m.group(0)
    return "\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c)


def xml_text(text):
    """TEXT as character data XML 1.0 allows: each character it forbids written as its code
    (ESC as \\x1b), then escaped (<, >, &)."""
    return escape(XML_BAD.sub(_visible, text))


def clean_name(text):
    """TEXT as a name on one line: whitespace controls (tab, newline, CR) as a space, other
    control characters and what XML forbids as their code."""
    text = re.sub("[\t\n\r\x0b\x0c]", " ", text)
    return NAME_BAD.sub(_visible, text).strip()


def xml_attr(text):
    return quoteattr(clean_name(text))


def tap_name(text):
    """A name or reason for a TAP line: one line, and its "#" and "\\" escaped (TAP 14), so that
    no part of it reads as a directive."""
    return clean_name(text).replace("\\", "\\\\").replace("#", "\\#")


def _split_directive(rest):
    """REST of a test line after its number -> (description, directive or None, reason): the
    description ends at the first unescaped "#" that starts a directive; "\\#" and "\\\\" are a
    "#" and a "\\" in it."""
    desc = []
    i = 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest) and rest[i + 1] in "#\\":
            desc.append(rest[i + 1])
            i += 2
            continue
        if c == "#":
            m = DIRECTIVE_RE.match(rest, i + 1)
            if m:
                return ("".join(desc).strip(), "skip" if m.group(1) else "todo",
                        (m.group(3) or "").strip())
        desc.append(c)
        i += 1
    return "".join(desc).strip(), None, ""


class TapParser:
    """Reads a test's output line by line. Only lines at the start of a line count (a
    subtest's, indented, are its parent's business, as are YAML blocks); the first plan
    counts; nothing after "Bail out!". Each test line is a case (name, result, reason) with
    result 'pass', 'fail', 'skip' ("ok ... # SKIP"), 'todo' ("not ok ... # TODO": expected
    to fail, not a failure); "ok ... # TODO" passes, "not ok ... # SKIP" fails (a skip does
    not excuse a failure, as in Perl's TAP::Harness)."""

    def __init__(self):
        self.cases = []
        self.plan = None	# N of "1..N"
        self.plan_reason = ""
        self.bailed = None	# the reason after "Bail out!"

    def line(self, text):
        if self.bailed is not None:
            return
        text = text.rstrip("\r\n")
        m = BAIL_RE.match(text)
        if m:
            self.bailed = m.group(1).strip()
            return
        m = PLAN_RE.match(text)
        if m:
            if self.plan is None:
                self.plan = int(m.group(1))
                self.plan_reason = re.sub(r"(?i)^skip\S*\s*", "", (m.group(2) or "").strip())
            return
        m = TEST_RE.match(text)
        if not m:
            return
        failed, number, rest = m.group(1), m.group(2), m.group(3)
        if rest.startswith("-") and (len(rest) == 1 or rest[1] in " \t"):
            rest = rest[1:]
        desc, directive, reason = _split_directive(rest)
        name = desc or "test %s" % (number or len(self.cases) + 1)
        if directive == "skip" and not failed:
            self.cases.append((name, "skip", reason))
        elif directive == "todo" and failed:
            self.cases.append((name, "todo", reason))
        elif failed:
            why = "not ok" + (" # SKIP " + reason if directive else "")
            self.cases.append((name, "fail", why))
        else:
            self.cases.append((name, "pass", ""))


def verdict(parser, rc, test, interrupted=None):
    """The cases and status of a test that ended: its TAP cases, and a failing case for each
    way the run is red without a "not ok" (so that TAP and JUnit never show green for it):
    "Bail out!", fewer or more results than the plan, a status other than 0; without any TAP,
    the command is one case, passed when RC is 0. INTERRUPTED (a case name, "timeout" or
    "cancelled", with RC the run's status) says the test did not end by itself: that case,
    after what TAP came. Returns (cases, status): 1 when RC was 0 and a case failed."""
    cases = list(parser.cases)
    tap = bool(cases) or parser.plan is not None or parser.bailed is not None
    if interrupted:
        cases.append(interrupted)
        return cases, rc or 1
    if not tap:
        return [(test, "pass" if rc == 0 else "fail",
                 "" if rc == 0 else "exit status %d" % rc)], rc
    if parser.bailed is not None:
        cases.append(("bail out" + (": " + parser.bailed if parser.bailed else ""), "fail",
                      "Bail out! " + parser.bailed))
    elif parser.plan is not None and parser.plan != len(parser.cases):
        what = "plan 1..%d but %d result%s" % (parser.plan, len(parser.cases),
                                                "" if len(parser.cases) == 1 else "s")
        cases.append((what, "fail", what))
    elif parser.plan == 0 and not cases:	# "1..0 # SKIP why": the whole test skipped
        cases.append((test, "skip", parser.plan_reason))
    if rc != 0 and not any(c[1] == "fail" for c in cases):
        cases.append(("exit status %d" % rc, "fail", "%s exited with status %d" % (test, rc)))
    if rc == 0 and any(c[1] == "fail" for c in cases):
        rc = 1
    return cases, rc


def counts(cases):
    """(passed, failed, skipped) of CASES; a TODO counts as skipped."""
    return (sum(c[1] == "pass" for c in cases), sum(c[1] == "fail" for c in cases),
            sum(c[1] in ("skip", "todo") for c in cases))


class Capture:
    """A test's output as it comes, in blocks of bytes: the last OUTPUT_KEEP bytes kept, each
    line (its first LINE_MAX bytes) given to a TapParser. Memory stays bounded however much
    the test prints, with or without newlines."""

    def __init__(self, keep=OUTPUT_KEEP, line_max=LINE_MAX):
        self.keep, self.line_max = keep, line_max
        self.tail = bytearray()
        self.total = 0
        self.pending = bytearray()	# the current line so far, at most line_max bytes
        self.parser = TapParser()

    def feed(self, data):
        self.total += len(data)
        self.tail += data
        if len(self.tail) > 2 * self.keep:
            del self.tail[:len(self.tail) - self.keep]
        start = 0
        while start <= len(data):
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            room = self.line_max - len(self.pending)
            if room > 0:
                self.pending += data[start:min(end, start + room)]
            if nl < 0:
                break
            self._line()
            start = nl + 1

    def _line(self):
        self.parser.line(self.pending.decode("utf-8", "replace"))
        self.pending = bytearray()

    def close(self):
        """The end of the output: its last line, if it had no newline, is read too."""
        if self.pending:
            self._line()

    def text(self, limit=None):
        """The output kept (its last KEEP bytes, or LIMIT), as text; when some was left out,
        a first line says how much."""
        limit = min(limit or self.keep, self.keep)
        kept = bytes(self.tail[-limit:]) if limit else b""
        out = kept.decode("utf-8", "replace")
        if self.total > len(kept):
            out = "[qhca run: the first %d bytes of the output are left out]\n%s" % (
                self.total - len(kept), out)
        return out


class TtyFilter:
    """Guest output for a terminal: the control characters that drive it (escape sequences,
    bells, carriage returns, C1 controls) taken out; newlines and tabs stay. A C1 control's
    first byte at the end of a block waits for the next."""

    def __init__(self):
        self.carry = b""

    def __call__(self, data):
        data = self.carry + data
        self.carry = b""
        if data.endswith(b"\xc2"):
            data, self.carry = data[:-1], b"\xc2"
        return TTY_BAD.sub(b"", data)

    def flush(self):
        out, self.carry = self.carry, b""
        return out


def write_tap(path, cases):
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write("TAP version 13\n1..%d\n" % len(cases))
        for k, (name, result, reason) in enumerate(cases, 1):
            if result == "skip":
                f.write("ok %d - %s # SKIP %s\n" % (k, tap_name(name), tap_name(reason)))
            elif result == "todo":
                f.write("not ok %d - %s # TODO %s\n" % (k, tap_name(name), tap_name(reason)))
            else:
                f.write("%s %d - %s\n" % ("ok" if result == "pass" else "not ok", k,
                                          tap_name(name)))


def write_junit(path, suite, cases, output, seconds):
    """One <testsuite> SUITE of CASES, with OUTPUT as its <system-out>: valid XML 1.0 whatever
    the names and the output hold."""
    passed, failed, skipped = counts(cases)
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        f.write('<testsuites tests="%d" failures="%d" skipped="%d" time="%.1f">\n'
                % (len(cases), failed, skipped, seconds))
        f.write('  <testsuite name=%s tests="%d" failures="%d" skipped="%d" time="%.1f">\n'
                % (xml_attr(suite), len(cases), failed, skipped, seconds))
        for name, result, reason in cases:
            f.write('    <testcase classname=%s name=%s>' % (xml_attr(suite), xml_attr(name)))
            if result == "fail":
                f.write('<failure message=%s/>' % xml_attr(reason or "failed"))
            elif result == "skip":
                f.write('<skipped message=%s/>' % xml_attr(reason))
            elif result == "todo":
                f.write('<skipped message=%s/>' % xml_attr("TODO " + reason))
            f.write('</testcase>\n')
        f.write('    <system-out>%s</system-out>\n' % xml_text(output))
        f.write('  </testsuite>\n</testsuites>\n')
