#!/usr/bin/env bash
# Quick start command 1: installs what is missing, builds, and opens the desktop window on the
# bundled sample trace (recorded on a real H100/H200). Without a display it runs the window under
# Xvfb and saves a screenshot instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh default
bin=build/default/bin
sample=resources/samples/churn.poolscope
if [ ! -x "$bin/poolscope-gui" ]; then
  echo "The window was not built (Qt 6 missing?); showing the report instead." >&2
  exec "$bin/poolscope" report "$sample"
fi
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  shot=build/default/poolscope-window.png
  echo "No display: running the window under Xvfb for 8 s and saving a screenshot to $shot"
  exec xvfb-run -a -s "-screen 0 1600x1000x24" "$bin/poolscope-gui" --screenshot "$shot" \
       --quit-after 8000 "$sample"
fi
exec "$bin/poolscope" "$sample"
