#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the libFuzzer targets (clang, with ASan and UBSan) that link the engine alone, and
# generate their seed corpora. Prints the build directory.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_pkgs clang libclang-rt-14-dev python3 zlib1g-dev
out="$QHCA_CACHE/fuzz"
mkdir -p "$out"
srcs=("$QHCA_ROOT"/hw-model/engine/*.c)
for t in admin wqe rx mixed; do
    bin="$out/fuzz_$t"
    # Rebuild when any source is newer than the binary.
    if [ -x "$bin" ] && [ -z "$(find "$QHCA_ROOT/hw-model/engine" "$QHCA_ROOT/abi" \
            "$QHCA_ROOT/tests/fuzz" -newer "$bin" -type f | head -n1)" ]; then
        continue
    fi
    step "fuzz: building fuzz_$t" >&2
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$QHCA_ROOT/abi" -I"$QHCA_ROOT/hw-model/engine" \
        -DQHCA_CRC_ZLIB "$QHCA_ROOT/tests/fuzz/fuzz_$t.c" "${srcs[@]}" -lz -o "$bin" >&2 ||
        die "building fuzz_$t failed"
done
python3 "$QHCA_ROOT/tests/fuzz/make_seeds.py" "$out/seeds" >&2
echo "$out"
