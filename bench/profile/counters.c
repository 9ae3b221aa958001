// LD_PRELOAD counters for bench/profile/request_path.py: allocations (malloc family), eventfd wakes (writes of 8
// bytes to an eventfd: a thread handing work to a socket thread), and Swift global-executor enqueues (work
// handed to the cooperative pool). SIGUSR1 prints the totals to stderr.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_ulong n_malloc, n_free, n_wake, n_zmq_wake, n_enqueue;
static atomic_int efds[4096];

void *malloc(size_t s) { atomic_fetch_add_explicit(&n_malloc, 1, memory_order_relaxed); return __libc_malloc(s); }
void *calloc(size_t a, size_t b) { atomic_fetch_add_explicit(&n_malloc, 1, memory_order_relaxed); return __libc_calloc(a, b); }
void *realloc(void *p, size_t s) { atomic_fetch_add_explicit(&n_malloc, 1, memory_order_relaxed); return __libc_realloc(p, s); }
int posix_memalign(void **r, size_t a, size_t s) { atomic_fetch_add_explicit(&n_malloc, 1, memory_order_relaxed); *r = __libc_memalign(a, s); return *r ? 0 : 12; }
void *aligned_alloc(size_t a, size_t s) { atomic_fetch_add_explicit(&n_malloc, 1, memory_order_relaxed); return __libc_memalign(a, s); }
void *memalign(size_t a, size_t s) { atomic_fetch_add_explicit(&n_malloc, 1, memory_order_relaxed); return __libc_memalign(a, s); }
void free(void *p) { if (p) atomic_fetch_add_explicit(&n_free, 1, memory_order_relaxed); __libc_free(p); }

static int (*real_eventfd)(unsigned int, int);
static ssize_t (*real_write)(int, const void *, size_t);
int eventfd(unsigned int v, int f) {
    if (!real_eventfd) real_eventfd = dlsym(RTLD_NEXT, "eventfd");
    int fd = real_eventfd(v, f);
    // ZeroBridge's WakeSignal asks for EFD_NONBLOCK; libzmq's mailboxes do not.
    if (fd >= 0 && fd < 4096) efds[fd] = (f & EFD_NONBLOCK) ? 1 : 2;
    return fd;
}
ssize_t write(int fd, const void *b, size_t n) {
    if (!real_write) real_write = dlsym(RTLD_NEXT, "write");
    if (fd >= 0 && fd < 4096 && n == 8 && efds[fd])
        atomic_fetch_add_explicit(efds[fd] == 1 ? &n_wake : &n_zmq_wake, 1, memory_order_relaxed);
    return real_write(fd, b, n);
}

typedef void (*enqueue_original)(void *job);
typedef void (*enqueue_hook)(void *job, enqueue_original original);
static void count_enqueue(void *job, enqueue_original original) {
    atomic_fetch_add_explicit(&n_enqueue, 1, memory_order_relaxed);
    original(job);
}

static void put(const char *label, unsigned long v) {
    char buf[64]; int i = 63; buf[i] = 0;
    do { buf[--i] = '0' + v % 10; v /= 10; } while (v);
    if (!real_write) real_write = dlsym(RTLD_NEXT, "write");
    real_write(2, label, strlen(label)); real_write(2, buf + i, strlen(buf + i)); real_write(2, " ", 1);
}
static void report(int sig) {
    (void)sig;
    put("COUNTS malloc=", n_malloc); put("free=", n_free); put("wakes=", n_wake); put("zmqwakes=", n_zmq_wake); put("enqueues=", n_enqueue);
    real_write(2, "\n", 1);
}

__attribute__((constructor)) static void setup(void) {
    signal(SIGUSR1, report);
    enqueue_hook *hook = dlsym(RTLD_DEFAULT, "swift_task_enqueueGlobal_hook");
    if (hook) *hook = count_enqueue;
    else { const char m[] = "count.so: no swift_task_enqueueGlobal_hook\n"; write(2, m, sizeof m - 1); }
}
