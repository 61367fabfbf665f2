// kernels/cpu vs kernels/reference: add, linear, matmul and a ResNet 3x3 conv2d.
// Run: ember_bench_kernels [--benchmark_filter=...]. Counters: FLOP/s over wall time (1 FLOP per add, 2 per
// multiply-add). Args: problem sizes, then the thread count (cpu kernels only; 1 = no pool).
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "runtime/core/thread_pool.h"
#include "runtime/kernel/op_info.h"

namespace ember {
namespace {

struct Buffer {
  std::vector<float> data;
  TensorView view;
  Buffer(std::vector<int64_t> dims, uint32_t seed) {
    view.dtype = ScalarType::F32;
    view.rank = static_cast<uint8_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) view.dims[i] = dims[i];
    data.resize(view.numel());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : data) v = dist(rng);
    view.data = data.data();
  }
};

ThreadPool* pool_for(int64_t threads) {
  static FixedThreadPool pool2(2);
  return threads >= 2 ? &pool2 : nullptr;
}

void run_op(benchmark::State& state, OpCode op, KernelFn fn, const OpAttrs& attrs,
            std::vector<TensorView> inputs, double flops, int64_t threads) {
  TensorView out;
  ErrorContext err;
  if (!find_op_info(op)->shape(attrs, inputs.data(), inputs.size(), &out, 1,
                               Span<const int64_t>(), &err).is_ok()) {
    state.SkipWithError(err.message);
    return;
  }
  std::vector<float> out_data(out.numel());
  out.data = out_data.data();
  KernelContext ctx;
  ctx.pool = pool_for(threads);
  for (auto _ : state) {
    fn(ctx, attrs, inputs.data(), inputs.size(), &out, 1);
    benchmark::DoNotOptimize(out_data.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

template <bool kCpu>
void BM_Add(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer a({n}, 1), b({n}, 2);
  run_op(state, OpCode::Add, kCpu ? kernels::cpu::add : kernels::reference::add, OpAttrs{},
         {a.view, b.view}, double(n), kCpu ? state.range(1) : 1);
}

template <bool kCpu>
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Buffer x({m, k}, 1), w({n, k}, 2), bias({n}, 3);
  OpAttrs attrs;
  attrs.kind = AttrKind::Linear;
  run_op(state, OpCode::Linear, kCpu ? kernels::cpu::linear : kernels::reference::linear, attrs,
         {x.view, w.view, bias.view}, 2.0 * m * k * n, kCpu ? state.range(3) : 1);
}

template <bool kCpu>
void BM_MatMul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Buffer a({m, k}, 1), b({k, n}, 2);
  run_op(state, OpCode::MatMul, kCpu ? kernels::cpu::matmul : kernels::reference::matmul, OpAttrs{},
         {a.view, b.view}, 2.0 * m * k * n, kCpu ? state.range(3) : 1);
}

// ResNet-style 3x3, stride 1, pad 1 layer: [1, C, H, H] -> [1, C, H, H].
template <bool kCpu>
void BM_Conv3x3(benchmark::State& state) {
  const int64_t c = state.range(0), h = state.range(1);
  Buffer x({1, c, h, h}, 1), w({c, c, 3, 3}, 2), bias({c}, 3);
  OpAttrs attrs;
  attrs.kind = AttrKind::Conv2d;
  attrs.kernel[0] = attrs.kernel[1] = 3;
  for (int i = 0; i < 4; ++i) attrs.padding[i] = 1;
  run_op(state, OpCode::Conv2d, kCpu ? kernels::cpu::conv2d : kernels::reference::conv2d, attrs,
         {x.view, w.view, bias.view}, 2.0 * c * h * h * c * 9, kCpu ? state.range(2) : 1);
}

BENCHMARK_TEMPLATE(BM_Add, true)->ArgNames({"n", "threads"})->Args({1 << 20, 1})->Args({1 << 20, 2})->UseRealTime();
BENCHMARK_TEMPLATE(BM_Add, false)->ArgNames({"n"})->Args({1 << 20})->UseRealTime();
BENCHMARK_TEMPLATE(BM_Linear, true)->ArgNames({"m", "k", "n", "threads"})
    ->Args({1, 4096, 4096, 1})->Args({1, 4096, 4096, 2})
    ->Args({64, 1024, 1024, 1})->Args({64, 1024, 1024, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Linear, false)->ArgNames({"m", "k", "n"})
    ->Args({1, 4096, 4096})->Args({64, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_MatMul, true)->ArgNames({"m", "k", "n", "threads"})
    ->Args({64, 1024, 1024, 1})->Args({64, 1024, 1024, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_MatMul, false)->ArgNames({"m", "k", "n"})
    ->Args({64, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Conv3x3, true)->ArgNames({"c", "h", "threads"})
    ->Args({64, 56, 1})->Args({64, 56, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Conv3x3, false)->ArgNames({"c", "h"})->Args({64, 56})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ember
