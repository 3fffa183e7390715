#!/bin/bash
# Runs a sanitized (debug preset) test binary with a private D-Bus session bus, once without and
# once with tests/lsan.supp, and says what LeakSanitizer reported each time: the check for the
# libdbus suppression, which a machine without a session bus never exercises.
#   tests/ui/lsan_dbus.sh build/debug/bin/poolscope_ui_tests [gtest filter]
# Needs dbus-daemon (Debian package dbus-daemon).
set -u
bin=$1
filter=${2:-*}
supp=$(cd "$(dirname "$0")/.." && pwd)/lsan.supp
work=$(mktemp -d)
trap 'kill "$bus_pid" 2>/dev/null; rm -rf "$work"' EXIT
dbus-daemon --session --fork --print-address=3 --print-pid=4 3>"$work/addr" 4>"$work/pid" || exit 1
bus_pid=$(cat "$work/pid")
export DBUS_SESSION_BUS_ADDRESS=$(head -1 "$work/addr")
export QT_QPA_PLATFORM=offscreen
echo "session bus: $DBUS_SESSION_BUS_ADDRESS (pid $bus_pid)"
for mode in without with; do
  opts="detect_leaks=1"
  [ "$mode" = with ] && opts="$opts:suppressions=$supp:print_suppressions=1"
  LSAN_OPTIONS=$opts ASAN_OPTIONS=detect_leaks=1 "$bin" --gtest_filter="$filter" >"$work/$mode.log" 2>&1
  rc=$?
  echo "$mode suppressions: exit $rc; $(grep -c '^Direct leak\|^Indirect leak' "$work/$mode.log") leak report(s); libdbus frames: $(grep -c 'libdbus' "$work/$mode.log"); $(grep -m1 'SUMMARY: AddressSanitizer' "$work/$mode.log")"
  grep -A3 'Suppressions used' "$work/$mode.log"
  grep -m1 -A12 '^Direct leak\|^Indirect leak' "$work/$mode.log"
done
