#include "exporter/plan/memory_planner.h"

#include <algorithm>
#include <cstdio>

namespace ember::exporter {

uint64_t slot_bytes(uint64_t nbytes) { return (nbytes + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment + kTailPad; }

std::string MemoryPlan::summary() const {
  char buf[160];
  const double ratio = live_lower_bound == 0 ? 1.0 : static_cast<double>(activation_size) / live_lower_bound;
  std::snprintf(buf, sizeof(buf), "planned peak %llu bytes, live-bytes lower bound %llu bytes (ratio %.3f)",
                static_cast<unsigned long long>(activation_size), static_cast<unsigned long long>(live_lower_bound),
                ratio);
  return buf;
}

namespace {

// The largest tensor and arena a plan takes: 1 TiB, above any device, and low enough that sums of
// slots (each at most this) cannot overflow 64 bits before they are checked.
constexpr uint64_t kMaxPlannedBytes = uint64_t{1} << 40;

// A value's bytes at its symbols' maxima, with the element count and byte size checked: dims come
// from user flags (--input-shape, --max-tokens) and model files.
uint64_t planned_nbytes(const Graph& graph, int id) {
  const Value& v = graph.values[static_cast<size_t>(id)];
  uint64_t n = 1;
  bool overflow = false;
  for (const Dim& d : v.dims) overflow = overflow || d.max < 0 || __builtin_mul_overflow(n, uint64_t(d.max), &n);
  if (!overflow) overflow = __builtin_mul_overflow(n, uint64_t(bits_of(v.dtype) == 4 ? 1 : bits_of(v.dtype) / 8), &n);
  if (bits_of(v.dtype) == 4) n /= 2;
  if (overflow || n > kMaxPlannedBytes) {
    throw ExportError("plan_memory: value '" + v.name + "' " + to_string(v.dtype) + format_dims(graph, v.dims) +
                      " needs " + (overflow ? std::string("more than 2^64") : std::to_string(n)) +
                      " bytes at its symbols' maxima, above the 1 TiB limit (lower the maxima: --input-shape, "
                      "--max-tokens, --max-seqs, --max-context)");
  }
  return n;
}

void check_arena(const char* arena, uint64_t bytes) {
  if (bytes > kMaxPlannedBytes) {
    throw ExportError(std::string("plan_memory: the ") + arena + " arena needs " + std::to_string(bytes) +
                      " bytes at the symbols' maxima, above the 1 TiB limit (lower the maxima: --input-shape, "
                      "--max-tokens, --max-seqs, --max-context)");
  }
}

}  // namespace

MemoryPlan plan_memory(const Graph& graph, const Partition& partition) {
  MemoryPlan plan;
  plan.values.resize(graph.values.size());
  const size_t steps = partition.steps.size();
  if (steps == 0) throw ExportError("plan_memory: the graph has no instructions");
  const uint32_t last_step = static_cast<uint32_t>(steps - 1);

  std::vector<char> touched(graph.values.size(), 0);
  auto touch = [&](int v, uint32_t step) {
    Placement& p = plan.values[static_cast<size_t>(v)];
    if (!touched[static_cast<size_t>(v)]) {
      touched[static_cast<size_t>(v)] = 1;
      p.first = p.last = step;
    }
    p.first = std::min(p.first, step);
    p.last = std::max(p.last, step);
  };
  for (const NamedValue& in : graph.inputs) touch(in.value, 0);
  for (size_t s = 0; s < steps; ++s) {
    for (int v : partition.step_outputs(graph, s)) touch(v, static_cast<uint32_t>(s));
    for (int v : partition.step_inputs(graph, s)) {
      if (v >= 0 && !graph.values[static_cast<size_t>(v)].is_constant() && !graph.values[static_cast<size_t>(v)].is_state()) {
        touch(v, static_cast<uint32_t>(s));
      }
    }
  }
  for (const NamedValue& out : graph.outputs) touch(out.value, last_step);
  for (size_t s = 0; s < steps; ++s) {
    const Step& step = partition.steps[s];
    if (step.kind != Step::Kind::Delegate) continue;
    for (int v : partition.delegates[static_cast<size_t>(step.index)].internals) {
      touched[static_cast<size_t>(v)] = 1;
      plan.values[static_cast<size_t>(v)].first = plan.values[static_cast<size_t>(v)].last = static_cast<uint32_t>(s);
    }
  }

  // IO: inputs then outputs, contiguous.
  uint64_t io = 0;
  auto place_io = [&](int v) {
    Placement& p = plan.values[static_cast<size_t>(v)];
    p.arena = kIoArena;
    p.nbytes = planned_nbytes(graph, v);
    p.offset = io;
    io += slot_bytes(p.nbytes);
    check_arena("io", io);
  };
  for (const NamedValue& in : graph.inputs) place_io(in.value);
  for (const NamedValue& out : graph.outputs) place_io(out.value);
  plan.io_size = io;

  // Activation: greedy by size.
  std::vector<int> order;
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (!touched[v] || plan.values[v].arena == kIoArena || graph.values[v].is_constant()) continue;
    plan.values[v].arena = kActivationArena;
    plan.values[v].nbytes = planned_nbytes(graph, static_cast<int>(v));
    order.push_back(static_cast<int>(v));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Placement& pa = plan.values[static_cast<size_t>(a)];
    const Placement& pb = plan.values[static_cast<size_t>(b)];
    if (pa.nbytes != pb.nbytes) return pa.nbytes > pb.nbytes;
    return pa.first < pb.first;
  });
  std::vector<int> placed;
  uint64_t peak = 0;
  for (int v : order) {
    Placement& p = plan.values[static_cast<size_t>(v)];
    const uint64_t size = slot_bytes(p.nbytes);
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of overlapping-in-time values
    for (int q : placed) {
      const Placement& o = plan.values[static_cast<size_t>(q)];
      if (o.first <= p.last && p.first <= o.last) busy.emplace_back(o.offset, o.offset + slot_bytes(o.nbytes));
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    p.offset = offset;
    peak = std::max(peak, offset + size);
    check_arena("activation", peak);
    placed.push_back(v);
  }
  plan.activation_size = peak;

  std::vector<uint64_t> live(steps, 0);
  for (int v : order) {
    const Placement& p = plan.values[static_cast<size_t>(v)];
    for (uint32_t s = p.first; s <= p.last; ++s) live[s] += slot_bytes(p.nbytes);
  }
  plan.live_lower_bound = *std::max_element(live.begin(), live.end());
  return plan;
}

}  // namespace ember::exporter
