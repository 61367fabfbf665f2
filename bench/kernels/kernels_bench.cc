// kernels/cpu vs kernels/reference: add, linear, matmul, CNN conv2d layers, max pool, and issue 17's
// reduce_max / argmax / group_norm.
// Run: ember_bench_kernels [--benchmark_filter=...]. Counters: FLOP/s over wall time (1 FLOP per add, 2 per
// multiply-add). Args: problem sizes, then the thread count (cpu kernels only; 1 = no pool).
// EMBER_CPU_TARGET=AVX2 (any Highway target name) runs the cpu kernels' code for that target on a
// better machine (kernels::set_cpu_target, as runner --cpu-target).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/targets.h"
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

// EMBER_CPU_TARGET, applied by the first benchmark that runs (not by a static initializer: Highway's
// own statics may not be initialized yet then, and would undo it).
bool force_target() {
  const char* target = std::getenv("EMBER_CPU_TARGET");
  if (target == nullptr) return false;
  ErrorContext ctx;
  if (!kernels::set_cpu_target(target, &ctx).is_ok()) {
    std::fprintf(stderr, "ember_bench_kernels: %s\n", ctx.message);
    std::exit(2);
  }
  std::fprintf(stderr, "cpu kernels: %s\n", kernels::cpu_target());
  return true;
}

ThreadPool* pool_for(int64_t threads) {
  static FixedThreadPool pool2(2);
  return threads >= 2 ? &pool2 : nullptr;
}

void run_op(benchmark::State& state, OpCode op, KernelFn fn, const OpAttrs& attrs,
            std::vector<TensorView> inputs, double flops, int64_t threads, ScratchFn scratch_fn = nullptr) {
  static const bool forced = force_target();
  (void)forced;
  TensorView out;
  ErrorContext err;
  if (!find_op_info(op)->shape(attrs, inputs.data(), inputs.size(), &out, 1,
                               Span<const int64_t>(), &err).is_ok()) {
    state.SkipWithError(err.message);
    return;
  }
  std::vector<float> out_data((out.nbytes() + 3) / 4);  // argmax writes i64
  out.data = out_data.data();
  KernelContext ctx;
  ctx.pool = pool_for(threads);
  // As the runtime sizes it: the kernel's ScratchFn for this thread count.
  std::vector<uint8_t> scratch(
      scratch_fn != nullptr ? scratch_fn(attrs, inputs.data(), inputs.size(), &out, 1, size_t(threads)) : 0);
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
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
         {x.view, w.view, bias.view}, 2.0 * m * k * n, kCpu ? state.range(3) : 1,
         kCpu ? kernels::cpu::linear_scratch : nullptr);
}

template <bool kCpu>
void BM_MatMul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Buffer a({m, k}, 1), b({k, n}, 2);
  run_op(state, OpCode::MatMul, kCpu ? kernels::cpu::matmul : kernels::reference::matmul, OpAttrs{},
         {a.view, b.view}, 2.0 * m * k * n, kCpu ? state.range(3) : 1, kCpu ? kernels::cpu::matmul_scratch : nullptr);
}

// conv2d [1, C, H, H] -> [1, O, H / stride, H / stride]: k x k kernel, padding k / 2, bias.
// Args: c, h, o, k, stride, groups (then threads for the cpu kernel). kKind: the cpu kernel as the
// runtime runs it (ctx.scratch of conv2d_scratch bytes: packed GEMM / depthwise), the cpu kernel
// without scratch (its direct path, the kernel before the packed paths), or the reference.
enum ConvKind { kConvPacked, kConvDirect, kConvReference };
template <ConvKind kKind>
void BM_Conv(benchmark::State& state) {
  const int64_t c = state.range(0), h = state.range(1), o = state.range(2), k = state.range(3);
  const int64_t stride = state.range(4), groups = state.range(5);
  Buffer x({1, c, h, h}, 1), w({o, c / groups, k, k}, 2), bias({o}, 3);
  OpAttrs attrs;
  attrs.kind = AttrKind::Conv2d;
  attrs.kernel[0] = attrs.kernel[1] = int32_t(k);
  attrs.stride[0] = attrs.stride[1] = int32_t(stride);
  attrs.groups = int32_t(groups);
  for (int i = 0; i < 4; ++i) attrs.padding[i] = int32_t(k / 2);
  const int64_t oh = (h + 2 * (k / 2) - k) / stride + 1;
  run_op(state, OpCode::Conv2d, kKind == kConvReference ? kernels::reference::conv2d : kernels::cpu::conv2d, attrs,
         {x.view, w.view, bias.view}, 2.0 * o * oh * oh * (c / groups) * k * k,
         kKind == kConvReference ? 1 : state.range(6), kKind == kConvPacked ? kernels::cpu::conv2d_scratch : nullptr);
}

// conv2d 3x3 stride 1 [1, C, H, H] -> [1, O, H, H] as the runtime runs it, with the Winograd choice
// forced (m: 0 = the im2col GEMM, 2 or 4 = F(m x m, 3 x 3); -1 = conv2d's own choice). Flops are the
// direct conv's (2 O H^2 C 9) whatever the algorithm, so the rates compare as speed.
void BM_ConvWinograd(benchmark::State& state) {
  const int64_t c = state.range(0), h = state.range(1), o = state.range(2);
  Buffer x({1, c, h, h}, 1), w({o, c, 3, 3}, 2), bias({o}, 3);
  OpAttrs attrs;
  attrs.kind = AttrKind::Conv2d;
  attrs.kernel[0] = attrs.kernel[1] = 3;
  for (int i = 0; i < 4; ++i) attrs.padding[i] = 1;
  kernels::cpu::conv2d_set_path_for_testing(int(state.range(3)));
  run_op(state, OpCode::Conv2d, kernels::cpu::conv2d, attrs, {x.view, w.view, bias.view}, 2.0 * o * h * h * c * 9,
         state.range(4), kernels::cpu::conv2d_scratch);
  kernels::cpu::conv2d_set_path_for_testing(-1);
}

// max_pool2d [1, C, H, H], k x k, stride s, padding k / 2 (ResNet's 3x3/2 after the stem: C 64, H 112).
void BM_MaxPool(benchmark::State& state) {
  const int64_t c = state.range(0), h = state.range(1), k = state.range(2), stride = state.range(3);
  Buffer x({1, c, h, h}, 1);
  OpAttrs attrs;
  attrs.kind = AttrKind::Pool2d;
  attrs.kernel[0] = attrs.kernel[1] = int32_t(k);
  attrs.stride[0] = attrs.stride[1] = int32_t(stride);
  for (int i = 0; i < 4; ++i) attrs.padding[i] = int32_t(k / 2);
  const int64_t oh = (h + 2 * (k / 2) - k) / stride + 1;
  run_op(state, OpCode::MaxPool2d, kernels::cpu::max_pool2d, attrs, {x.view}, double(c * oh * oh * k * k),
         state.range(4));
}

BENCHMARK_TEMPLATE(BM_Add, true)->ArgNames({"n", "threads"})->Args({1 << 20, 1})->Args({1 << 20, 2})->UseRealTime();
BENCHMARK_TEMPLATE(BM_Add, false)->ArgNames({"n"})->Args({1 << 20})->UseRealTime();
BENCHMARK_TEMPLATE(BM_Linear, true)->ArgNames({"m", "k", "n", "threads"})
    ->Args({1, 4096, 4096, 1})->Args({1, 4096, 4096, 2})->Args({1, 1024, 1024, 1})->Args({4, 1024, 1024, 1})
    ->Args({64, 1024, 1024, 1})->Args({64, 1024, 1024, 2})
    // BERT-base seq 128 (QKV/out, FFN up, FFN down) and ViT-B/16 (197 tokens, FFN up).
    ->ArgsProduct({{128}, {768}, {768, 3072}, {1, 2}})->ArgsProduct({{128}, {3072}, {768}, {1, 2}})
    ->ArgsProduct({{197}, {768}, {3072}, {1, 2}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Linear, false)->ArgNames({"m", "k", "n"})
    ->Args({1, 4096, 4096})->Args({64, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_MatMul, true)->ArgNames({"m", "k", "n", "threads"})
    ->Args({64, 1024, 1024, 1})->Args({64, 1024, 1024, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_MatMul, false)->ArgNames({"m", "k", "n"})
    ->Args({64, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();
// ResNet-18 3x3 at 56x56 and at 7x7, MobileNetV2 pointwise 96->576, depthwise 3x3 at 56x56,
// stride 2 at 112x112 (MobileNetV2's block 2) and 7x7 (MobileNetV3's 960), the ResNet 7x7/2 stem.
#define EMBER_CONV_CASES(kind)                                                 \
  BENCHMARK_TEMPLATE(BM_Conv, kind)                                            \
      ->ArgNames({"c", "h", "o", "k", "s", "g", "threads"})                    \
      ->ArgsProduct({{64}, {56}, {64}, {3}, {1}, {1}, {1, 2}})                 \
      ->ArgsProduct({{512}, {7}, {512}, {3}, {1}, {1}, {1, 2}})                \
      ->ArgsProduct({{96}, {14}, {576}, {1}, {1}, {1}, {1, 2}})                \
      ->ArgsProduct({{144}, {56}, {144}, {3}, {1}, {144}, {1, 2}})             \
      ->ArgsProduct({{96}, {112}, {96}, {3}, {2}, {96}, {1, 2}})               \
      ->ArgsProduct({{960}, {7}, {960}, {3}, {1}, {960}, {1, 2}})              \
      ->ArgsProduct({{3}, {224}, {64}, {7}, {2}, {1}, {1, 2}})                 \
      ->Unit(benchmark::kMillisecond)                                          \
      ->UseRealTime()
EMBER_CONV_CASES(kConvPacked);
EMBER_CONV_CASES(kConvDirect);
#undef EMBER_CONV_CASES
// ResNet-18's stride-1 3x3 layers (layer1 .. layer4).
BENCHMARK(BM_ConvWinograd)->ArgNames({"c", "h", "o", "m", "threads"})
    ->ArgsProduct({{64}, {56}, {64}, {0, 2, 4}, {1, 2}})->ArgsProduct({{128}, {28}, {128}, {0, 2, 4}, {1, 2}})
    ->ArgsProduct({{256}, {14}, {256}, {0, 2, 4}, {1, 2}})->ArgsProduct({{512}, {7}, {512}, {0, 2, 4}, {1, 2}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
// Issue 17 (reduce_index.cc). Case 0: reduce_max over the last axis of [256, 1000] (softmax-like);
// 1: reduce_max over H, W of [1, 64, 56, 56] (pooling-like); 2: argmax over the last axis of
// [256, 1000] (classifier logits); 3: argmax over the channels of [1, 21, 128, 128] (segmentation);
// 4: group_norm of [1, 64, 56, 56], 32 groups. Counter: elements read per second.
template <bool kCpu>
void BM_ReduceIndex(benchmark::State& state) {
  namespace cpu = kernels::cpu;
  namespace ref = kernels::reference;
  const int64_t c = state.range(0);
  const int64_t threads = kCpu ? state.range(1) : 1;
  OpAttrs a;
  if (c <= 1) {
    Buffer x(c == 0 ? std::vector<int64_t>{256, 1000} : std::vector<int64_t>{1, 64, 56, 56}, 1);
    a.kind = AttrKind::Reduce;
    a.count = c == 0 ? 1 : 2;
    a.axes[0] = c == 0 ? -1 : 2;
    a.axes[1] = 3;
    run_op(state, OpCode::ReduceMax, kCpu ? cpu::reduce_max : ref::reduce_max, a, {x.view}, double(x.data.size()),
           threads);
  } else if (c <= 3) {
    Buffer x(c == 2 ? std::vector<int64_t>{256, 1000} : std::vector<int64_t>{1, 21, 128, 128}, 1);
    a.kind = AttrKind::Arg;
    a.axis = c == 2 ? -1 : 1;
    run_op(state, OpCode::ArgMax, kCpu ? cpu::argmax : ref::argmax, a, {x.view}, double(x.data.size()), threads);
  } else {
    Buffer x({1, 64, 56, 56}, 1), scale({64}, 2), bias({64}, 3);
    a.kind = AttrKind::GroupNorm;
    a.groups = 32;
    a.epsilon = 1e-5f;
    run_op(state, OpCode::GroupNorm, kCpu ? cpu::group_norm : ref::group_norm, a, {x.view, scale.view, bias.view},
           double(x.data.size()), threads);
  }
}
BENCHMARK_TEMPLATE(BM_ReduceIndex, true)->ArgNames({"case", "threads"})->ArgsProduct({{0, 1, 2, 3, 4}, {1, 2}})
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_ReduceIndex, false)->ArgNames({"case"})->DenseRange(0, 4)->UseRealTime();
BENCHMARK(BM_MaxPool)->ArgNames({"c", "h", "k", "s", "threads"})->Args({64, 112, 3, 2, 1})->Args({64, 112, 3, 2, 2})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Conv, kConvReference)->ArgNames({"c", "h", "o", "k", "s", "g"})->Args({64, 56, 64, 3, 1, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ember
