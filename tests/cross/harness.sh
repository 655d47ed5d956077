#!/bin/sh
# Checks that tests/cross/aarch64.sh's verdicts mean what they say, with stub
# emulators in place of qemu-aarch64 (SNUG_QEMU_AARCH64) over the build that
# cross.aarch64 made (so no rebuild): a test that prints FAILED and exits 1
# fails the script, a missing emulator is a skip (77), and tests that exit 0
# pass. Before this check existed the script piped each test through tail in
# dash, and a failing AArch64 test passed.
#   tests/cross/harness.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "FAIL something"; echo "1 check(s) FAILED"; exit 1\n' >"$tmp/qemu-fails"
printf '#!/bin/sh\necho "all ok"; exit 0\n' >"$tmp/qemu-passes"
# hangs every time; hangs the first time only (then passes)
printf '#!/bin/sh\nexec sleep 30\n' >"$tmp/qemu-hangs"
printf '#!/bin/sh\nif [ -e "%s/hung" ]; then echo "all ok"; exit 0; fi\ntouch "%s/hung"; exec sleep 30\n' "$tmp" "$tmp" \
    >"$tmp/qemu-hangs-once"
chmod +x "$tmp/qemu-fails" "$tmp/qemu-passes" "$tmp/qemu-hangs" "$tmp/qemu-hangs-once"
bad=0
expect() { # expect WANT EMULATOR [TIMEOUT]
    rc=0
    SNUG_QEMU_AARCH64=$2 SNUG_QEMU_TIMEOUT=${3:-300} sh "$src/tests/cross/aarch64.sh" "$src" "$out" >"$tmp/log" 2>&1 ||
        rc=$?
    if [ "$rc" -ne "$1" ]; then
        echo "FAIL: with $2 as the emulator aarch64.sh exited $rc, want $1"
        tail -5 "$tmp/log"
        bad=1
    else
        echo "ok: with $(basename "$2") as the emulator aarch64.sh exits $rc"
    fi
}
expect 1 "$tmp/qemu-fails"
expect 77 "$tmp/no-such-qemu"
expect 0 "$tmp/qemu-passes"
expect 1 "$tmp/qemu-hangs" 1
expect 0 "$tmp/qemu-hangs-once" 1
exit $bad
