#include "runtime/executor/program.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/core/hash.h"
#include "runtime/interpreter/graph_runner.h"
#include "runtime/executor/method.h"
#include "runtime/executor/method_internal.h"
#include "runtime/platform/platform.h"
#include "runtime/program/validator.h"

namespace ember {
namespace {

template <typename T>
uint32_t size_of(const flatbuffers::Vector<T>* v) { return v ? v->size() : 0; }

// A state's dims with the load-time symbol values (others at their max) into dims; its bytes, or
// UINT64_MAX when the element count overflows.
uint64_t resolve_state(const fb::Program& p, const fb::StateDecl& decl, Span<const SymbolValue> symbols, int64_t* dims) {
  uint64_t numel = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < size_of(decl.dims()); ++d) {
    const fb::Dim* dim = decl.dims()->Get(d);
    int64_t size = dim->max();
    if (dim->sym() != 0) {
      const char* sym_name = p.symbols()->Get(dim->sym() - 1u)->name()->c_str();
      for (const SymbolValue& chosen : symbols) {
        if (std::strcmp(chosen.name, sym_name) == 0) size = chosen.value;
      }
    }
    dims[d] = size;
    overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(size), &numel);
  }
  return overflow ? UINT64_MAX : nbytes_of(static_cast<ScalarType>(decl.dtype()), numel);
}

// Whether `backend` takes `graph` as a whole (Backend::accepts); else writes why into `why`.
bool accepts_graph(const Backend& backend, const RuntimeContext& rt, const fb::Graph& graph,
                   Span<const SegmentData> segments, char* why, size_t why_size) {
  if (backend.accepts(rt, GraphView(&graph, segments), why, why_size)) return true;
  if (why_size > 0 && why[0] == '\0') std::snprintf(why, why_size, "refused by the backend");
  return false;
}

// Whether `backend` can run every instruction of `graph` and takes it whole; else writes the first
// instruction it cannot run, or its refusal, into `why`.
bool supports_graph(const Backend& backend, const char* name, const RuntimeContext& rt, const fb::Graph& graph,
                    Span<const SegmentData> segments, char* why, size_t why_size) {
  for (uint32_t i = 0; i < size_of(graph.instructions()); ++i) {
    const fb::Instruction& ins = *graph.instructions()->Get(i);
    if (ins.args_type() == fb::InstructionArgs::Move) continue;
    if (ins.args_type() != fb::InstructionArgs::KernelCall) {
      std::snprintf(why, why_size, "%s: instruction %u is control flow or a delegate call", name, i);
      return false;
    }
    const KernelKey key = GraphRunner::kernel_key(graph, *ins.args_as_KernelCall());
    if (!backend.supports(rt, key)) {
      char text[96];
      format_key(key, text, sizeof(text));
      std::snprintf(why, why_size, "%s lacks %s (instruction %u)", name, text, i);
      return false;
    }
  }
  return accepts_graph(backend, rt, graph, segments, why, why_size);
}

// What Program asks the app's DeviceAllocator for a host state (the same request frees it).
AllocationRequest host_state_request(const Program::State& state) {
  AllocationRequest request;
  request.domain = MemoryDomain::Host;
  request.purpose = AllocationRequest::Purpose::State;
  request.bytes = state.nbytes;
  request.owner = "program";
  request.name = state.name;
  return request;
}

}  // namespace

Status Program::choose_backends(ErrorContext* ctx) {
  const fb::Program& p = *program_;
  const uint32_t method_count = size_of(p.methods());
  size_t total = 0;
  for (uint32_t m = 0; m < method_count; ++m) total += 1 + size_of(p.methods()->Get(m)->delegates());
  choices_ = static_cast<BackendChoice*>(platform_aligned_alloc(alignof(BackendChoice), total * sizeof(BackendChoice)));
  choice_begin_ = static_cast<uint32_t*>(platform_aligned_alloc(alignof(uint32_t), method_count * sizeof(uint32_t)));
  if (choices_ == nullptr || choice_begin_ == nullptr) return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating backend choices");
  for (size_t c = 0; c < total; ++c) new (&choices_[c]) BackendChoice();
  choice_count_ = total;
  const RuntimeContext& rt = runtime_;
  size_t next = 0;
  for (uint32_t m = 0; m < method_count; ++m) {
    const fb::Method& method = *p.methods()->Get(m);
    choice_begin_[m] = static_cast<uint32_t>(next);
    // The whole body: only on request (a priority list), only for a method without delegates.
    BackendChoice& body = choices_[next++];
    const uint32_t delegate_count = size_of(method.delegates());
    std::snprintf(body.reason, sizeof(body.reason), "%s", "portable kernels");
    if (has_priority_ && delegate_count == 0) {
      size_t used = 0;
      for (size_t b = 0; b < priority_count_; ++b) {
        const Backend* backend = rt.backends->find(priority_[b]);
        char why[160] = {0};
        if (!backend->is_available(rt)) {
          const char* detail = backend->unavailable_reason(rt);
          std::snprintf(why, sizeof(why), detail[0] != '\0' ? "%s unavailable (%s)" : "%s unavailable%s", priority_[b],
                        detail);
        } else if (supports_graph(*backend, priority_[b], rt, *method.graph(), segments(), why, sizeof(why))) {
          body.backend = backend;
          body.name = priority_[b];
          std::snprintf(body.reason, sizeof(body.reason), "first listed backend that runs all %u instructions",
                        size_of(method.graph()->instructions()));
          break;
        }
        const int n = std::snprintf(body.reason + used, sizeof(body.reason) - used, "%s%s", used ? "; " : "", why);
        used = std::min(sizeof(body.reason) - 1, used + (n > 0 ? static_cast<size_t>(n) : 0));
      }
      if (body.backend == nullptr && used > 0) {
        const size_t left = sizeof(body.reason) - used;
        if (left > 1) std::snprintf(body.reason + used, left, "; portable kernels");
      }
    }
    for (uint32_t d = 0; d < delegate_count; ++d) {
      const fb::Delegate& del = *method.delegates()->Get(d);
      BackendChoice& choice = choices_[next++];
      const char* exported = del.backend_id()->c_str();
      // Candidates: the priority list, or the backend the delegate was exported for.
      const char* candidates[kMaxLoadNames];
      size_t candidate_count = 0;
      if (has_priority_) {
        for (size_t b = 0; b < priority_count_; ++b) candidates[candidate_count++] = priority_[b];
      } else if (rt.backends != nullptr && rt.backends->find(exported) != nullptr) {
        candidates[candidate_count++] = exported;
      }
      size_t used = 0;
      auto note = [&](const char* text) {
        const int n = std::snprintf(choice.reason + used, sizeof(choice.reason) - used, "%s%s", used ? "; " : "", text);
        used = std::min(sizeof(choice.reason) - 1, used + (n > 0 ? static_cast<size_t>(n) : 0));
      };
      for (size_t c = 0; c < candidate_count && choice.backend == nullptr; ++c) {
        const Backend* backend = rt.backends->find(candidates[c]);
        const bool own = std::strcmp(candidates[c], exported) == 0;
        char why[160] = {0};
        if (!backend->is_available(rt)) {
          const char* detail = backend->unavailable_reason(rt);
          std::snprintf(why, sizeof(why), detail[0] != '\0' ? "%s unavailable (%s)" : "%s unavailable%s", candidates[c],
                        detail);
        } else if (del.format() != fb::DelegateFormat::Graph) {
          if (own) {
            choice.backend = backend;
            choice.name = candidates[c];
            used = 0;
            note("exported for it (OPAQUE payload)");
            break;
          }
          std::snprintf(why, sizeof(why), "%s: an OPAQUE payload for %s cannot be retargeted", candidates[c], exported);
        } else if (own ? accepts_graph(*backend, rt, *del.payload_nested_root(), segments(), why, sizeof(why))
                       : supports_graph(*backend, candidates[c], rt, *del.payload_nested_root(), segments(), why,
                                        sizeof(why))) {
          // The backend the delegate was exported for is taken at its word per instruction (the
          // exporter partitioned against its manifest) but may still refuse the graph as a whole
          // (accepts(): attributes the manifest cannot express). Others must show support.
          choice.backend = backend;
          choice.name = candidates[c];
          used = 0;
          if (own) {
            note("exported for it");
          } else {
            char text[128];
            std::snprintf(text, sizeof(text), "retargeted from %s: first listed backend that runs all %u instructions",
                          exported, size_of(del.payload_nested_root()->instructions()));
            note(text);
          }
          break;
        }
        note(why);
      }
      if (choice.backend != nullptr) continue;
      if (!has_priority_ && (rt.backends == nullptr || rt.backends->find(exported) == nullptr)) {
        char text[96];
        std::snprintf(text, sizeof(text), "%s is not registered", exported);
        note(text);
      }
      const bool can_fall_back = options_.fallback == Fallback::Portable && del.format() == fb::DelegateFormat::Graph;
      note(can_fall_back ? "portable kernels (fallback)" : "no backend can run it");
      if (!can_fall_back) choice.name = "";
    }
  }
  return Status::ok();
}

Status Program::claim_states(ErrorContext* ctx) {
  if (state_count_ == 0) return Status::ok();
  const fb::Program& p = *program_;
  // Who reads each state: null = host code (portable kernels, or a backend that does not own
  // state), else the owning backend. `claimed` says whether anyone does; `where` names the first
  // claimant for the error message.
  struct Claim {
    bool claimed = false;
    const Backend* owner = nullptr;
    const char* owner_name = "";
    char where[96] = {0};
  };
  Claim claims[64];
  Claim* claim = state_count_ <= 64 ? claims
                                     : static_cast<Claim*>(platform_aligned_alloc(alignof(Claim), state_count_ * sizeof(Claim)));
  if (claim == nullptr) return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating state claims");
  if (claim != claims) for (size_t s = 0; s < state_count_; ++s) new (&claim[s]) Claim();
  struct Release {
    Claim* claim; Claim* stack;
    ~Release() { if (claim != stack) platform_aligned_free(claim); }
  } release_claims{claim, claims};

  auto visit = [&](const fb::Graph& graph, const BackendChoice& choice, const char* method, uint32_t delegate) -> Status {
    const Backend* owner = choice.backend != nullptr && choice.backend->owns_state() ? choice.backend : nullptr;
    const char* owner_name = owner != nullptr ? choice.name : "host";
    for (uint32_t v = 0; v < size_of(graph.values()); ++v) {
      const fb::Tensor& t = *graph.values()->Get(v);
      if (t.storage_type() != fb::Storage::StateStorage) continue;
      const char* name = t.storage_as_StateStorage()->name()->c_str();
      size_t s = 0;
      while (s < state_count_ && std::strcmp(states_[s].name, name) != 0) ++s;
      if (s == state_count_) continue;  // the validator rejects undeclared state
      char where[96];
      if (delegate == kWholeMethod) {
        std::snprintf(where, sizeof(where), "%s (method '%s')", owner ? owner_name : choice.name, method);
      } else {
        std::snprintf(where, sizeof(where), "%s (method '%s' delegate %u)", owner ? owner_name : choice.name, method,
                      delegate);
      }
      Claim& c = claim[s];
      if (!c.claimed) {
        c.claimed = true;
        c.owner = owner;
        c.owner_name = owner_name;
        std::snprintf(c.where, sizeof(c.where), "%s", where);
      } else if (c.owner != owner) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "state '%s' is claimed by %s and by %s: one state lives in one memory (choose the backends "
                          "with LoadOptions::backends so that one of them runs every graph that names it)",
                          name, c.where, where);
      }
    }
    return Status::ok();
  };
  for (uint32_t m = 0; m < size_of(p.methods()); ++m) {
    const fb::Method& method = *p.methods()->Get(m);
    const char* name = method.name()->c_str();
    const BackendChoice& body = choices_[choice_begin_[m]];
    EMBER_RETURN_IF_ERROR(visit(*method.graph(), body, name, kWholeMethod));
    for (uint32_t d = 0; d < size_of(method.delegates()); ++d) {
      const fb::Delegate& del = *method.delegates()->Get(d);
      if (del.format() != fb::DelegateFormat::Graph) continue;
      const BackendChoice& choice = choices_[choice_begin_[m] + 1 + d];
      // No backend and no fallback (Fallback::Fail): it never runs, so it claims nothing;
      // load_method refuses its method with BackendUnavailable.
      if (choice.backend == nullptr && choice.name[0] == '\0') continue;
      EMBER_RETURN_IF_ERROR(visit(*del.payload_nested_root(), choice, name, d));
    }
  }
  for (size_t s = 0; s < state_count_; ++s) {
    State& state = states_[s];
    StateSpec spec;
    spec.name = state.name;
    spec.dtype = state.dtype;
    spec.rank = state.rank;
    for (int d = 0; d < state.rank; ++d) spec.dims[d] = state.dims[d];
    spec.nbytes = state.nbytes;
    if (claim[s].owner != nullptr) {
      BackendLoadContext load;
      load.runtime = &runtime_;
      load.symbols = load_symbols();
      load.error = ctx;
      load.backend_id = claim[s].owner_name;
      Result<StateBuffer*> buffer = claim[s].owner->create_state(load, spec);
      if (!buffer.is_ok()) {
        return EMBER_FAIL(ctx, buffer.error(), "backend '%s' could not create state '%s' (%llu bytes)",
                          claim[s].owner_name, state.name, static_cast<unsigned long long>(state.nbytes));
      }
      state.backend = claim[s].owner;
      state.buffer = buffer.value();
      state.owner = claim[s].owner_name;
      state.domain = MemoryDomain::Device;
      state.memory = claim[s].owner->state_requirements(spec);
      continue;
    }
    state.data = state.nbytes > SIZE_MAX
                     ? nullptr
                     : static_cast<uint8_t*>(allocate_host_memory(runtime_.device_allocator, host_state_request(state)));
    if (state.data == nullptr) {
      return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating state '%s' (%llu bytes)", state.name,
                        static_cast<unsigned long long>(state.nbytes));
    }
    std::memset(state.data, 0, static_cast<size_t>(state.nbytes));
    state.memory.add_part("state", MemoryDomain::Host, state.nbytes);
  }
  return Status::ok();
}

const Program::BackendChoice* Program::backend_choice(const fb::Method& method, uint32_t delegate) const {
  for (uint32_t m = 0; m < method_count(); ++m) {
    if (program_->methods()->Get(m) != &method) continue;
    if (delegate == kWholeMethod) return &choices_[choice_begin_[m]];
    return delegate < size_of(method.delegates()) ? &choices_[choice_begin_[m] + 1 + delegate] : nullptr;
  }
  return nullptr;
}

Result<Program> Program::load(DataLoader& loader, const RuntimeContext& runtime, const LoadOptions& options,
                              ErrorContext* ctx) {
  const bool check = options.verification != Verification::Trusted;
  const uint64_t file_size = loader.size();
  Program program;
  program.runtime_ = runtime;
  program.options_ = options;

  // Header.
  {
    const size_t n = file_size < kHeaderSize ? static_cast<size_t>(file_size) : kHeaderSize;
    Result<FreeableBuffer> bytes = loader.load(0, n, 8);
    if (!bytes.is_ok()) return EMBER_FAIL(ctx, bytes.error(), "cannot read the program header");
    EMBER_RETURN_IF_ERROR(decode_header(bytes->data(), bytes->size(), file_size, check, &program.header_, ctx));
  }
  const FileHeader& h = program.header_;

  // FlatBuffer: CRC, identifier, verifier.
  if (ctx) ctx->phase = ErrorContext::Phase::Verify;
  {
    Result<FreeableBuffer> bytes = loader.load(h.flatbuffer_offset, h.flatbuffer_size, kFlatBufferAlignment);
    if (!bytes.is_ok()) return EMBER_FAIL(ctx, bytes.error(), "cannot read the program FlatBuffer");
    program.flatbuffer_bytes_ = std::move(bytes).value();
  }
  const uint8_t* fb_data = program.flatbuffer_bytes_.data();
  if (check) {
    const uint32_t crc = crc32c(fb_data, h.flatbuffer_size);
    if (crc != h.flatbuffer_crc32c) {
      return EMBER_FAIL(ctx, Error::IntegrityError, "FlatBuffer checksum mismatch (stored %08x, computed %08x)",
                        h.flatbuffer_crc32c, crc);
    }
    if (!fb::ProgramBufferHasIdentifier(fb_data)) {
      const char* id = flatbuffers::GetBufferIdentifier(fb_data);
      if (id[0] == 'E' && id[1] == 'M') {
        return EMBER_FAIL(ctx, Error::VersionMismatch, "FlatBuffer identifier '%.4s', this runtime reads '%s'", id,
                          fb::ProgramIdentifier());
      }
      return EMBER_FAIL(ctx, Error::InvalidProgram, "FlatBuffer identifier is not '%s'", fb::ProgramIdentifier());
    }
    flatbuffers::Verifier verifier(fb_data, h.flatbuffer_size, /*max_depth=*/64, /*max_tables=*/4000000);
    if (!fb::VerifyProgramBuffer(verifier)) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "FlatBuffer failed verification (malformed or truncated tables)");
    }
  }
  program.program_ = fb::GetProgram(fb_data);
  const fb::Program& p = *program.program_;

  // Segments.
  const uint32_t segment_count = size_of(p.segments());
  if (segment_count > 4096) return EMBER_FAIL(ctx, Error::InvalidProgram, "%u segments (limit 4096)", segment_count);
  if (segment_count > 0) {
    program.segment_buffers_ = static_cast<FreeableBuffer*>(
        platform_aligned_alloc(alignof(FreeableBuffer), segment_count * sizeof(FreeableBuffer)));
    program.segment_data_ = static_cast<SegmentData*>(
        platform_aligned_alloc(alignof(SegmentData), segment_count * sizeof(SegmentData)));
    if (!program.segment_buffers_ || !program.segment_data_) {
      return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating %u segment records", segment_count);
    }
    for (uint32_t s = 0; s < segment_count; ++s) {
      new (&program.segment_buffers_[s]) FreeableBuffer();
      new (&program.segment_data_[s]) SegmentData();
    }
    program.segment_count_ = segment_count;
  }
  for (uint32_t s = 0; s < segment_count; ++s) {
    const fb::Segment* seg = p.segments()->Get(s);
    const uint32_t align = seg->alignment();
    const bool kind_ok = seg->kind() >= fb::SegmentKind::Constants && seg->kind() <= fb::SegmentKind::Debug;
    if (check && (!kind_ok || align < 64 || align > kConstantSegmentAlignment || (align & (align - 1)) != 0 ||
                  seg->offset() % align != 0 ||
                  (seg->kind() == fb::SegmentKind::Constants && align != kConstantSegmentAlignment) ||
                  seg->offset() > h.segment_size || seg->size() > h.segment_size - seg->offset())) {
      return EMBER_FAIL(ctx, Error::InvalidProgram,
                        "segment %u (kind %u, offset %llu, size %llu, alignment %u) is outside the %llu-byte segment "
                        "area or misaligned", s, static_cast<unsigned>(seg->kind()),
                        static_cast<unsigned long long>(seg->offset()), static_cast<unsigned long long>(seg->size()),
                        align, static_cast<unsigned long long>(h.segment_size));
    }
    Result<FreeableBuffer> bytes = loader.load(h.segment_base + seg->offset(), static_cast<size_t>(seg->size()),
                                               align > 4096 ? 4096 : align);
    if (!bytes.is_ok()) return EMBER_FAIL(ctx, bytes.error(), "cannot read segment %u", s);
    program.segment_buffers_[s] = std::move(bytes).value();
    program.segment_data_[s] = SegmentData{program.segment_buffers_[s].data(), seg->size(), seg->kind()};
    if (options.verification == Verification::Full) {
      const uint64_t hash = xxh64(program.segment_data_[s].data, static_cast<size_t>(seg->size()));
      if (hash != seg->xxh64()) {
        return EMBER_FAIL(ctx, Error::IntegrityError, "segment %u checksum mismatch (stored %016llx, computed %016llx)",
                          s, static_cast<unsigned long long>(seg->xxh64()), static_cast<unsigned long long>(hash));
      }
    }
    if (seg->kind() == fb::SegmentKind::Debug && seg->size() > 0) {
      flatbuffers::Verifier verifier(program.segment_data_[s].data, static_cast<size_t>(seg->size()), 64, 1000000);
      if (check && !verifier.VerifyBuffer<fb::DebugInfo>(nullptr)) {
        return EMBER_FAIL(ctx, Error::InvalidProgram, "debug segment %u failed verification", s);
      }
      program.debug_ = flatbuffers::GetRoot<fb::DebugInfo>(program.segment_data_[s].data);
    }
  }

  if (check) EMBER_RETURN_IF_ERROR(validate_program(p, h, program.segments(), ctx));

  // Load-time symbols and backend priority: copied, so the app's arrays need not outlive load().
  if (ctx) ctx->phase = ErrorContext::Phase::Load;
  if (options.symbols.size() > kMaxLoadNames || options.backends.size() > kMaxLoadNames) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "LoadOptions: %zu symbols and %zu backends given (at most %zu each)",
                      options.symbols.size(), options.backends.size(), kMaxLoadNames);
  }
  for (const SymbolValue& chosen : options.symbols) {
    const fb::Symbol* found = nullptr;
    for (uint32_t k = 0; k < size_of(p.symbols()); ++k) {
      if (std::strcmp(p.symbols()->Get(k)->name()->c_str(), chosen.name) == 0) found = p.symbols()->Get(k);
    }
    if (found == nullptr) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "LoadOptions: the program has no symbol '%s'", chosen.name);
    }
    if (chosen.value < found->min() || chosen.value > found->max()) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "LoadOptions: symbol '%s' = %lld outside %lld..%lld", chosen.name,
                        static_cast<long long>(chosen.value), static_cast<long long>(found->min()),
                        static_cast<long long>(found->max()));
    }
    program.symbols_[program.symbol_count_++] = SymbolValue{found->name()->c_str(), chosen.value};
  }
  program.has_priority_ = !options.backends.empty();
  for (const char* name : options.backends) {
    for (size_t b = 0; runtime.backends != nullptr && b < runtime.backends->size(); ++b) {
      if (std::strcmp(runtime.backends->name(b), name) == 0) program.priority_[program.priority_count_++] = runtime.backends->name(b);
    }
  }
  program.options_.symbols = Span<const SymbolValue>();
  program.options_.backends = Span<const char* const>();

  // Program-level state, sized with the load-time symbol values. The total first, so a file asking
  // for more state than the app allows allocates nothing.
  const uint32_t state_count = size_of(p.states());
  const uint64_t state_limit = options.max_state_bytes != 0 ? options.max_state_bytes : (uint64_t{1} << 40);
  uint64_t state_total = 0;
  for (uint32_t s = 0; s < state_count; ++s) {
    const fb::StateDecl* decl = p.states()->Get(s);
    int64_t dims[kMaxRank];
    const uint64_t bytes = resolve_state(p, *decl, program.load_symbols(), dims);
    if (bytes > state_limit || state_total > state_limit - bytes) {
      return EMBER_FAIL(ctx, Error::OutOfMemory,
                        "program state needs more than %llu bytes (LoadOptions::max_state_bytes; at state '%s')",
                        static_cast<unsigned long long>(state_limit), decl->name()->c_str());
    }
    state_total += bytes;
  }
  if (state_count > 0) {
    program.states_ = static_cast<State*>(platform_aligned_alloc(alignof(State), state_count * sizeof(State)));
    if (!program.states_) return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating state records");
    for (uint32_t s = 0; s < state_count; ++s) new (&program.states_[s]) State();
    program.state_count_ = state_count;
    for (uint32_t s = 0; s < state_count; ++s) {
      const fb::StateDecl* decl = p.states()->Get(s);
      State& state = program.states_[s];
      state.name = decl->name()->c_str();
      state.dtype = static_cast<ScalarType>(decl->dtype());
      state.rank = static_cast<uint8_t>(size_of(decl->dims()));
      state.nbytes = resolve_state(p, *decl, program.load_symbols(), state.dims);
      if (is_sub_byte(state.dtype) && (state.rank == 0 || state.dims[state.rank - 1] % 2 != 0)) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "state '%s': sub-byte dtype needs an even innermost dim, got %lld",
                          state.name, static_cast<long long>(state.rank ? state.dims[state.rank - 1] : 0));
      }
    }
  }
  EMBER_RETURN_IF_ERROR(program.choose_backends(ctx));
  EMBER_RETURN_IF_ERROR(program.claim_states(ctx));
  return Result<Program>(std::move(program));
}

Program::Program(Program&& other) noexcept
    : header_(other.header_),
      flatbuffer_bytes_(std::move(other.flatbuffer_bytes_)),
      program_(other.program_),
      debug_(other.debug_),
      segment_buffers_(other.segment_buffers_),
      segment_data_(other.segment_data_),
      segment_count_(other.segment_count_),
      states_(other.states_),
      state_count_(other.state_count_),
      choices_(other.choices_),
      choice_begin_(other.choice_begin_),
      choice_count_(other.choice_count_),
      runtime_(other.runtime_),
      options_(other.options_),
      symbol_count_(other.symbol_count_),
      priority_count_(other.priority_count_),
      has_priority_(other.has_priority_) {
  for (size_t i = 0; i < kMaxLoadNames; ++i) {
    symbols_[i] = other.symbols_[i];
    priority_[i] = other.priority_[i];
  }
  other.choices_ = nullptr;
  other.choice_begin_ = nullptr;
  other.choice_count_ = 0;
  other.program_ = nullptr;
  other.segment_buffers_ = nullptr;
  other.segment_data_ = nullptr;
  other.segment_count_ = 0;
  other.states_ = nullptr;
  other.state_count_ = 0;
}

Program::~Program() { release(); }

void Program::release() {
  for (size_t s = 0; s < segment_count_; ++s) segment_buffers_[s].~FreeableBuffer();
  platform_aligned_free(segment_buffers_);
  platform_aligned_free(segment_data_);
  for (size_t s = 0; s < state_count_; ++s) {
    State& state = states_[s];
    if (state.backend != nullptr) {
      state.backend->destroy_state(state.buffer);
    } else if (state.data != nullptr) {
      free_host_memory(runtime_.device_allocator, host_state_request(state), state.data);
    }
  }
  platform_aligned_free(states_);
  for (size_t c = 0; c < choice_count_; ++c) choices_[c].~BackendChoice();
  platform_aligned_free(choices_);
  platform_aligned_free(choice_begin_);
  choices_ = nullptr;
  choice_begin_ = nullptr;
  choice_count_ = 0;
  segment_buffers_ = nullptr;
  segment_data_ = nullptr;
  states_ = nullptr;
  segment_count_ = state_count_ = 0;
}

size_t Program::method_count() const { return size_of(program_->methods()); }

const char* Program::method_name(size_t i) const {
  return i < method_count() ? program_->methods()->Get(static_cast<uint32_t>(i))->name()->c_str() : "";
}

const Program::State* Program::find_state(const char* name) const {
  for (size_t s = 0; s < state_count_; ++s) {
    if (std::strcmp(states_[s].name, name) == 0) return &states_[s];
  }
  return nullptr;
}

uint8_t* Program::state_data(const char* name) const {
  const State* state = find_state(name);
  return state ? state->data : nullptr;
}

Result<MethodMeta> Program::method_meta(const char* name, ErrorContext* ctx) const {
  const fb::Method* method = internal::find_method(*program_, name);
  if (method == nullptr) return EMBER_FAIL(ctx, Error::NotFound, "no method named '%s' in the program", name);
  return internal::method_meta(*this, *method);
}

}  // namespace ember
