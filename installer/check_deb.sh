#!/usr/bin/env bash
# Builds the Debian package, lints it, installs it into a clean Debian 12 and runs it there: the
# CLI's help, `info` and `report` on an installed sample, the man pages, the trace type matched by
# content, the window offscreen with a screenshot, and the collector started the way the driver
# starts it (it must say plainly that CUPTI is missing, not crash).
#
# Usage: installer/check_deb.sh [OUT_DIR]        (default: build/check-deb)
#   POOLSCOPE_PACKAGE_BUILD  build folder for the package (default: build/package; configured
#                            here, tests and benchmarks off)
#   POOLSCOPE_CHROOT_CACHE   where the debootstrap'ed Debian 12 base is kept between runs
#                            (default: /var/tmp/poolscope-bookworm)
# Isolation: a docker container (debian:12) when a docker daemon answers; otherwise a fresh copy
# of a debootstrap'ed Debian 12 root, entered with chroot (needs root, debootstrap and network
# access to a Debian mirror). The chroot shares the host's kernel, /proc and network, nothing
# else. Takes minutes (packages are downloaded into the clean root), so it is not in ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=$(mkdir -p "${1:-build/check-deb}" && cd "${1:-build/check-deb}" && pwd)
build=${POOLSCOPE_PACKAGE_BUILD:-build/package}
export PATH="/usr/local/cuda/bin:$PATH"
step() { echo "== $*"; }
fail() { echo "check_deb: FAIL: $*" >&2; exit 1; }

step "configuring and building $build (the shipped targets only)"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOOLSCOPE_BUILD_TESTS=OFF \
      -DPOOLSCOPE_BUILD_BENCH=OFF "${launcher[@]}" >"$out/configure.log"
if grep -q poolscope_collector "$build/Makefile" 2>/dev/null; then
  # ccache and the collector's LTO link do not mix (HELPERS.md): build it uncached first.
  CCACHE_DISABLE=1 cmake --build "$build" -j "$(nproc)" --target poolscope_collector >"$out/build.log"
fi
cmake --build "$build" -j "$(nproc)" >>"$out/build.log"

step "cpack -G DEB"
rm -f "$build"/poolscope_*.deb "$build"/poolscope-dbgsym_*.ddeb
(cd "$build" && cpack -G DEB) >"$out/cpack.log" 2>&1 || { tail -30 "$out/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/poolscope_*.deb)
cp "$deb" "$out/"
ls "$build"/poolscope-dbgsym_*.ddeb >/dev/null 2>&1 && cp "$build"/poolscope-dbgsym_*.ddeb "$out/"
dpkg-deb --info "$deb" >"$out/control.txt"
dpkg-deb --contents "$deb" >"$out/contents.txt"
echo "   $(basename "$deb"): $(du -h "$deb" | cut -f1)"

step "lintian (errors fail the check)"
if command -v lintian >/dev/null; then
  lintian --fail-on error --info "$out"/*.deb | tee "$out/lintian.txt" || fail "lintian reported errors"
else
  fail "lintian is not installed (apt-get install lintian)"
fi
for f in "$build"/bin/poolscope "$build"/bin/poolscope-gui "$build"/bin/libpoolscope_collector.so; do
  [ -f "$f" ] || continue
  if readelf -d "$f" | grep -qE 'NEEDED.*(libcuda\.so|libcupti)'; then
    fail "$(basename "$f") links the NVIDIA driver or CUPTI; the package would need them"
  fi
done

# The commands run inside the clean root, after the package is installed.
cat >"$out/inside.sh" <<'EOF'
#!/bin/sh
set -eu
cd /tmp
fail() { echo "check_deb (inside): FAIL: $*" >&2; exit 1; }
echo "-- poolscope --help"
poolscope --help | head -5
echo "-- poolscope info (installed sample)"
poolscope info /usr/share/poolscope/samples/churn.poolscope | tee /check/info.txt | head -12
grep -Eq "^ +alloc +1232$" /check/info.txt || fail "info did not count the sample's 1232 allocations"
echo "-- poolscope report"
poolscope report /usr/share/poolscope/samples/trims_oom.poolscope >/check/report.txt
grep -q CUDA_ERROR_OUT_OF_MEMORY /check/report.txt || fail "report did not name the failed allocation's CUresult"
echo "-- man pages"
for p in poolscope poolscope-info poolscope-report poolscope-record poolscope-dump poolscope-ctl poolscope-gui; do
  [ -f /usr/share/man/man1/$p.1.gz ] || fail "no man page $p(1)"
done
zcat /usr/share/man/man1/poolscope-record.1.gz | grep -q "sample.*period" || fail "record's man page lacks its options"
echo "-- trace type by content (a copy with no extension)"
cp /usr/share/poolscope/samples/pools.poolscope /tmp/trace-without-extension
t=$(mimetype -b -M /tmp/trace-without-extension)
echo "   $t"
[ "$t" = application/x-poolscope-trace ] || fail "a trace without its extension is $t"
echo "-- the window, offscreen"
QT_QPA_PLATFORM=offscreen poolscope-gui --screenshot /check/window.png --quit-after 6000 \
  /usr/share/poolscope/samples/churn.poolscope
[ -s /check/window.png ] || fail "no screenshot"
poolscope-gui --help | grep -q -- --screenshot || fail "poolscope-gui --help lacks --screenshot"
echo "-- record, with the collector started as the driver starts it, no CUDA toolkit here"
# A stub libcuda (the toolkit's link stub) stands in for the driver: the collector must then
# report the missing CUPTI and leave a valid trace.
LD_LIBRARY_PATH=/check/stub poolscope record -o /tmp/r.poolscope -- /check/inject_like_driver \
  >/check/record.txt 2>&1 || true
cat /check/record.txt
grep -q "CUPTI (libcupti" /check/record.txt || fail "the collector did not say that CUPTI is missing"
poolscope info /tmp/r.poolscope >/dev/null || fail "the trace left behind is not readable"
echo "inside: all passed"
EOF
chmod +x "$out/inside.sh"
rm -rf "$out/stub" && mkdir -p "$out/stub"
stub=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/lib/stubs/libcuda.so \
          /usr/local/cuda/targets/*/lib/stubs/libcuda.so 2>/dev/null | head -1 || true)
[ -n "$stub" ] && cp "$stub" "$out/stub/libcuda.so.1"
cc -O2 -o "$out/inject_like_driver" installer/inject_like_driver.c -ldl
deps="shared-mime-info libfile-mimeinfo-perl"

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  step "installing and running in a debian:12 container"
  docker run --rm -v "$out:/check" debian:12 sh -c \
    "apt-get update -qq && apt-get install -y -qq /check/$(basename "$deb") $deps >/check/apt.log && /check/inside.sh"
  echo "check_deb: PASS (docker debian:12); screenshot: $out/window.png"
  exit 0
fi

[ "$(id -u)" = 0 ] || fail "no docker daemon, and the chroot needs root"
base=${POOLSCOPE_CHROOT_CACHE:-/var/tmp/poolscope-bookworm}
if [ ! -x "$base/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || fail "no docker daemon and no debootstrap (apt-get install debootstrap)"
  step "debootstrap Debian 12 into $base (once)"
  debootstrap --variant=minbase bookworm "$base" http://deb.debian.org/debian >"$out/debootstrap.log"
fi
root=$(mktemp -d /var/tmp/poolscope-check.XXXXXX)
cleanup() {
  umount "$root/proc" 2>/dev/null || true
  umount "$root/check" 2>/dev/null || true
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
step "a fresh copy of the Debian 12 root: $root"
cp -a "$base/." "$root/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/check"
mount --bind "$out" "$root/check"
mount -t proc proc "$root/proc"
step "apt install ./$(basename "$deb") in the clean root"
chroot "$root" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  /check/$(basename "$deb") $deps" >"$out/apt.log" 2>&1 || { tail -20 "$out/apt.log"; fail "apt install"; }
grep -E "^(Setting up|Unpacking) poolscope" "$out/apt.log" | head -2
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /check/inside.sh
echo "check_deb: PASS (chroot of a fresh debootstrap'ed Debian 12: not a container; shares the kernel, /proc and network); screenshot: $out/window.png"
