// Parent and child sharing an IPC pool and a pointer. Fork happens before CUDA is initialized
// (CUDA does not survive fork), so each process loads the collector itself and writes its own
// trace (the child's carries its pid). The parent creates a pool with POSIX file-descriptor
// handles, allocates from it, exports the pool (fd) and the pointer; the fd travels over a unix
// socket (SCM_RIGHTS). The child imports both, writes through the pointer, frees its mapping
// and says so; then the parent frees the block and destroys the pool.
#include <cstring>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "Truth.h"

__global__ void fill(int* p, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

static void sendFd(int sock, int fd, const void* data, size_t len) {
    msghdr msg{};
    iovec iov{const_cast<void*>(data), len};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(sock, &msg, 0) < 0) { perror("sendmsg"); std::exit(5); }
}

static int recvFd(int sock, void* data, size_t len) {
    msghdr msg{};
    iovec iov{data, len};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    if (recvmsg(sock, &msg, MSG_WAITALL) < 0) { perror("recvmsg"); std::exit(5); }
    int fd = -1;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static int child(int sock) {
    Truth t;
    cudaMemPoolPtrExportData data;
    int fd = recvFd(sock, &data, sizeof data);
    CHECK(cudaSetDevice(0));
    cudaMemPool_t pool;
    CHECK(cudaMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(intptr_t(fd)),
                                               cudaMemHandleTypePosixFileDescriptor, 0));
    t.count("pool_imports");
    cudaMemAccessDesc desc{};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = 0;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    CHECK(cudaMemPoolSetAccess(pool, &desc, 1));
    t.count("pool_set_access");
    void* p;
    CHECK(cudaMemPoolImportPointer(&p, pool, &data));
    t.count("ptr_imports");
    fill<<<4, 256>>>(static_cast<int*>(p), 1024, 42);
    CHECK(cudaDeviceSynchronize());
    t.count("ctx_syncs");
    CHECK(cudaFreeAsync(p, 0)); // the importer unmaps before the exporter frees
    t.count("frees");
    CHECK(cudaStreamSynchronize(0));
    t.count("stream_syncs");
    char ok = 1;
    if (write(sock, &ok, 1) != 1) return 6;
    std::printf("{\"type\":\"child\",\"pid\":%d}\n", getpid());
    t.summary("ipc_child");
    return 0;
}

int main() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) { perror("socketpair"); return 5; }
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        return child(sv[1]);
    }
    close(sv[1]);
    Truth t;
    CHECK(cudaSetDevice(0));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    t.count("pool_creates");
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    t.count("stream_creates");
    void* p;
    CHECK(cudaMallocFromPoolAsync(&p, 4 << 20, pool, s));
    t.count("allocs");
    t.count("alloc_bytes", 4 << 20);
    t.wm("alloc", t.note("alloc"), pool);
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");
    int fd = -1;
    CHECK(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
    t.count("pool_exports");
    cudaMemPoolPtrExportData data;
    CHECK(cudaMemPoolExportPointer(&data, p));
    t.count("ptr_exports");
    sendFd(sv[0], fd, &data, sizeof data);
    char ok = 0;
    if (read(sv[0], &ok, 1) != 1 || ok != 1) { std::fprintf(stderr, "child failed\n"); return 6; }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(cudaFreeAsync(p, s));
    t.count("frees");
    t.count("free_bytes", 4 << 20);
    t.wm("free", t.note("free"), pool);
    CHECK(cudaStreamSynchronize(s));
    t.count("stream_syncs");
    CHECK(cudaMemPoolDestroy(pool));
    t.count("pool_destroys");
    close(fd);
    t.summary("ipc_parent");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 7;
}
