// The collector loads the CUDA driver (libcuda.so.1) and CUPTI at run time instead of linking
// them: the driver is already in the process that injects us, and CUPTI sits wherever the CUDA
// toolkit was installed on the recording machine, not where it was on the build machine. The
// cu*/cupti* functions the collector calls are defined in CudaLibs.cpp and forward to the loaded
// libraries; until they are loaded (or when they cannot be) they return an error code.
#pragma once

#include <string>

namespace poolscope::collector {

// Loads both libraries once (thread-safe). False when either is missing; why() then says which
// library, where it was looked for and how to point the collector at it.
bool loadCudaLibraries();
const std::string& cudaLibrariesError();
// The CUPTI file in use (empty before a successful load), for the trace's metadata.
const std::string& cuptiPath();
// The loaded CUPTI's dlopen handle (null before a successful load), for symbols outside the
// forwarded table (NVTX's injection entry point).
void* cuptiHandle();

} // namespace poolscope::collector
