// fork() after CUDA is initialized, as PyTorch DataLoader workers do: the children never touch
// CUDA and must run and exit normally (one through exit(), so atexit handlers run in it, one
// through _exit()); no trace of theirs may appear, and the parent's trace stays exact.
#include <sys/wait.h>
#include <unistd.h>

#include "Truth.h"

int main() {
    Truth t;
    CHECK(cudaSetDevice(0));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    void* p;
    CHECK(cudaMallocAsync(&p, 1 << 20, 0));
    t.count("allocs");
    t.count("alloc_bytes", 1 << 20);
    t.wm("alloc", t.note("alloc"), pool);
    int bad = 0;
    for (int mode = 0; mode < 2; ++mode) {
        std::fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            volatile double x = 0;
            for (int i = 0; i < 1000000; ++i) x = x + i; // some CPU work, no CUDA
            if (mode == 0) std::exit(0);
            _exit(0);
        }
        int status = 0;
        waitpid(c, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
        std::printf("{\"type\":\"fork_child\",\"mode\":%d,\"status\":%d}\n", mode, status);
    }
    CHECK(cudaFreeAsync(p, 0));
    t.count("frees");
    t.count("free_bytes", 1 << 20);
    t.wm("free", t.note("free"), pool);
    CHECK(cudaStreamSynchronize(0));
    t.count("stream_syncs");
    t.summary("fork_after_init");
    return bad ? 8 : 0;
}
