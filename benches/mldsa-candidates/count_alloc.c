/* LD_PRELOAD shim: counts every heap allocation in the process, Rust's
 * (std's System allocator calls these) and C libraries' alike.
 * Build: cc -O2 -shared -fPIC -o target/count_alloc.so count_alloc.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdatomic.h>

static atomic_ulong count;
unsigned long alloc_shim_count(void) { return atomic_load(&count); }

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);

void *malloc(size_t n) { atomic_fetch_add(&count, 1); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { atomic_fetch_add(&count, 1); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { atomic_fetch_add(&count, 1); return __libc_realloc(p, n); }
int posix_memalign(void **p, size_t a, size_t n) {
    atomic_fetch_add(&count, 1);
    *p = __libc_memalign(a, n);
    return *p ? 0 : 12;
}
void *aligned_alloc(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign(a, n); }
void *memalign(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign(a, n); }
