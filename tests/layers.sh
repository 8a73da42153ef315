#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The layers of the house (docs/architecture.md), checked on the sources: a file of each
# layer includes headers only of the layers it may use.
#   abi/        abi/
#   wire/       wire/
#   hw-model/engine/  hw-model/engine/, wire/, abi/ (and no QEMU header)
#   fabric/     fabric/, wire/, abi/ (never the device's)
# The build holds the same lines (each library sees only its layers' include directories,
# meson.build); this check also catches a path written out ("../hw-model/engine/x.h").
#   tests/layers.sh [ROOT]   prints one line per violation and fails on any
set -uo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
bad=0

check_layer() {	# check_layer DIR ALLOWED_DIR...
    local dir=$1 f h ok a; shift
    for f in "$root/$dir"/*.[ch]; do
        [ -e "$f" ] || continue
        while IFS= read -r h; do
            ok=0
            case $h in
            qemu/*|hw/*|sysemu/*|system/*|migration/*|exec/*)
                echo "layers: $dir/${f##*/} includes a QEMU header (\"$h\")"; bad=1; continue ;;
            */*) ;;
            *)
                for a in "$@"; do [ -e "$root/$a/$h" ] && ok=1; done ;;
            esac
            if [ "$ok" = 0 ]; then
                echo "layers: $dir/${f##*/} includes \"$h\", not a header of ${*/%//}"
                bad=1
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(qemu|hw|sysemu|system|migration|exec)/' "$f"; then
            echo "layers: $dir/${f##*/} includes a QEMU header (<...>)"
            bad=1
        fi
    done
}

check_layer abi abi
check_layer wire wire
check_layer hw-model/engine hw-model/engine wire abi
check_layer fabric fabric wire abi
exit $bad
