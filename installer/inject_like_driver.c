/* Loads the module named by CUDA_INJECTION64_PATH and calls its InitializeInjection, as the CUDA
 * driver does at cuInit. installer/check_deb.sh runs it through `poolscope record` in a root
 * without the NVIDIA driver or CUDA toolkit, to see the installed collector start and say
 * plainly what it is missing. Not a GPU program: it never calls CUDA. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    const char* path = getenv("CUDA_INJECTION64_PATH");
    if (!path) {
        fprintf(stderr, "inject_like_driver: CUDA_INJECTION64_PATH is not set\n");
        return 2;
    }
    void* module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        fprintf(stderr, "inject_like_driver: %s\n", dlerror());
        return 2;
    }
    int (*init)(void) = (int (*)(void))dlsym(module, "InitializeInjection");
    if (!init) {
        fprintf(stderr, "inject_like_driver: no InitializeInjection in %s\n", path);
        return 2;
    }
    init();
    return 0;
}
