// LD_PRELOAD shim for bench/counts.py: counts, per process, what a server
// does through the calls it makes into shared libraries, so that
// isolation-gate and nginx are counted by the same method:
//   - heap: malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign
//     (calls and bytes asked for) and free (calls); C++ operator new and
//     delete reach malloc/free through libstdc++, so they are counted too;
//   - copies: memcpy, memmove and mempcpy called through the PLT (calls and
//     bytes), from the program and from libssl/libcrypto/libstdc++. Copies a
//     compiler inlined (small fixed sizes) and copies inside libc are not seen;
//   - TLS: SSL_write/SSL_write_ex and SSL_read/SSL_read_ex (calls, bytes) and
//     the TLS records those writes make (one per 16 KiB, the maximum record
//     size, of each write: the count for writes that fit in one record, which
//     is every response here but the 1 MiB body's).
// The counters live in a file mapped shared, IG_COUNT_DIR/count.PID (one per
// process: nginx's workers each have one), so the benchmark reads them while
// the server runs and takes differences around a load run.
//
//   cc -shared -fPIC -O2 -o count.so bench/count/count.c -ldl -lpthread
//   IG_COUNT_DIR=/tmp/c LD_PRELOAD=$PWD/count.so SERVER ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// The layout bench/counts.py reads: this many little-endian uint64 in this order.
enum {
  C_MALLOC, C_MALLOC_BYTES, C_FREE, C_REALLOC, C_REALLOC_BYTES,
  C_COPY, C_COPY_BYTES,
  C_SSL_WRITE, C_SSL_WRITE_BYTES, C_TLS_RECORDS, C_SSL_READ, C_SSL_READ_BYTES,
  C_COUNT
};

static _Atomic uint64_t fallback[C_COUNT];
static _Atomic uint64_t* counters = fallback;
static int mapped;  // 0 until mapped in this process; reset in a forked child

// Maps IG_COUNT_DIR/count.PID once per process (again after a fork).
static void map_counters(void) {
  const char* dir = getenv("IG_COUNT_DIR");
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/count.%d", dir, (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  if (ftruncate(fd, sizeof(uint64_t) * C_COUNT) == 0) {
    void* p = mmap(NULL, sizeof(uint64_t) * C_COUNT, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) counters = (_Atomic uint64_t*)p;
  }
  close(fd);
}

static void add(int which, uint64_t n) {
  atomic_fetch_add_explicit(&counters[which], n, memory_order_relaxed);
}

// dlsym may allocate and copy: until the real functions are known, calls go
// to a small static pool (never freed) and a byte loop.
static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static void* (*real_calloc)(size_t, size_t);
static void* (*real_realloc)(void*, size_t);
static int (*real_posix_memalign)(void**, size_t, size_t);
static void* (*real_aligned_alloc)(size_t, size_t);
static void* (*real_memalign)(size_t, size_t);
static void* (*real_memcpy)(void*, const void*, size_t);
static void* (*real_memmove)(void*, const void*, size_t);
static void* (*real_mempcpy)(void*, const void*, size_t);
static int resolving;
static char pool[64 * 1024];
static size_t pool_used;

static void* pool_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (pool_used + n > sizeof pool) return NULL;
  void* p = pool + pool_used;
  pool_used += n;
  return p;
}

static int in_pool(void* p) { return (char*)p >= pool && (char*)p < pool + sizeof pool; }

static void resolve(void) {
  if (real_malloc || resolving) return;
  resolving = 1;
  real_memcpy = dlsym(RTLD_NEXT, "memcpy");
  real_memmove = dlsym(RTLD_NEXT, "memmove");
  real_mempcpy = dlsym(RTLD_NEXT, "mempcpy");
  real_free = dlsym(RTLD_NEXT, "free");
  real_calloc = dlsym(RTLD_NEXT, "calloc");
  real_realloc = dlsym(RTLD_NEXT, "realloc");
  real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = dlsym(RTLD_NEXT, "memalign");
  real_malloc = dlsym(RTLD_NEXT, "malloc");
  resolving = 0;
}

// A forked child (nginx's workers) counts into a file of its own.
static void after_fork_in_child(void) {
  counters = fallback;
  mapped = 0;
}

static void ensure(void) {
  resolve();
  if (!mapped && real_malloc && !resolving) {
    resolving = 1;
    mapped = 1;
    map_counters();
    pthread_atfork(NULL, NULL, after_fork_in_child);
    resolving = 0;
  }
}

void* malloc(size_t n) {
  ensure();
  if (!real_malloc) return pool_alloc(n);
  add(C_MALLOC, 1);
  add(C_MALLOC_BYTES, n);
  return real_malloc(n);
}

void* calloc(size_t a, size_t b) {
  ensure();
  if (!real_calloc) {
    void* p = pool_alloc(a * b);
    if (p) memset(p, 0, a * b);
    return p;
  }
  add(C_MALLOC, 1);
  add(C_MALLOC_BYTES, a * b);
  return real_calloc(a, b);
}

void* realloc(void* p, size_t n) {
  ensure();
  if (in_pool(p)) {
    void* q = malloc(n);
    if (q) {
      size_t left = (size_t)(pool + sizeof pool - (char*)p);
      memcpy(q, p, n < left ? n : left);
    }
    return q;
  }
  add(C_REALLOC, 1);
  add(C_REALLOC_BYTES, n);
  return real_realloc(p, n);
}

void free(void* p) {
  if (!p || in_pool(p)) return;
  ensure();
  add(C_FREE, 1);
  real_free(p);
}

int posix_memalign(void** out, size_t align, size_t n) {
  ensure();
  add(C_MALLOC, 1);
  add(C_MALLOC_BYTES, n);
  return real_posix_memalign(out, align, n);
}

void* aligned_alloc(size_t align, size_t n) {
  ensure();
  add(C_MALLOC, 1);
  add(C_MALLOC_BYTES, n);
  return real_aligned_alloc(align, n);
}

void* memalign(size_t align, size_t n) {
  ensure();
  add(C_MALLOC, 1);
  add(C_MALLOC_BYTES, n);
  return real_memalign(align, n);
}

static void* byte_copy(void* d, const void* s, size_t n) {
  unsigned char* dd = d;
  const unsigned char* ss = s;
  if (dd < ss) {
    for (size_t i = 0; i < n; ++i) dd[i] = ss[i];
  } else {
    for (size_t i = n; i > 0; --i) dd[i - 1] = ss[i - 1];
  }
  return d;
}

void* memcpy(void* d, const void* s, size_t n) {
  if (!real_memcpy) return byte_copy(d, s, n);
  add(C_COPY, 1);
  add(C_COPY_BYTES, n);
  return real_memcpy(d, s, n);
}

void* memmove(void* d, const void* s, size_t n) {
  if (!real_memmove) return byte_copy(d, s, n);
  add(C_COPY, 1);
  add(C_COPY_BYTES, n);
  return real_memmove(d, s, n);
}

void* mempcpy(void* d, const void* s, size_t n) {
  if (!real_mempcpy) return (char*)byte_copy(d, s, n) + n;
  add(C_COPY, 1);
  add(C_COPY_BYTES, n);
  return real_mempcpy(d, s, n);
}

// libssl: looked up lazily (the server links it; this shim does not).
typedef struct ssl_st SSL;

static void count_write(size_t n) {
  add(C_SSL_WRITE, 1);
  add(C_SSL_WRITE_BYTES, n);
  add(C_TLS_RECORDS, n == 0 ? 0 : (n + 16383) / 16384);
}

int SSL_write(SSL* s, const void* buf, int num) {
  static int (*real)(SSL*, const void*, int);
  if (!real) real = (int (*)(SSL*, const void*, int))dlsym(RTLD_NEXT, "SSL_write");
  int rc = real(s, buf, num);
  if (rc > 0) count_write((size_t)rc);
  return rc;
}

int SSL_write_ex(SSL* s, const void* buf, size_t num, size_t* written) {
  static int (*real)(SSL*, const void*, size_t, size_t*);
  if (!real) real = (int (*)(SSL*, const void*, size_t, size_t*))dlsym(RTLD_NEXT, "SSL_write_ex");
  int rc = real(s, buf, num, written);
  if (rc == 1 && written) count_write(*written);
  return rc;
}

int SSL_read(SSL* s, void* buf, int num) {
  static int (*real)(SSL*, void*, int);
  if (!real) real = (int (*)(SSL*, void*, int))dlsym(RTLD_NEXT, "SSL_read");
  int rc = real(s, buf, num);
  add(C_SSL_READ, 1);
  if (rc > 0) add(C_SSL_READ_BYTES, (uint64_t)rc);
  return rc;
}

int SSL_read_ex(SSL* s, void* buf, size_t num, size_t* got) {
  static int (*real)(SSL*, void*, size_t, size_t*);
  if (!real) real = (int (*)(SSL*, void*, size_t, size_t*))dlsym(RTLD_NEXT, "SSL_read_ex");
  int rc = real(s, buf, num, got);
  add(C_SSL_READ, 1);
  if (rc == 1 && got) add(C_SSL_READ_BYTES, *got);
  return rc;
}
