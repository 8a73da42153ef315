#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the libFuzzer targets (clang, with ASan and UBSan) that link the engine and the wire
# codecs alone, the InfiniBand switch's (fuzz_ibswitch) and the fabric's control socket's
# (fuzz_fabric_control: the fabric and the codecs, as qhca-fabric);
# generate their seed corpora. Prints the build directory.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_pkgs clang libclang-rt-14-dev python3 zlib1g-dev
out="$QHCA_CACHE/fuzz"
mkdir -p "$out"
srcs=("$QHCA_ROOT"/hw-model/engine/*.c "$QHCA_ROOT"/wire/*.c)
for t in admin wqe rx mixed migrate iwarp; do
    bin="$out/fuzz_$t"
    # Rebuild when any source is newer than the binary.
    if [ -x "$bin" ] && [ -z "$(find "$QHCA_ROOT/hw-model/engine" "$QHCA_ROOT/wire" \
            "$QHCA_ROOT/abi" "$QHCA_ROOT/tests/fuzz" -newer "$bin" -type f | head -n1)" ]; then
        continue
    fi
    step "fuzz: building fuzz_$t" >&2
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$QHCA_ROOT/abi" -I"$QHCA_ROOT/wire" -I"$QHCA_ROOT/hw-model/engine" \
        -DQHCA_CRC_ZLIB "$QHCA_ROOT/tests/fuzz/fuzz_$t.c" "${srcs[@]}" -lz -o "$bin" >&2 ||
        die "building fuzz_$t failed"
done
# The fabric's targets link the fabric and the wire codecs, as qhca-fabric does (and see
# only their headers): the InfiniBand switch (its target includes fabric/ibswitch.c itself),
# and the control commands and scripts with frames and time between them.
fabric_target() {	# fabric_target NAME FABRIC_SOURCES...
    local t=$1 bin="$out/fuzz_$1"
    shift
    if [ -x "$bin" ] && [ -z "$(find "$QHCA_ROOT/fabric" "$QHCA_ROOT/wire" \
            "$QHCA_ROOT/tests/fuzz" "$QHCA_ROOT/tests/unit" -newer "$bin" -type f | head -n1)" ]; then
        return
    fi
    step "fuzz: building fuzz_$t" >&2
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$QHCA_ROOT/wire" -I"$QHCA_ROOT/fabric" \
        -I"$QHCA_ROOT/tests/unit" -DQHCA_CRC_ZLIB "$QHCA_ROOT/tests/fuzz/fuzz_$t.c" "$@" \
        "$QHCA_ROOT"/wire/*.c -lz -lm -o "$bin" >&2 ||
        die "building fuzz_$t failed"
}
fabric_target ibswitch "$QHCA_ROOT"/fabric/{switch,impair,control,capture}.c
fabric_target fabric_control "$QHCA_ROOT"/fabric/{switch,impair,control,capture,ibswitch}.c
python3 "$QHCA_ROOT/tests/fuzz/make_seeds.py" "$out/seeds" >&2
echo "$out"
