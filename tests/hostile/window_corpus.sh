#!/usr/bin/env bash
# The damaged-trace corpus (HostileCorpus.cpp) through the window, as a user opening each file:
# every STEP-th file is opened by poolscope-gui, which must quit by itself, never by a signal
# and never past the time limit, whatever the damage (the window shows an error or the intact
# part and stays usable; see ui/TraceLoader.cpp).
#   window_corpus.sh GUI CORPUS_TOOL SAMPLES_DIR OUT_DIR [STEP]
set -uo pipefail
GUI=$1 TOOL=$2 SAMPLES=$3 OUT=$4 STEP=${5:-20}
export QT_QPA_PLATFORM=offscreen
rm -rf "$OUT"
# The window saves its layout and recent files on quit: here into the corpus folder, never into
# the user's own settings (a user's next window opened with a test's squeezed docks and a
# recent-files menu of damaged traces).
export XDG_CONFIG_HOME="$OUT/config"
"$TOOL" generate "$SAMPLES" "$OUT" >/dev/null || { echo "window_corpus: could not generate the corpus"; exit 1; }
n=0 opened=0 bad=0
for f in "$OUT"/*.poolscope; do
    n=$((n + 1))
    (( (n - 1) % STEP == 0 )) || continue
    opened=$((opened + 1))
    timeout 60 "$GUI" --quit-after 1500 "$f" >/dev/null 2>&1
    rc=$?
    if (( rc != 0 )); then
        bad=$((bad + 1))
        if (( rc == 124 )); then why="hung (killed after 60 s)"; elif (( rc > 128 )); then why="signal $((rc - 128))"; else why="exit $rc"; fi
        echo "FAIL $(basename "$f"): $why"
    fi
done
echo "window_corpus: $opened of $n damaged files opened in the window, $bad failed"
echo "$((opened - bad)) passed, $bad failed"
(( opened > 0 && bad == 0 ))
