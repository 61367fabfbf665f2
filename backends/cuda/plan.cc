#include "backends/cuda/plan.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/ops/cuda_ops.h"
#include "backends/cuda/register.h"
#include "runtime/interpreter/graph_runner.h"

namespace ember::backends::cuda {
namespace {

constexpr uint32_t kMaxPlanned = 2048;  // values the lifetime planner reuses memory for

struct PadRule {
  const char* name;
  Pad pad;
};

constexpr PadRule kStepInputs[] = {
    {"token_ids", Pad::Zero},          {"positions", Pad::Zero},       {"slot_mapping", Pad::MinusOne},
    {"block_tables", Pad::Zero},       {"context_lens", Pad::Zero},    {"query_start", Pad::QueryStart},
    {"logits_indices", Pad::MinusOne}, {"temperature", Pad::Zero},     {"top_k", Pad::Zero},
    {"top_p", Pad::One},               {"repetition_penalty", Pad::One}, {"seed", Pad::Zero},
    {"sample_position", Pad::Zero},    {"history", Pad::Unread},       {"history_len", Pad::Zero},
};

bool is_named(const flatbuffers::String* s, const char* name) {
  const size_t n = std::strlen(name);
  return s->size() == n && std::memcmp(s->data(), name, n) == 0;
}

}  // namespace

Pad pad_of(const char* name) {
  for (const PadRule& r : kStepInputs) {
    if (std::strcmp(r.name, name) == 0) return r.pad;
  }
  return Pad::None;
}

Slot slot_of(const GraphView& graph, uint32_t v) {
  if (graph.is_io(v)) return Slot::Io;
  switch (graph.value(v).storage_type()) {
    case fb::Storage::ConstantStorage: return Slot::Constant;
    case fb::Storage::StateStorage: return Slot::State;
    case fb::Storage::NONE: return Slot::None;
    default: return Slot::Value;
  }
}

uint16_t dim_sym(const fb::Tensor& t, uint32_t d) {
  return d < (t.dims() != nullptr ? t.dims()->size() : 0u) ? t.dims()->Get(d)->sym() : 0;
}

int64_t symbol_max(const fb::Graph& g, uint16_t sym) { return g.symbols()->Get(sym - 1u)->max(); }

namespace {

// Powers of two up to the max (the max itself last).
uint32_t ladder(int64_t max, int64_t* out, uint32_t cap) {
  uint32_t n = 0;
  for (int64_t v = 1; v < max && n + 1 < cap; v *= 2) out[n++] = v;
  out[n++] = max;
  return n;
}

}  // namespace

Status plan_buckets(const GraphView& graph, Buckets* b, ErrorContext* ctx) {
  const fb::Graph& g = graph.graph();
  const uint32_t symbols = g.symbols() != nullptr ? g.symbols()->size() : 0u;
  if (symbols == 0) {
    b->count = 1;  // one graph at the static shapes
    return Status::ok();
  }
  // An LLM step: every input is one of DESIGN §6's, T from token_ids, S from context_lens.
  bool all_known = graph.input_count() > 0;
  for (uint32_t i = 0; i < graph.input_count(); ++i) {
    const fb::NamedValue* in = g.inputs()->Get(i);
    const flatbuffers::String* name = in->name();
    const Pad pad = pad_of(name->c_str());
    if (pad == Pad::None) all_known = false;
    const fb::Tensor& t = graph.value(in->value());
    if (is_named(name, "token_ids")) b->sym_t = dim_sym(t, 0);
    if (is_named(name, "context_lens")) b->sym_s = dim_sym(t, 0);
    if (is_named(name, "query_start")) b->sym_s1 = dim_sym(t, 0);
  }
  if (!all_known || b->sym_t == 0 || b->sym_s == 0 || b->sym_s1 == 0) {
    b->eager = true;  // symbolic, but not a step: launched per call with the actual shapes
    b->count = 0;
    return Status::ok();
  }
  b->llm = true;
  b->max_t = symbol_max(g, b->sym_t);
  b->max_s = symbol_max(g, b->sym_s);
  int64_t ts[32], ss[32];
  const uint32_t nt = ladder(b->max_t, ts, 32), ns = ladder(b->max_s, ss, 32);
  for (uint32_t i = 0; i < nt; ++i) {
    for (uint32_t j = 0; j < ns; ++j) {
      if (ss[j] > ts[i] && j > 0 && ss[j - 1] >= ts[i]) continue;  // S beyond T: one bucket covers it
      // Beyond 64 tokens, S close to T (decode-heavy steps) keeps every power of two; S far below T
      // (a prefill chunk with few sequences) only 1, 4, 16, 64 and the max: the count stays small.
      const int64_t t = ts[i], s = ss[j];
      if (t > 64 && s < t / 8 && s != 1 && s != 4 && s != 16 && s != 64 && s != b->max_s) continue;
      if (b->count == kMaxBuckets) {
        return EMBER_FAIL(ctx, Error::NotSupported, "cuda: more than %zu (T, S) buckets (T <= %lld, S <= %lld)",
                          kMaxBuckets, static_cast<long long>(b->max_t), static_cast<long long>(b->max_s));
      }
      b->t[b->count] = ts[i];
      b->s[b->count] = ss[j];
      ++b->count;
    }
  }
  return Status::ok();
}

// Instruction-order lifetimes of the internal values, then a greedy best-fit placement (largest
// first) into one arena. offsets may be null (sizing only). Deterministic: plan_memory() and init()
// get the same bytes.
uint64_t plan_values(const GraphView& graph, uint64_t* offsets) {
  const fb::Graph& g = graph.graph();
  const uint32_t n = graph.value_count();
  struct Item {
    uint32_t value, first, last;
    uint64_t bytes, offset;
  };
  Item items[kMaxPlanned];
  uint32_t count = 0;
  uint64_t total = 0;
  bool overflow = false;
  for (uint32_t v = 0; v < n; ++v) {
    if (slot_of(graph, v) != Slot::Value) continue;
    const uint64_t bytes = align_up(graph.value(v).nbytes());
    if (count == kMaxPlanned) overflow = true;
    if (!overflow) items[count++] = Item{v, UINT32_MAX, 0, bytes, 0};
    total += bytes;
  }
  if (overflow) {  // no reuse: every value its own slot
    uint64_t at = 0;
    for (uint32_t v = 0; v < n; ++v) {
      if (slot_of(graph, v) != Slot::Value) continue;
      if (offsets != nullptr) offsets[v] = at;
      at += align_up(graph.value(v).nbytes());
    }
    return total;
  }
  // value -> item: items are in value order, so a binary search finds it.
  auto item_of = [&](uint32_t v) -> Item* {
    Item* it = std::lower_bound(items, items + count, v, [](const Item& a, uint32_t x) { return a.value < x; });
    return it != items + count && it->value == v ? it : nullptr;
  };
  const uint32_t instructions = graph.instruction_count();
  for (uint32_t i = 0; i < instructions; ++i) {
    const fb::Instruction& ins = *g.instructions()->Get(i);
    auto touch = [&](int64_t v) {
      if (v < 0) return;
      Item* it = item_of(static_cast<uint32_t>(v));
      if (it == nullptr) return;
      it->first = std::min(it->first, i);
      it->last = std::max(it->last, i);
    };
    if (const fb::KernelCall* call = ins.args_as_KernelCall()) {
      if (call->inputs() != nullptr) for (int32_t v : *call->inputs()) touch(v);
      if (call->outputs() != nullptr) for (uint32_t v : *call->outputs()) touch(v);
    }
  }
  uint32_t order[kMaxPlanned];
  for (uint32_t k = 0; k < count; ++k) order[k] = k;
  std::sort(order, order + count, [&](uint32_t a, uint32_t b) {
    return items[a].bytes != items[b].bytes ? items[a].bytes > items[b].bytes : items[a].value < items[b].value;
  });
  uint64_t arena = 0;
  uint32_t placed[kMaxPlanned];
  uint32_t placed_count = 0;
  for (uint32_t k = 0; k < count; ++k) {
    Item& it = items[order[k]];
    if (it.first == UINT32_MAX) it.first = it.last = 0;  // never touched: still give it bytes
    // The lowest offset that overlaps no placed value alive at the same time (placed is sorted by
    // offset, so one pass finds the first gap).
    uint64_t at = 0;
    for (uint32_t p = 0; p < placed_count; ++p) {
      const Item& o = items[placed[p]];
      if (o.last < it.first || it.last < o.first) continue;  // lifetimes disjoint
      if (o.offset >= at + it.bytes) break;                  // a gap before o fits
      at = std::max(at, o.offset + o.bytes);
    }
    it.offset = at;
    arena = std::max(arena, at + it.bytes);
    uint32_t pos = placed_count++;
    while (pos > 0 && items[placed[pos - 1]].offset > at) {
      placed[pos] = placed[pos - 1];
      --pos;
    }
    placed[pos] = order[k];
  }
  if (offsets != nullptr) {
    for (uint32_t k = 0; k < count; ++k) offsets[items[k].value] = items[k].offset;
  }
  return arena;
}

Status plan(const GraphView& graph, Layout* l, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(plan_buckets(graph, &l->buckets, ctx));
  l->runner_bytes = static_cast<size_t>(align_up(GraphRunner::memory_bytes(graph.graph()), 64));
  bool has_linear = false;
  for (uint32_t v = 0; v < graph.value_count(); ++v) {
    const uint64_t bytes = align_up(graph.value(v).nbytes());
    switch (slot_of(graph, v)) {
      case Slot::Constant: l->constant_bytes += bytes; break;
      case Slot::Io: l->io_bytes += bytes; break;
      default: break;
    }
  }
  for (uint32_t i = 0; i < graph.instruction_count(); ++i) {
    const fb::KernelCall* call = graph.graph().instructions()->Get(i)->args_as_KernelCall();
    if (call != nullptr && call->op() == fb::OpCode::Linear) has_linear = true;
  }
  l->value_bytes = plan_values(graph, nullptr);
  l->scratch_bytes = align_up(GraphRunner::scratch_bytes(graph.graph(), &registry(), 1));
  l->workspace_bytes = has_linear ? kLtWorkspace : 0;
  l->device_bytes = l->value_bytes + l->constant_bytes + l->io_bytes + l->scratch_bytes + l->workspace_bytes +
                    kStatusBytes;
  l->pinned_bytes = l->io_bytes + kStatusBytes;
  l->host_bytes = l->runner_bytes + align_up(graph.value_count() * sizeof(uint64_t), 64);
  return Status::ok();
}

MemoryRequirements requirements(const Layout& l, uint64_t handle_bytes) {
  MemoryRequirements r;
  r.add_part("handle", MemoryDomain::Host, handle_bytes);
  r.add_part("runner", MemoryDomain::Host, l.host_bytes);
  r.add_part("weights", MemoryDomain::Device, l.constant_bytes);
  r.add_part("values", MemoryDomain::Device, l.value_bytes);
  r.add_part("io staging", MemoryDomain::Device, l.io_bytes);
  r.add_part("scratch", MemoryDomain::Device, l.scratch_bytes);
  r.add_part("cublaslt workspace", MemoryDomain::Device, l.workspace_bytes);
  r.add_part("status", MemoryDomain::Device, kStatusBytes);
  // The pinned twin of the I/O staging (the host side of each step's copies) and of the status word.
  r.add_part("io staging", MemoryDomain::PinnedHost, l.io_bytes);
  r.add_part("status", MemoryDomain::PinnedHost, kStatusBytes);
  r.graph_count = l.buckets.eager ? 0 : l.buckets.count;
  return r;
}

const KernelRegistry& registry() {
  static KernelRegistry* r = [] {
    static KernelRegistry storage;
    const Status s = register_cuda_kernels(storage);
    (void)s;  // duplicate keys would be a bug caught by the tests (supports() then answers less)
    return &storage;
  }();
  return *r;
}

uint64_t plan_device_values(const GraphView& graph, uint64_t* offsets) { return plan_values(graph, offsets); }

uint32_t bucket_count(const GraphView& graph, int64_t* t, int64_t* s, uint32_t capacity) {
  Buckets b;
  if (!plan_buckets(graph, &b, nullptr).is_ok()) return 0;
  for (uint32_t i = 0; i < b.count && i < capacity; ++i) {
    t[i] = b.t[i];
    s[i] = b.s[i];
  }
  return b.count;
}

}  // namespace ember::backends::cuda
