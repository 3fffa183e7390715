// The collector's robustness cases that end a process abnormally or share it:
//   crash abort | segv   allocations, frees and a sync, the ground truth printed, then abort()
//                        or a segmentation fault: the trace must hold every event before it
//                        (the collector's signal handler has the writer commit, then chains).
//   crash rival          subscribes to CUPTI itself before CUDA starts, as Nsight Systems or
//                        Kineto would: PoolScope must say so once and stay out of the way; the
//                        program runs normally.
//   crash forkcuda       fork() after CUDA is up, and the child calls CUDA (which CUDA does not
//                        support after a fork): the child gets an error, not a hang or a crash,
//                        and the parent's trace stays exact.
#include <csignal>
#include <cstring>
#include <cupti.h>
#include <sys/wait.h>
#include <unistd.h>

#include "Truth.h"

static void CUPTIAPI rivalCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

static void work(Truth& t, cudaMemPool_t pool, int n) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < n; ++i) {
        void* p;
        CHECK(cudaMallocAsync(&p, 4096 + i, s));
        t.count("allocs");
        t.count("alloc_bytes", 4096 + i);
        t.wm("alloc", t.note("alloc"), pool);
        CHECK(cudaFreeAsync(p, s));
        t.count("frees");
        t.count("free_bytes", 4096 + i);
        t.wm("free", t.note("free"), pool);
    }
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "abort";
    if (std::strcmp(mode, "rival") == 0) {
        CUpti_SubscriberHandle sub;
        CUptiResult r = cuptiSubscribe(&sub, rivalCallback, nullptr);
        std::printf("{\"type\":\"rival\",\"subscribe\":%d}\n", int(r));
    }
    Truth t;
    CHECK(cudaSetDevice(0));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    work(t, pool, 200);
    if (std::strcmp(mode, "forkcuda") == 0) {
        std::fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            void* p = nullptr;
            cudaError_t e = cudaMallocAsync(&p, 1 << 20, 0);
            std::printf("{\"type\":\"fork_child_cuda\",\"error\":%d}\n", int(e));
            std::fflush(stdout);
            _exit(e == cudaSuccess ? 0 : 1);
        }
        int status = 0;
        waitpid(c, &status, 0);
        std::printf("{\"type\":\"fork_child\",\"status\":%d}\n", status);
        work(t, pool, 10); // the parent goes on using CUDA
    }
    t.summary("crash");
    std::fflush(stdout);
    if (std::strcmp(mode, "abort") == 0) std::abort();
    if (std::strcmp(mode, "segv") == 0) {
        volatile int* nowhere = nullptr;
        *nowhere = 1;
    }
    return 0;
}
