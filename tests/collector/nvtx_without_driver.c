/* NVTX_INJECTION64_PATH names the collector (the launcher's default): on a machine without the
   NVIDIA driver its InitializeInjectionNvtx2 must decline (NVTX then turns itself off) and the
   program's ranges must run on unharmed. Usage: nvtx_without_driver COLLECTOR.so */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s COLLECTOR.so\n", argv[0]);
        return 2;
    }
    setenv("NVTX_INJECTION64_PATH", argv[1], 1);
    for (int i = 0; i < 1000; ++i) {
        nvtxRangePushA("step");
        nvtxRangeId_t id = nvtxRangeStartA("phase");
        nvtxRangeEnd(id);
        nvtxRangePop();
    }
    printf("ok: 1000 NVTX push/pop and start/end pairs ran with the collector as NVTX's tool and "
           "no driver\n");
    return 0;
}
