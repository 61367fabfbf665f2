#include "runtime/executor/program.h"

#include <cstring>
#include <new>

#include "runtime/core/hash.h"
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

}  // namespace

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

  // Program-level state, sized with the load-time symbol values.
  if (ctx) ctx->phase = ErrorContext::Phase::Load;
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
  }
  const uint32_t state_count = size_of(p.states());
  // The total first, so a file asking for more state than the app allows allocates nothing.
  const uint64_t state_limit = options.max_state_bytes != 0 ? options.max_state_bytes : (uint64_t{1} << 40);
  uint64_t state_total = 0;
  for (uint32_t s = 0; s < state_count; ++s) {
    const fb::StateDecl* decl = p.states()->Get(s);
    int64_t dims[kMaxRank];
    const uint64_t bytes = resolve_state(p, *decl, options.symbols, dims);
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
      state.nbytes = resolve_state(p, *decl, options.symbols, state.dims);
      const uint32_t rank = size_of(decl->dims());
      if (is_sub_byte(static_cast<ScalarType>(decl->dtype())) && (rank == 0 || state.dims[rank - 1] % 2 != 0)) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "state '%s': sub-byte dtype needs an even innermost dim, got %lld",
                          state.name, static_cast<long long>(rank ? state.dims[rank - 1] : 0));
      }
      state.data = state.nbytes > state_limit
                       ? nullptr
                       : static_cast<uint8_t*>(platform_aligned_alloc(64, static_cast<size_t>(state.nbytes)));
      if (state.data == nullptr) {
        return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating state '%s' (%llu bytes)", state.name,
                          static_cast<unsigned long long>(state.nbytes));
      }
      std::memset(state.data, 0, static_cast<size_t>(state.nbytes));
    }
  }
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
      runtime_(other.runtime_),
      options_(other.options_) {
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
  for (size_t s = 0; s < state_count_; ++s) platform_aligned_free(states_[s].data);
  platform_aligned_free(states_);
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
