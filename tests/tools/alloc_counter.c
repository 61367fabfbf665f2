// LD_PRELOAD shim that counts heap allocations of a whole process (all threads) from the start of
// main() to exit: malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc, pvalloc
// (operator new goes through malloc in libstdc++). At exit it appends "allocations N" to the file
// named by $EMBER_ALLOC_COUNT_FILE. Used to check that `runner --iterations N` allocates the same
// for any N.
// Why from main(): Debian's libhwy.so measures its timer resolution in a static initializer that
// allocates a varying number of times (seen: 470..520) before main, whatever the program does.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);
extern void* __libc_pvalloc(size_t);

static atomic_ulong g_count;
static atomic_int g_enabled;
#define COUNT() (atomic_load_explicit(&g_enabled, memory_order_relaxed) ? (void)atomic_fetch_add(&g_count, 1) : (void)0)

void* malloc(size_t n) { COUNT(); return __libc_malloc(n); }
void* calloc(size_t a, size_t b) { COUNT(); return __libc_calloc(a, b); }
void* realloc(void* p, size_t n) { COUNT(); return __libc_realloc(p, n); }
void* memalign(size_t a, size_t n) { COUNT(); return __libc_memalign(a, n); }
void* aligned_alloc(size_t a, size_t n) { COUNT(); return __libc_memalign(a, n); }
void* valloc(size_t n) { COUNT(); return __libc_valloc(n); }
void* pvalloc(size_t n) { COUNT(); return __libc_pvalloc(n); }
int posix_memalign(void** out, size_t a, size_t n) {
  COUNT();
  void* p = __libc_memalign(a, n);
  if (p == NULL) return 12;  // ENOMEM
  *out = p;
  return 0;
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("EMBER_ALLOC_COUNT_FILE");
  if (path == NULL) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "allocations %lu\n", (unsigned long)atomic_load(&g_count));
  fclose(f);
}

typedef int (*MainFn)(int, char**, char**);
static MainFn g_real_main;

static int counting_main(int argc, char** argv, char** envp) {
  atomic_store(&g_enabled, 1);
  return g_real_main(argc, argv, envp);
}

// Interposed so that counting starts when main() does.
int __libc_start_main(MainFn main_fn, int argc, char** argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void* stack_end) {
  typedef int (*StartFn)(MainFn, int, char**, void (*)(void), void (*)(void), void (*)(void), void*);
  StartFn real = (StartFn)dlsym(RTLD_NEXT, "__libc_start_main");
  g_real_main = main_fn;
  return real(counting_main, argc, argv, init, fini, rtld_fini, stack_end);
}
