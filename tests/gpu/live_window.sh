#!/usr/bin/env bash
# The live window against a real GPU program (issue #17), on the GPU machine, which has no Qt:
# the window tool and the Qt runtime it loads are carried from a Debian build.
#
# Here (Debian, default build):
#   cmake --build build/default --target poolscope_live_window_gpu
#   tests/gpu/live_window.sh --pack .carry/gui build/default .carry/gpu14/bin
#     (the last argument: a folder with the GPU build's libpoolscope_collector.so and
#      libunwind.so.8; Qt, ICU, QCustomPlot... as ldd lists them, the offscreen platform plugin
#      and DejaVu fonts go into .carry/gui/stage.tar.xz)
# There (device tool, carry .carry/gui):
#   tests/gpu/live_window.sh --run .carry/gui [STEPS]
#     launches `python3 tests/workloads/gpt2_train.py STEPS --nvtx` with
#     PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync through Live > Launch, presses the Knobs
#     panel's threshold preset 0 five seconds after the first allocation, and writes the
#     screenshots, the trace and the event-to-screen latency table to $OUT/live.
set -euo pipefail
mode=${1:?usage: live_window.sh --pack DIR BUILD COLLECTOR_DIR | --run DIR [STEPS]}
G=${2:?carry folder}
case $mode in
--pack)
    BUILD=${3:?build folder}; COL=${4:?folder with the GPU build's collector}
    rm -rf "$G" && mkdir -p "$G/bin" "$G/stage/lib" "$G/stage/plugins/platforms" "$G/fonts"
    strip -o "$G/bin/poolscope_live_window_gpu" "$BUILD/bin/poolscope_live_window_gpu"
    cp "$COL/libpoolscope_collector.so" "$COL/libunwind.so.8" "$G/bin/"
    PLUGIN=/usr/lib/x86_64-linux-gnu/qt6/plugins/platforms/libqoffscreen.so
    cp "$PLUGIN" "$G/stage/plugins/platforms/"
    # Every library the tool and the plugin load, except glibc's and the C++ runtime (the GPU
    # machine has newer ones).
    { ldd "$G/bin/poolscope_live_window_gpu"; ldd "$PLUGIN"; } | awk '$3 ~ /^\// {print $3}' |
        sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
        while read -r l; do cp -L "$l" "$G/stage/lib/"; done
    cp /usr/share/fonts/truetype/dejavu/DejaVuSans{,-Bold,Mono}.ttf "$G/fonts/"
    tar cJf "$G/stage.tar.xz" -C "$G/stage" . && rm -rf "$G/stage"
    du -sh "$G" ;;
--run)
    STEPS=${3:-600}
    G=$(cd "$G" && pwd)
    U=/tmp/poolscope-gui && rm -rf "$U" && mkdir -p "$U" && tar xJf "$G/stage.tar.xz" -C "$U"
    printf '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>%s</dir><cachedir>%s/fc-cache</cachedir></fontconfig>\n' \
        "$G/fonts" "$U" >"$U/fonts.conf"
    export FONTCONFIG_FILE=$U/fonts.conf LD_LIBRARY_PATH=$U/lib QT_QPA_PLATFORM=offscreen \
        QT_QPA_PLATFORM_PLUGIN_PATH=$U/plugins/platforms POOLSCOPE_COLLECTOR=$G/bin/libpoolscope_collector.so
    HERE=$(cd "$(dirname "$0")" && pwd)
    "$G/bin/poolscope_live_window_gpu" --out "${OUT:-./gpu-out}/live" --program python3 \
        --args "$HERE/../workloads/gpt2_train.py $STEPS --nvtx" \
        --env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync --knob-after 5 --timeout 250 ;;
*) echo "live_window.sh: unknown mode $mode" >&2; exit 2 ;;
esac
