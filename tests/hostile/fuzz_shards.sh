#!/usr/bin/env bash
# The long fuzz runs of docs/SANITIZERS.md, sharded over the machine's cores: each shard runs one
# target with its own POOLSCOPE_FUZZ_SEED, so the shards try different inputs. The two trace-file
# targets (about 1,000 inputs/s a core) get SHARDS shards each; the chunk codec and control frame
# targets (50,000+ inputs/s) one each. Prints each shard's summary line and a table per target.
#   tests/hostile/fuzz_shards.sh BIN_DIR INPUTS_PER_TARGET [SHARDS]
#   FUZZ_SECONDS=S tests/hostile/fuzz_shards.sh BIN_DIR 0 [SHARDS]   (every shard runs S seconds)
# e.g. tests/hostile/fuzz_shards.sh build/default/bin 1000000 7   (BIN_DIR holds the test binaries)
set -uo pipefail
BIN=${1:?BIN_DIR}
TOTAL=${2:?INPUTS_PER_TARGET}
SHARDS=${3:-$(( $(nproc) > 4 ? ($(nproc) - 2) / 2 : 1 ))}
LOG=${OUT:-/tmp}/fuzz_shards
mkdir -p "$LOG"
targets=(
    "poolscope_core_tests ChunkCodecFuzz.DecoderSurvivesMutatedChunks 1"
    "poolscope_core_tests TraceFileFuzz.ReaderSurvivesDamagedFiles $SHARDS"
    "poolscope_core_tests TraceFileFuzz.Format3ChunksRewrittenPastTheirChecksums $SHARDS"
    "poolscope_control_tests ProtocolFuzz.DecodersSurviveMutatedFrames 1"
)
start=$(date +%s)
pids=()
for t in "${targets[@]}"; do
    read -r exe filter n <<<"$t"
    per=$(( (TOTAL + n - 1) / n ))
    for ((s = 1; s <= n; ++s)); do
        if [[ -n ${FUZZ_SECONDS:-} ]]; then budget="POOLSCOPE_FUZZ_SECONDS=$FUZZ_SECONDS"
        else budget="POOLSCOPE_FUZZ_INPUTS=$per"; fi
        env "$budget" POOLSCOPE_FUZZ_SEED=$s \
            /usr/bin/time -f "maxrss_kib %M cpu_s %U" "$BIN/$exe" --gtest_filter="$filter" \
            >"$LOG/$filter.$s.log" 2>&1 &
        pids+=($!)
    done
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
echo "wall: $(( $(date +%s) - start )) s on $(nproc) cores, $SHARDS shards per trace-file target${FUZZ_SECONDS:+, $FUZZ_SECONDS s each}"
printf '%-58s %10s %8s %s\n' target inputs result "max RSS (KiB)"
for t in "${targets[@]}"; do
    read -r exe filter shards <<<"$t"
    n=0; ok=PASS; rss=0
    for ((s = 1; s <= shards; ++s)); do
        f="$LOG/$filter.$s.log"
        grep -q '\[  PASSED  \] 1 test' "$f" || { ok=FAIL; echo "--- $f"; tail -20 "$f"; }
        grep -E 'fuzz: [0-9]+ inputs' "$f" | head -1 | sed "s/^/  shard $s: /"
        k=$(grep -oE 'fuzz: [0-9]+ inputs' "$f" | head -1 | grep -oE '[0-9]+')
        n=$(( n + ${k:-0} ))
        r=$(grep -oE 'maxrss_kib [0-9]+' "$f" | grep -oE '[0-9]+$')
        (( ${r:-0} > rss )) && rss=$r
    done
    printf '%-58s %10d %8s %s\n' "$filter" "$n" "$ok" "$rss"
    [[ $ok == PASS ]] || fail=1
done
exit $fail
