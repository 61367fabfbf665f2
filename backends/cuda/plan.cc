#include "backends/cuda/plan.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "backends/cuda/ops/cuda_ops.h"
#include "backends/cuda/register.h"
#include "runtime/core/quant.h"
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

// A list of bucket values: kMaxBuckets entries from a spec, plus the max when it is missing.
constexpr uint32_t kMaxList = kMaxBuckets + 1;

// Powers of two up to the max (the max itself last).
uint32_t ladder(int64_t max, int64_t* out, uint32_t cap) {
  uint32_t n = 0;
  for (int64_t v = 1; v < max && n + 1 < cap; v *= 2) out[n++] = v;
  out[n++] = max;
  return n;
}

// `n` bytes of program text for a message, NUL-terminated in `out` (cap bytes): all of them when they
// fit, else the first cap - 4 and "..."; non-printable bytes as '?' (the program is untrusted).
void printable(const uint8_t* p, size_t n, char* out, size_t cap) {
  const size_t keep = n <= cap - 1 ? n : cap - 4;
  for (size_t i = 0; i < keep; ++i) out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? static_cast<char>(p[i]) : '?';
  size_t end = keep;
  if (keep < n) {
    std::memcpy(out + keep, "...", 3);
    end += 3;
  }
  out[end] = '\0';
}

constexpr size_t kTextCap = 68;  // a spec's value in a message (ErrorContext keeps 256 bytes)

// A bucket spec's value: a comma-separated, strictly ascending list of positive decimal integers,
// each <= max (the graph's max of `dim`); the max is appended when the list does not end with it.
Status parse_list(const CompileSpec& spec, const char* dim, int64_t max, int64_t* out, uint32_t* count,
                  ErrorContext* ctx) {
  char text[kTextCap];
  printable(spec.value.data(), spec.value.size(), text, sizeof(text));
  const uint8_t* p = spec.value.data();
  const size_t size = spec.value.size();
  if (size == 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "cuda: compile spec %s = '': empty (expected ascending positive integers, e.g. 1,2,4,8)",
                      spec.key);
  }
  uint32_t n = 0;
  for (size_t at = 0; at <= size;) {
    size_t end = at;
    while (end < size && p[end] != ',') ++end;
    char item[24];
    printable(p + at, end - at, item, sizeof(item));
    // Digits only; past the max the value stops growing (no overflow), its text is what is reported.
    bool digits = end > at;
    int64_t v = 0;
    for (size_t k = at; k < end && digits; ++k) {
      if (p[k] < '0' || p[k] > '9') digits = false;
      else if (v <= max) v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (p[k] - '0');
    }
    if (!digits) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile spec %s = '%s': entry '%s' is not a positive integer",
                        spec.key, text, item);
    }
    if (v == 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile spec %s = '%s': entry '%s' is zero (buckets hold >= 1)",
                        spec.key, text, item);
    }
    if (v > max) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile spec %s = '%s': %s is above the graph's max %s (%lld)",
                        spec.key, text, item, dim, static_cast<long long>(max));
    }
    if (n > 0 && v <= out[n - 1]) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile spec %s = '%s': %s after %lld, not ascending",
                        spec.key, text, item, static_cast<long long>(out[n - 1]));
    }
    if (n == kMaxBuckets) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile spec %s = '%s': more than %zu entries", spec.key, text,
                        kMaxBuckets);
    }
    out[n++] = v;
    at = end + 1;
  }
  if (out[n - 1] != max) out[n++] = max;  // every legal step has a bucket
  *count = n;
  return Status::ok();
}

// The bucket specs among `specs` (null: not given). Any other key, or one given twice, is an error.
Status find_specs(Span<const CompileSpec> specs, const CompileSpec** tokens, const CompileSpec** seqs,
                  ErrorContext* ctx) {
  for (const CompileSpec& spec : specs) {
    const CompileSpec** slot = std::strcmp(spec.key, kSpecTokens) == 0 ? tokens
                               : std::strcmp(spec.key, kSpecSeqs) == 0 ? seqs
                                                                       : nullptr;
    if (slot == nullptr) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: unknown compile spec '%.64s' (understood: %s, %s)", spec.key,
                        kSpecTokens, kSpecSeqs);
    }
    if (*slot != nullptr) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile spec '%s' given twice for one delegate", spec.key);
    }
    *slot = &spec;
  }
  return Status::ok();
}

}  // namespace

Status plan_buckets(const GraphView& graph, Span<const CompileSpec> specs, Buckets* b, ErrorContext* ctx) {
  const CompileSpec* tokens = nullptr;
  const CompileSpec* seqs = nullptr;
  EMBER_RETURN_IF_ERROR(find_specs(specs, &tokens, &seqs, ctx));
  const CompileSpec* given = tokens != nullptr ? tokens : seqs;
  const fb::Graph& g = graph.graph();
  const uint32_t symbols = g.symbols() != nullptr ? g.symbols()->size() : 0u;
  if (symbols == 0) {
    if (given != nullptr) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "cuda: compile spec %s applies to an LLM step graph; this delegate's graph has no symbols "
                        "(one graph at static shapes)",
                        given->key);
    }
    b->count = 1;  // one graph at the static shapes
    return Status::ok();
  }
  // An LLM step: every input is one of docs/DESIGN.md §6's, T from token_ids, S from context_lens.
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
    if (given != nullptr) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "cuda: compile spec %s applies to an LLM step graph; this delegate's graph has other "
                        "symbolic inputs (launched per call, no buckets)",
                        given->key);
    }
    b->eager = true;  // symbolic, but not a step: launched per call with the actual shapes
    b->count = 0;
    return Status::ok();
  }
  b->llm = true;
  b->max_t = symbol_max(g, b->sym_t);
  b->max_s = symbol_max(g, b->sym_s);
  int64_t ts[kMaxList], ss[kMaxList];
  uint32_t nt = 0, ns = 0;
  if (tokens != nullptr) {
    EMBER_RETURN_IF_ERROR(parse_list(*tokens, "T", b->max_t, ts, &nt, ctx));
  } else {
    nt = ladder(b->max_t, ts, kMaxList);
  }
  if (seqs != nullptr) {
    EMBER_RETURN_IF_ERROR(parse_list(*seqs, "S", b->max_s, ss, &ns, ctx));
  } else {
    ns = ladder(b->max_s, ss, kMaxList);
  }
  const bool fixed_rule = given == nullptr;
  uint32_t total = 0;  // counted past kMaxBuckets too, for the message
  for (uint32_t i = 0; i < nt; ++i) {
    for (uint32_t j = 0; j < ns; ++j) {
      if (ss[j] > ts[i] && j > 0 && ss[j - 1] >= ts[i]) continue;  // S beyond T: one bucket covers it
      // Beyond 64 tokens, S close to T (decode-heavy steps) keeps every power of two; S far below T
      // (a prefill chunk with few sequences) only 1, 4, 16, 64 and the max: the count stays small.
      // A user's lists are taken as given.
      const int64_t t = ts[i], s = ss[j];
      if (fixed_rule && t > 64 && s < t / 8 && s != 1 && s != 4 && s != 16 && s != 64 && s != b->max_s) continue;
      if (total < kMaxBuckets) {
        b->t[total] = t;
        b->s[total] = s;
      }
      ++total;
    }
  }
  if (total > kMaxBuckets) {
    b->count = 0;
    if (fixed_rule) {
      return EMBER_FAIL(ctx, Error::NotSupported, "cuda: more than %zu (T, S) buckets (T <= %lld, S <= %lld)",
                        kMaxBuckets, static_cast<long long>(b->max_t), static_cast<long long>(b->max_s));
    }
    char t_text[kTextCap], s_text[kTextCap];
    if (tokens != nullptr) printable(tokens->value.data(), tokens->value.size(), t_text, sizeof(t_text));
    if (seqs != nullptr) printable(seqs->value.data(), seqs->value.size(), s_text, sizeof(s_text));
    return EMBER_FAIL(ctx, Error::InvalidArgument, "cuda: compile specs %s = %s%s%s, %s = %s%s%s make %u (T, S) buckets, more than %zu",
                      kSpecTokens, tokens != nullptr ? "'" : "", tokens != nullptr ? t_text : "(powers of two)",
                      tokens != nullptr ? "'" : "", kSpecSeqs, seqs != nullptr ? "'" : "",
                      seqs != nullptr ? s_text : "(powers of two)", seqs != nullptr ? "'" : "", total, kMaxBuckets);
  }
  b->count = total;
  return Status::ok();
}

namespace {

const fb::KernelCall* kernel_call(const fb::Graph& g, uint32_t i) {
  return g.instructions()->Get(i)->args_as_KernelCall();
}

// A linear whose activations are FP8 per token and whose weight is FP8 per tensor / per channel.
bool is_w8a8_linear(const fb::Graph& g, const fb::KernelCall& call) {
  if (call.op() != fb::OpCode::Linear || call.inputs() == nullptr || call.inputs()->size() < 2) return false;
  const fb::LinearAttrs* a = call.attrs_as_LinearAttrs();
  if (a == nullptr || a->activation_quant() != fb::ActivationQuant::Fp8PerToken) return false;
  const int32_t wv = call.inputs()->Get(1);
  if (wv < 0) return false;
  const fb::Tensor& w = *g.values()->Get(static_cast<uint32_t>(wv));
  const fb::QuantInfo* q = w.quant();
  if (q == nullptr || w.dims() == nullptr || w.dims()->size() != 2 || q->block() == nullptr ||
      q->block()->size() != 2) {
    return false;
  }
  const QuantLayout layout =
      classify_quant(static_cast<ScalarType>(w.dtype()), static_cast<ScalarType>(q->scale_dtype()),
                     w.dims()->Get(0)->max(), w.dims()->Get(1)->max(), q->block()->Get(0), q->block()->Get(1),
                     q->global_scale() >= 0);
  return layout == QuantLayout::PerTensor || layout == QuantLayout::PerChannel;
}

}  // namespace

bool reads_fused(const GraphView& graph, uint32_t i, const FusedGroup& grp) {
  const fb::KernelCall* call = kernel_call(graph.graph(), i);
  return call != nullptr && i > grp.producer && is_w8a8_linear(graph.graph(), *call) &&
         call->inputs()->Get(0) == static_cast<int32_t>(grp.value);
}

uint32_t plan_fused(const GraphView& graph, FusedGroup* groups) {
  const fb::Graph& g = graph.graph();
  const uint32_t instructions = graph.instruction_count();
  uint32_t count = 0;
  for (uint32_t i = 0; i < instructions && count < kMaxFused; ++i) {
    const fb::KernelCall* call = kernel_call(g, i);
    if (call == nullptr || (call->op() != fb::OpCode::RmsNorm && call->op() != fb::OpCode::SiluMul) ||
        call->outputs() == nullptr || call->outputs()->size() != 1) {
      continue;
    }
    const uint32_t v = call->outputs()->Get(0);
    const fb::Tensor& t = graph.value(v);
    if (slot_of(graph, v) != Slot::Value || static_cast<ScalarType>(t.dtype()) != ScalarType::F32 ||
        t.dims() == nullptr || t.dims()->size() == 0) {
      continue;
    }
    FusedGroup grp;
    grp.producer = i;
    grp.value = v;
    grp.k = t.dims()->Get(t.dims()->size() - 1)->max();
    if (grp.k <= 0) continue;
    grp.rows = static_cast<int64_t>(t.nbytes() / 4) / grp.k;
    // Fused only where the producer is the value's one writer, so the buffer is what the linear's
    // x holds (a later in-place writer would make it stale).
    bool sole_writer = true, read = false;
    for (uint32_t j = 0; j < instructions; ++j) {
      const fb::KernelCall* other = kernel_call(g, j);
      if (other == nullptr) continue;
      if (j != i && other->outputs() != nullptr) {
        for (uint32_t o : *other->outputs()) sole_writer = sole_writer && o != v;
      }
      if (reads_fused(graph, j, grp)) {
        read = true;
        grp.last_use = j;
      }
    }
    if (!sole_writer || !read) continue;
    const int64_t f32_rows = grp.rows < kGemvMaxRows ? grp.rows : kGemvMaxRows;
    const uint64_t f32_bytes = static_cast<uint64_t>(f32_rows * grp.k) * 4, code_bytes = static_cast<uint64_t>(grp.rows * grp.k);
    grp.scales_bytes = align_up(static_cast<uint64_t>(grp.rows) * 4);
    grp.bytes = grp.scales_bytes + align_up(f32_bytes > code_bytes ? f32_bytes : code_bytes);
    groups[count++] = grp;
  }
  return count;
}

// Instruction-order lifetimes of the internal values (and of the fused groups' buffers: producer to
// last reader), then a greedy best-fit placement (largest first) into one arena. The offsets may be
// null (sizing only). Deterministic: plan_memory() and init() get the same bytes.
uint64_t plan_values(const GraphView& graph, uint64_t* offsets, const FusedGroup* groups, uint32_t group_count,
                     uint64_t* group_offsets) {
  const fb::Graph& g = graph.graph();
  const uint32_t n = graph.value_count();
  struct Item {
    uint32_t value, first, last;  // value: n + group index for a fused buffer
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
  for (uint32_t k = 0; k < group_count; ++k) {
    if (count == kMaxPlanned) overflow = true;
    if (!overflow) items[count++] = Item{n + k, groups[k].producer, groups[k].last_use, groups[k].bytes, 0};
    total += groups[k].bytes;
  }
  if (overflow) {  // no reuse: everything its own slot
    uint64_t at = 0;
    for (uint32_t v = 0; v < n; ++v) {
      if (slot_of(graph, v) != Slot::Value) continue;
      if (offsets != nullptr) offsets[v] = at;
      at += align_up(graph.value(v).nbytes());
    }
    for (uint32_t k = 0; k < group_count; ++k) {
      if (group_offsets != nullptr) group_offsets[k] = at;
      at += groups[k].bytes;
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
  for (uint32_t k = 0; k < count; ++k) {
    if (items[k].value < n) {
      if (offsets != nullptr) offsets[items[k].value] = items[k].offset;
    } else if (group_offsets != nullptr) {
      group_offsets[items[k].value - n] = items[k].offset;
    }
  }
  return arena;
}

Status plan(const GraphView& graph, Span<const CompileSpec> specs, Layout* l, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(plan_buckets(graph, specs, &l->buckets, ctx));
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
  FusedGroup* groups = new (std::nothrow) FusedGroup[kMaxFused];
  if (groups == nullptr) return EMBER_FAIL(ctx, Error::OutOfMemory, "cuda: the fusion plan");
  l->fused_count = plan_fused(graph, groups);
  l->value_bytes = plan_values(graph, nullptr, groups, l->fused_count, nullptr);
  delete[] groups;
  l->scratch_bytes = align_up(GraphRunner::scratch_bytes(graph.graph(), &registry(), 1));
  l->workspace_bytes = has_linear ? kLtWorkspace : 0;
  l->device_bytes = l->value_bytes + l->constant_bytes + l->io_bytes + l->scratch_bytes + l->workspace_bytes +
                    kStatusBytes;
  l->pinned_bytes = l->io_bytes + kStatusBytes;
  // Runner, per-value offsets, then the fused groups, their offsets and one FusedQuant per instruction.
  l->host_bytes = l->runner_bytes + align_up(graph.value_count() * sizeof(uint64_t), 64) +
                  align_up(l->fused_count * (sizeof(FusedGroup) + sizeof(uint64_t)), 64) +
                  (l->fused_count > 0 ? align_up(graph.instruction_count() * sizeof(FusedQuant), 64) : 0);
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
  if (!plan_buckets(graph, Span<const CompileSpec>(), &b, nullptr).is_ok()) return 0;
  for (uint32_t i = 0; i < b.count && i < capacity; ++i) {
    t[i] = b.t[i];
    s[i] = b.s[i];
  }
  return b.count;
}

}  // namespace ember::backends::cuda
