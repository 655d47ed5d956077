/* The file calls of the loader and of sn_model_read, each asking the test
 * hook first (model.h, sn_io_set_fault): SQLite-style I/O fault injection
 * without a mock filesystem. With no hook set a call costs one load. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/model.h"

/* Process-wide like the allocator (alloc.c), and for tests only. */
static sn_io_fault_fn g_fault;
static void *g_fault_user;

void sn_io_set_fault(sn_io_fault_fn fn, void *user) {
    __atomic_store_n(&g_fault_user, user, __ATOMIC_RELAXED);
    __atomic_store_n(&g_fault, fn, __ATOMIC_RELEASE);
}

/* 0, or the errno the call is to fail with. */
static int fault(sn_io_op op, const char *path) {
    sn_io_fault_fn fn = __atomic_load_n(&g_fault, __ATOMIC_ACQUIRE);
    int e = fn ? fn(__atomic_load_n(&g_fault_user, __ATOMIC_RELAXED), op, path) : 0;
    if (e)
        errno = e;
    return e;
}

char *sn_io_realpath(const char *path) { return fault(SN_IO_RESOLVE, path) ? NULL : realpath(path, NULL); }

/* O_NONBLOCK: a FIFO, device or socket named as a model or its external
 * data must not block the open; the S_ISREG check on fstat follows it. */
int sn_io_open(const char *path) {
    return fault(SN_IO_OPEN, path) ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
}

int sn_io_fstat(int fd, const char *path, struct stat *st) {
    return fault(SN_IO_STAT, path) ? -1 : fstat(fd, st);
}

void *sn_io_mmap(int fd, const char *path, size_t n) {
    return fault(SN_IO_MAP, path) ? MAP_FAILED : mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
}

ssize_t sn_io_pread(int fd, const char *path, void *dst, size_t n, uint64_t off) {
    return fault(SN_IO_READ, path) ? -1 : pread(fd, dst, n, (off_t)off);
}
