/* The heaptrack side of tests/bench/vs_heaptrack.sh: N malloc/free pairs shaped like the
 * benchmarks' synthetic training loop (sizes 256 B .. 2 MiB, a live set of up to ~100 blocks
 * per "stream", random frees, 1 in 1000 blocks leaked). Not a GPU program: heaptrack sees the
 * same number of allocations PoolScope's generated trace holds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

int main(int argc, char** argv) {
    const unsigned long long n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    enum { kLive = 4 * 97 };
    void* live[kLive] = {0};
    unsigned long long leaked = 0;
    for (unsigned long long i = 0; i < n; ++i) {
        const size_t slot = next() % kLive;
        if (live[slot]) free(live[slot]);
        live[slot] = malloc((size_t)256 << (next() % 14));
        if (!live[slot]) return 1;
        ((volatile char*)live[slot])[0] = 1;
        if (next() % 1000 == 0) { live[slot] = NULL; ++leaked; } /* a leak for the report */
    }
    for (size_t s = 0; s < kLive; ++s) free(live[s]);
    printf("allocations %llu leaked %llu\n", n, leaked);
    return 0;
}
