#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Add the apt sources qhca needs (deb-src for bookworm and trixie, bookworm-backports), with the
# archive URI taken from this machine's own apt configuration. Never names a host itself.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

target=/etc/apt/sources.list.d/qhca.sources

# Find the URI and keyring of the apt entry that serves the Debian "bookworm" suite.
find_debian_uri() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && [ "$f" != "$target" ] || continue
        awk '
            function flush() { if (suites ~ /(^| )bookworm( |$)/ && uri != "") { print uri " " key; exit } uri=""; suites=""; key="" }
            /^[ \t]*$/ { flush(); next }
            /^URIs:/ { uri=$2 }
            /^Suites:/ { $1=""; suites=$0 " " }
            /^Signed-By:/ { key=$2 }
            END { flush() }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1=="deb" { i=2; key=""; if ($2 ~ /^\[/) { while ($i !~ /\]$/) { if ($i ~ /signed-by=/) key=$i; i++ } if ($i ~ /signed-by=/) key=$i; i++ }
                        if ($(i+1)=="bookworm") { sub(/.*signed-by=/,"",key); sub(/\]$/,"",key); print $i " " key; exit } }' "$f"
    done
}

line=$(find_debian_uri | head -n1)
[ -n "$line" ] || die "no apt source for Debian bookworm found in /etc/apt; add one, then rerun"
uri=${line%% *}
key=${line#* }
[ -n "$key" ] && [ "$key" != "$uri" ] || key=/usr/share/keyrings/debian-archive-keyring.gpg

want=$(cat <<EOT
# Written by qhca scripts/setup-apt.sh from this machine's own apt configuration.
Types: deb-src
URIs: $uri
Suites: bookworm bookworm-updates
Components: main
Signed-By: $key

Types: deb deb-src
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: $key

# Source only: QEMU 10.0.x (its newest point release lives in trixie).
Types: deb-src
URIs: $uri
Suites: trixie
Components: main
Signed-By: $key
EOT
)

stamp="$QHCA_CACHE/stamps/apt-update"
if [ -f "$target" ] && [ "$(cat "$target")" = "$want" ] && [ -f "$stamp" ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "qhca needs these apt sources; run as root:" >&2
    echo "  sudo tee $target <<'EOT'" >&2
    echo "$want" >&2
    echo "EOT" >&2
    echo "  sudo apt-get update" >&2
    exit 1
fi
step "apt: adding deb-src and bookworm-backports sources ($target)"
printf '%s\n' "$want" > "$target"
step "apt: apt-get update"
apt-get update -q 2>&1 | tail -n 3
mkdir -p "$(dirname "$stamp")" && touch "$stamp"
