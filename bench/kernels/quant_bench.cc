// Quantized GEMV (m = 1) weight streaming (and gemm32/: m = 32, prefill-shaped, in GFLOP/s): each format's kernel against a read-only vectorized sum
// of the same bytes (weights + scales), the roofline for streaming them, on a weight working set of
// at least 8x the last-level cache (sysfs index3 size; 32 MiB when absent), single-threaded and on a
// 2-thread pool; and single-threaded on a ~512 KiB working set that stays in L2 (the decode and FMA
// throughput without DRAM). Counters: bytes_per_second of weight + scale bytes (the console prints
// it in 2^30 units). At the end a table prints GEMV GB/s (10^9), sum GB/s and their ratio per format
// and thread count (the median when repeated). The e4m3 weights are passed with nan_free set as a
// loaded program's bind sets it (QuantView::nan_codes, computed once per weight): no per-call scan.
//
// Run: ember_bench_quant [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/stream_sum.h"
#include "benchmark/benchmark.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantized_linear.h"
#include "kernels/cpu/targets.h"
#include "runtime/core/float_codecs.h"
#include "runtime/core/quant.h"
#include "runtime/core/thread_pool.h"

namespace ember {
namespace {

constexpr int64_t kK = 4096;

size_t llc_bytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string text;
  if (!(in >> text) || text.empty()) return size_t(32) << 20;
  size_t value = std::strtoull(text.c_str(), nullptr, 10);
  const char unit = text.back();
  if (unit == 'K') value <<= 10;
  if (unit == 'M') value <<= 20;
  return value > 0 ? value : size_t(32) << 20;
}

size_t working_set_bytes() { return 8 * llc_bytes(); }

enum class Format { F32, Bf16, Fp8Channel, Fp8Block, Mxfp8, Nvfp4, W8a8Channel };

struct FormatInfo {
  Format format;
  const char* name;
  double weight_bytes;  // per element
  double scale_bytes;   // per element
};

const FormatInfo kFormats[] = {
    {Format::F32, "f32", 4.0, 0.0},
    {Format::Bf16, "bf16", 2.0, 0.0},
    {Format::Fp8Channel, "fp8_channel", 1.0, 4.0 / kK},
    {Format::Fp8Block, "fp8_128x128", 1.0, 4.0 / (128 * 128)},
    {Format::Mxfp8, "mxfp8", 1.0, 1.0 / 32},
    {Format::Nvfp4, "nvfp4", 0.5, 1.0 / 16},
    {Format::W8a8Channel, "fp8_channel_w8a8", 1.0, 4.0 / kK},
};

// A weight of n x kK elements in one format; weight and scale bytes in one buffer (weights first).
struct Weight {
  Format format;
  size_t target_bytes = 0;
  int64_t n = 0;
  std::vector<uint8_t> bytes;
  size_t weight_bytes = 0, scale_bytes = 0;
  float global_scale = 1.0f;
  bool nan_codes = true;  // e4m3: as bind computes QuantView::nan_codes for a loaded program
  const uint8_t* w() const { return bytes.data(); }
  const void* scales() const { return bytes.data() + weight_bytes; }
};

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Roughly normal in [-1, 1] (Irwin-Hall of 4 uniforms), so FP8 codes look like a real weight's.
float normalish(uint64_t& s) {
  const uint64_t r = splitmix(s);
  float sum = 0.0f;
  for (int i = 0; i < 4; ++i) sum += float((r >> (16 * i)) & 0xFFFF) / 65535.0f;
  return (sum - 2.0f) * 0.5f;
}

std::unique_ptr<Weight> make_weight(const FormatInfo& f, size_t target_bytes) {
  auto w = std::make_unique<Weight>();
  w->format = f.format;
  w->target_bytes = target_bytes;
  const double per_row = double(kK) * (f.weight_bytes + f.scale_bytes);
  w->n = (int64_t(std::ceil(double(target_bytes) / per_row)) + 127) / 128 * 128;
  const size_t elements = size_t(w->n) * kK;
  w->weight_bytes = size_t(double(elements) * f.weight_bytes);
  w->scale_bytes = size_t(std::ceil(double(elements) * f.scale_bytes));
  w->bytes.resize(w->weight_bytes + w->scale_bytes);
  uint64_t s = 12345;
  uint8_t* p = w->bytes.data();
  float* fs = reinterpret_cast<float*>(p + w->weight_bytes);
  switch (f.format) {
    case Format::F32:
      for (size_t i = 0; i < elements; ++i) reinterpret_cast<float*>(p)[i] = normalish(s);
      break;
    case Format::Bf16:
      for (size_t i = 0; i < elements; ++i) reinterpret_cast<uint16_t*>(p)[i] = f32_to_bf16(normalish(s));
      break;
    case Format::Fp8Channel:
    case Format::Fp8Block:
    case Format::W8a8Channel:
    case Format::Mxfp8:
      for (size_t i = 0; i < elements; ++i) p[i] = f32_to_e4m3fn(normalish(s) * 448.0f);
      w->nan_codes = e4m3_any_nan_code(p, w->weight_bytes);
      if (f.format == Format::Mxfp8) {
        for (size_t i = 0; i < w->scale_bytes; ++i) p[w->weight_bytes + i] = uint8_t(118 + splitmix(s) % 4);
      } else {
        for (size_t i = 0; i < w->scale_bytes / 4; ++i) fs[i] = 1e-4f * float(1 + splitmix(s) % 16);
      }
      break;
    case Format::Nvfp4:
      for (size_t i = 0; i < w->weight_bytes; ++i) p[i] = uint8_t(splitmix(s));
      for (size_t i = 0; i < w->scale_bytes; ++i) p[w->weight_bytes + i] = uint8_t(0x20 + splitmix(s) % 0x50);
      w->global_scale = 1e-3f;
      break;
  }
  return w;
}

// One weight at a time stays allocated: the benchmarks of a format run back to back.
const Weight& weight_for(const FormatInfo& f, size_t target_bytes) {
  static std::unique_ptr<Weight> current;
  if (current == nullptr || current->format != f.format || current->target_bytes != target_bytes) {
    current.reset();
    current = make_weight(f, target_bytes);
  }
  return *current;
}

// The in-cache working set: decode and FMA throughput without DRAM (L2 is 1 MiB per core here).
constexpr size_t kCachedBytes = size_t(512) << 10;

ThreadPool* pool_for(int threads) {
  static FixedThreadPool pool2(2);
  return threads >= 2 ? &pool2 : nullptr;
}

// y [m, n] = x [m, kK] w^T (m = 1: the GEMV).
void gemv(const Weight& w, const float* x, float* y, KernelContext& ctx, int64_t m = 1) {
  const int64_t n = w.n;
  Status s;
  switch (w.format) {
    case Format::F32: {
      TensorView in[2], out;
      in[0].dtype = in[1].dtype = out.dtype = ScalarType::F32;
      in[0].rank = in[1].rank = out.rank = 2;
      in[0].dims[0] = m, in[0].dims[1] = kK, in[0].data = const_cast<float*>(x);
      in[1].dims[0] = n, in[1].dims[1] = kK, in[1].data = const_cast<uint8_t*>(w.w());
      out.dims[0] = m, out.dims[1] = n, out.data = y;
      OpAttrs attrs;
      attrs.kind = AttrKind::Linear;
      kernels::cpu::linear(ctx, attrs, in, 2, &out, 1);
      return;
    }
    case Format::Bf16:
      s = kernels::cpu::linear_bf16(ctx, x, m, reinterpret_cast<const uint16_t*>(w.w()), n, kK, nullptr, y);
      break;
    case Format::Fp8Channel:
      s = kernels::cpu::linear_fp8_e4m3(ctx, x, m, w.w(), n, kK, 1, kK,
                                        static_cast<const float*>(w.scales()), nullptr, y, nullptr,
                                        !w.nan_codes);
      break;
    case Format::Fp8Block:
      s = kernels::cpu::linear_fp8_e4m3(ctx, x, m, w.w(), n, kK, 128, 128,
                                        static_cast<const float*>(w.scales()), nullptr, y, nullptr,
                                        !w.nan_codes);
      break;
    case Format::W8a8Channel:
      s = kernels::cpu::linear_fp8_e4m3_w8a8(ctx, x, m, w.w(), n, kK, 1, kK,
                                             static_cast<const float*>(w.scales()), nullptr, y, nullptr,
                                             !w.nan_codes);
      break;
    case Format::Mxfp8:
      s = kernels::cpu::linear_mxfp8(ctx, x, m, w.w(), n, kK, static_cast<const uint8_t*>(w.scales()),
                                     nullptr, y, nullptr, !w.nan_codes);
      break;
    case Format::Nvfp4:
      s = kernels::cpu::linear_nvfp4(ctx, x, m, w.w(), n, kK, static_cast<const uint8_t*>(w.scales()),
                                     w.global_scale, nullptr, y);
      break;
  }
  if (!s.is_ok()) std::fprintf(stderr, "gemv failed\n");
}

// Scratch as the runtime sizes it: the quantized linears' bytes, or f32 linear's packed panels.
std::vector<uint8_t> scratch_for(const FormatInfo& f, int64_t m, int64_t n, int threads) {
  const bool w8a8 = f.format == Format::W8a8Channel;
  size_t bytes = kernels::cpu::quantized_linear_scratch_bytes(m, kK, size_t(threads), w8a8);
  if (f.format == Format::F32) {
    TensorView in[2];
    in[0].dtype = in[1].dtype = ScalarType::F32;
    in[0].rank = in[1].rank = 2;
    in[0].dims[0] = m, in[0].dims[1] = kK, in[1].dims[0] = n, in[1].dims[1] = kK;
    bytes = kernels::cpu::linear_scratch(OpAttrs{}, in, 2, nullptr, 0, size_t(threads));
  }
  return std::vector<uint8_t>(bytes);
}

void BM_Gemv(benchmark::State& state, const FormatInfo* f, int threads, size_t bytes) {
  const Weight& w = weight_for(*f, bytes);
  std::vector<float> x(kK), y(size_t(w.n));
  uint64_t s = 7;
  for (float& v : x) v = normalish(s);
  std::vector<uint8_t> scratch = scratch_for(*f, 1, w.n, threads);
  KernelContext ctx;
  ctx.pool = pool_for(threads);
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  for (auto _ : state) {
    gemv(w, x.data(), y.data(), ctx);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.bytes.size()));
  state.counters["MiB"] = double(w.bytes.size()) / double(1 << 20);
}

// Prefill-shaped GEMM: m = 32 rows of x against an in-cache weight, in GFLOP/s (2 m n k per call).
void BM_Gemm(benchmark::State& state, const FormatInfo* f, int threads, size_t bytes) {
  const Weight& w = weight_for(*f, bytes);
  constexpr int64_t kM = 32;
  std::vector<float> x(size_t(kM * kK)), y(size_t(kM * w.n));
  uint64_t s = 7;
  for (float& v : x) v = normalish(s);
  std::vector<uint8_t> scratch = scratch_for(*f, kM, w.n, threads);
  KernelContext ctx;
  ctx.pool = pool_for(threads);
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  for (auto _ : state) {
    gemv(w, x.data(), y.data(), ctx, kM);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kM * double(w.n) * kK * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The 2-thread sum hands out 1 MiB chunks through the pool's atomic counter, as the kernels hand out
// their units, so both threads stream neighbouring memory.
constexpr size_t kSumChunk = size_t(1) << 20;

struct SumTask {
  const uint8_t* p;
  size_t count;
  std::vector<uint64_t> sums;  // one per chunk
};

void sum_chunk(void* arg, size_t t) {
  SumTask& task = *static_cast<SumTask*>(arg);
  const size_t begin = t * kSumChunk, end = std::min(task.count, begin + kSumChunk);
  task.sums[t] = bench::sum_bytes(task.p + begin, end - begin);
}

void BM_Sum(benchmark::State& state, const FormatInfo* f, int threads, size_t bytes) {
  const Weight& w = weight_for(*f, bytes);
  SumTask task{w.bytes.data(), w.bytes.size(), {}};
  const size_t chunks = (task.count + kSumChunk - 1) / kSumChunk;
  task.sums.assign(chunks, 0);
  uint64_t total = 0;
  for (auto _ : state) {
    if (threads >= 2) {
      pool_for(threads)->parallel_for(chunks, sum_chunk, &task);
      for (uint64_t v : task.sums) total += v;
    } else {
      total += bench::sum_bytes(task.p, task.count);
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.bytes.size()));
  state.counters["MiB"] = double(w.bytes.size()) / double(1 << 20);
}

// gemv and sum alternately, each timed on its own, so both see the same memory conditions (this
// VM's read bandwidth drifts by tens of percent over seconds): the median of the per-iteration
// ratios, and the median rates.
void BM_Pair(benchmark::State& state, const FormatInfo* f, int threads, size_t bytes) {
  const Weight& w = weight_for(*f, bytes);
  std::vector<float> x(kK), y(size_t(w.n));
  uint64_t seed = 7;
  for (float& v : x) v = normalish(seed);
  std::vector<uint8_t> scratch = scratch_for(*f, 1, w.n, threads);
  KernelContext ctx;
  ctx.pool = pool_for(threads);
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  SumTask task{w.bytes.data(), w.bytes.size(), {}};
  const size_t chunks = (task.count + kSumChunk - 1) / kSumChunk;
  task.sums.assign(chunks, 0);
  uint64_t total = 0;
  std::vector<double> gemv_s, sum_s, ratios;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    gemv(w, x.data(), y.data(), ctx);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const auto t1 = Clock::now();
    if (threads >= 2) {
      pool_for(threads)->parallel_for(chunks, sum_chunk, &task);
      for (uint64_t v : task.sums) total += v;
    } else {
      total += bench::sum_bytes(task.p, task.count);
    }
    benchmark::DoNotOptimize(total);
    const auto t2 = Clock::now();
    gemv_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    sum_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    ratios.push_back(sum_s.back() / gemv_s.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double mb = double(w.bytes.size());
  state.counters["gemv_GBps"] = mb / median(gemv_s) / 1e9;
  state.counters["sum_GBps"] = mb / median(sum_s) / 1e9;
  state.counters["ratio"] = median(ratios);
}

// Console output as usual, plus the ratio table at the end (median runs when repeated).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const bool aggregate = run.run_type == Run::RT_Aggregate;
      if (run.error_occurred || (aggregate && run.aggregate_name != "median")) continue;
      const std::string name = run.run_name.function_name;  // "gemv/<format>/t<threads>"
      if (run.counters.count("ratio") != 0) {  // pair/<format>/t<threads>
        pairs_[name] = {run.counters.at("gemv_GBps").value, run.counters.at("sum_GBps").value,
                        run.counters.at("ratio").value};
        continue;
      }
      auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end()) continue;
      if (aggregate) {
        rates_[name] = it->second.value;
        medians_[name] = true;
      } else if (medians_.count(name) == 0) {
        rates_[name] = it->second.value;
      }
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nGEMV m=1, k=%lld, weight working set >= %zu MiB (8 x LLC %zu MiB)\n",
                static_cast<long long>(kK), working_set_bytes() >> 20, llc_bytes() >> 20);
    std::printf("%-18s %7s %12s %12s %8s\n", "format", "threads", "gemv GB/s", "sum GB/s", "ratio");
    if (!pairs_.empty()) {
      std::printf("paired (gemv and sum alternating; medians of each and of the per-pair ratio):\n");
      for (const FormatInfo& f : kFormats) {
        for (int t : {1, 2}) {
          auto p = pairs_.find("pair/" + std::string(f.name) + "/t" + std::to_string(t));
          if (p == pairs_.end()) continue;
          std::printf("%-18s %7d %12.2f %12.2f %8.3f\n", f.name, t, p->second[0], p->second[1], p->second[2]);
        }
      }
    }
    for (const char* kind : {"", "cached_"}) {
      if (*kind != 0) std::printf("in cache: weight + scales ~%zu KiB, single-threaded\n", kCachedBytes >> 10);
      for (const FormatInfo& f : kFormats) {
        for (int t : {1, 2}) {
          const std::string suffix = std::string(f.name) + "/t" + std::to_string(t);
          auto g = rates_.find(kind + std::string("gemv/") + suffix);
          auto s = rates_.find(kind + std::string("sum/") + suffix);
          if (g == rates_.end() || s == rates_.end()) continue;
          std::printf("%-18s %7d %12.2f %12.2f %8.3f\n", f.name, t, g->second / 1e9, s->second / 1e9,
                      g->second / s->second);
        }
      }
    }
  }

 private:
  std::map<std::string, double> rates_;
  std::map<std::string, bool> medians_;
  std::map<std::string, std::array<double, 3>> pairs_;
};

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  using namespace ember;
  // EMBER_CPU_TARGET=AVX2 (a Highway target name): measure that target's code on a better CPU.
  if (const char* target = std::getenv("EMBER_CPU_TARGET")) {
    ErrorContext ctx;
    if (!kernels::set_cpu_target(target, &ctx).is_ok()) {
      std::fprintf(stderr, "ember_bench_quant: %s\n", ctx.message);
      return 2;
    }
  }
  std::printf("cpu kernels: %s\n", kernels::cpu_target());
  for (const FormatInfo& f : kFormats) {
    for (int t : {1, 2}) {
      const std::string suffix = std::string(f.name) + "/t" + std::to_string(t);
      benchmark::RegisterBenchmark(("gemv/" + suffix).c_str(), BM_Gemv, &f, t, working_set_bytes())
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("sum/" + suffix).c_str(), BM_Sum, &f, t, working_set_bytes())
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("pair/" + suffix).c_str(), BM_Pair, &f, t, working_set_bytes())
          ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
    }
  }
  for (const FormatInfo& f : kFormats) {
    const std::string suffix = std::string(f.name) + "/t1";
    benchmark::RegisterBenchmark(("cached_gemv/" + suffix).c_str(), BM_Gemv, &f, 1, kCachedBytes)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("cached_sum/" + suffix).c_str(), BM_Sum, &f, 1, kCachedBytes)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  for (const FormatInfo& f : kFormats) {
    for (int t : {1, 2}) {
      benchmark::RegisterBenchmark(("gemm32/" + std::string(f.name) + "/t" + std::to_string(t)).c_str(), BM_Gemm,
                                   &f, t, size_t(4) << 20)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
