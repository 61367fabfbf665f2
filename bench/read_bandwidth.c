// Read bandwidth of this machine: the sum of a float array far larger than the LLC, with 1 and 2
// threads (OpenMP), best of `reps` passes. bench/llm_decode.py compiles and runs it for its roofline:
//
//   gcc -O3 -march=native -fopenmp bench/read_bandwidth.c -o read_bandwidth && ./read_bandwidth
//
// Usage: read_bandwidth [MiB = 1024] [reps = 5] [max threads = 2] [min threads = 1]. Prints one line
// per thread count from min to max:
// "threads N: X GB/s (best of R, GiB G)" with GB = 1e9 bytes.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

// 16 independent accumulators so the loop is bound by loads, not by the FP add latency; the
// `omp simd` reduction lets gcc vectorize without -ffast-math.
static float sum_range(const float* a, size_t begin, size_t end) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s) simdlen(16)
  for (size_t i = begin; i < end; ++i) s += a[i];
  return s;
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  const int max_threads = argc > 3 ? atoi(argv[3]) : 2;
  const int min_threads = argc > 4 ? atoi(argv[4]) : 1;
  const size_t count = mib * 1024 * 1024 / sizeof(float);
  float* a = NULL;
  if (posix_memalign((void**)&a, 64, count * sizeof(float)) != 0) {
    fprintf(stderr, "read_bandwidth: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  // First touch from max_threads threads (the pages' placement; one NUMA node here anyway).
#pragma omp parallel for num_threads(max_threads) schedule(static)
  for (size_t i = 0; i < count; ++i) a[i] = (float)(i & 1023) * 1e-3f;

  volatile float sink = 0.0f;
  for (int threads = min_threads; threads <= max_threads; ++threads) {
    double best = 0.0;
    for (int r = 0; r < reps; ++r) {
      float total = 0.0f;
      const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : total)
      {
        const int id = omp_get_thread_num(), n = omp_get_num_threads();
        const size_t chunk = (count + (size_t)n - 1) / (size_t)n;
        const size_t begin = chunk * (size_t)id;
        const size_t end = begin + chunk < count ? begin + chunk : count;
        if (begin < end) total += sum_range(a, begin, end);
      }
      const double dt = omp_get_wtime() - t0;
      sink += total;
      const double gbs = (double)count * sizeof(float) / dt / 1e9;
      if (gbs > best) best = gbs;
    }
    printf("threads %d: %.2f GB/s (best of %d, GiB %.2f)\n", threads, best, reps,
           (double)(count * sizeof(float)) / (1024.0 * 1024.0 * 1024.0));
  }
  free(a);
  return sink == 12345.0f;  // keeps the sums alive
}
