#include "runtime/llm/engine.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/core/memory_allocator.h"

namespace ember::llm {
namespace {

// The step method's inputs and outputs, in step_graph.h's order.
constexpr const char* kInputs[15] = {"token_ids",   "positions",          "slot_mapping", "block_tables",
                                     "context_lens", "query_start",        "logits_indices", "temperature",
                                     "top_k",        "top_p",              "repetition_penalty", "seed",
                                     "sample_position", "history",         "history_len"};
// logits is optional: the exporter emits it only with --emit-logits.
constexpr const char* kOutputs[3] = {"next_ids", "logprobs", "logits"};
enum Output { kNextIds, kLogprobs, kLogits };
enum Input { kTokenIds, kPositions, kSlots, kTables, kLens, kStarts, kLogitsIdx, kTemperature, kTopK, kTopP,
             kPenalty, kSeed, kSamplePos, kHistory, kHistoryLen };

constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The engine's own arrays (besides the allocator's and the scheduler's memory).
size_t own_bytes(const SchedulerLimits& l) {
  const size_t s = size_t(l.max_seqs), r = size_t(l.max_requests);
  return aligned(r * sizeof(GenerationConfig)) + aligned(r * sizeof(FinishReason)) + aligned(r * 12) + 8 * aligned(s * 4) +
         aligned(s * size_t(l.max_context) * 4) + aligned(s * sizeof(TokenEvent));
}

}  // namespace

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::None: return "none";
    case FinishReason::Eos: return "eos";
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Failed: return "failed";
  }
  return "invalid";
}

size_t Engine::memory_bytes(const SchedulerLimits& limits, int32_t num_blocks) {
  return BlockAllocator::memory_bytes(num_blocks) + kAlign + Scheduler::memory_bytes(limits) + kAlign +
         own_bytes(limits) + kAlign;
}

Status Engine::init(Method& method, const SchedulerLimits& limits, int32_t num_blocks, int32_t vocab_size,
                    Span<const int32_t> eos_ids, Span<uint8_t> memory, ErrorContext* ctx) {
  const MethodMeta meta = method.meta();
  if (vocab_size < 1) return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: vocab_size %d must be >= 1", vocab_size);
  // Inputs and outputs by name, with the dtypes and max dims the limits need.
  for (size_t k = 0; k < 15; ++k) {
    bool found = false;
    for (size_t i = 0; i < meta.input_count() && !found; ++i) {
      const Result<TensorMeta> t = meta.input(i);
      if (t.is_ok() && std::strcmp(t.value().name, kInputs[k]) == 0) {
        inputs_[k] = i;
        found = true;
        const bool f32 = k == kTemperature || k == kTopP || k == kPenalty;
        if (t.value().dtype != (f32 ? ScalarType::F32 : ScalarType::I32)) {
          return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: step input '%s' is %s", kInputs[k],
                            to_string(t.value().dtype));
        }
      }
    }
    if (!found) return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: the method has no input '%s'", kInputs[k]);
  }
  // next_ids [S] i32 and, when present, logprobs [S] f32 and logits [S, vocab_size] f32; S >= max_seqs.
  has_logits_ = has_logprobs_ = false;
  for (size_t k = 0; k < 3; ++k) {
    bool found = false;
    for (size_t i = 0; i < meta.output_count() && !found; ++i) {
      const Result<TensorMeta> t = meta.output(i);
      if (!t.is_ok() || std::strcmp(t.value().name, kOutputs[k]) != 0) continue;
      outputs_[k] = i;
      found = true;
      const TensorMeta& m = t.value();
      const ScalarType dtype = k == kNextIds ? ScalarType::I32 : ScalarType::F32;
      const int rank = k == kLogits ? 2 : 1;
      if (m.dtype != dtype) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: step output '%s' is %s; expected %s", kOutputs[k],
                          to_string(m.dtype), to_string(dtype));
      }
      if (int(m.rank) != rank || m.max_dims[0] < limits.max_seqs) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "engine: step output '%s' has rank %d and up to %lld rows; expected rank %d and at least "
                          "max_seqs %d rows", kOutputs[k], int(m.rank), static_cast<long long>(m.max_dims[0]), rank,
                          limits.max_seqs);
      }
      if (k == kLogits && m.max_dims[1] != vocab_size) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "engine: step output 'logits' has %lld columns; vocab_size is %d",
                          static_cast<long long>(m.max_dims[1]), vocab_size);
      }
    }
    if (k == kLogits) {
      has_logits_ = found;
    } else if (k == kLogprobs) {
      has_logprobs_ = found;
    } else if (!found) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: the method has no output '%s'", kOutputs[k]);
    }
  }
  const TensorMeta tokens = meta.input(inputs_[kTokenIds]).value();
  const TensorMeta tables = meta.input(inputs_[kTables]).value();
  const TensorMeta history = meta.input(inputs_[kHistory]).value();
  if (limits.max_tokens > tokens.max_dims[0] || limits.max_seqs > tables.max_dims[0] ||
      limits.max_context / std::max(limits.block_size, 1) > tables.max_dims[1] || limits.max_context > history.max_dims[1]) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "engine: limits (max_tokens %d, max_seqs %d, max_context %d) exceed the step method's "
                      "(%lld, %lld, %lld)", limits.max_tokens, limits.max_seqs, limits.max_context,
                      static_cast<long long>(tokens.max_dims[0]), static_cast<long long>(tables.max_dims[0]),
                      static_cast<long long>(history.max_dims[1]));
  }
  if (eos_ids.size() > size_t(kMaxEos)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: %zu EOS ids (at most %d)", eos_ids.size(), kMaxEos);
  }
  for (size_t i = 0; i < eos_ids.size(); ++i) {
    if (eos_ids[i] < 0 || eos_ids[i] >= vocab_size) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: EOS id %d is outside [0, vocab_size %d)", eos_ids[i],
                        vocab_size);
    }
  }
  if (memory.size() < memory_bytes(limits, num_blocks)) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "engine: memory of %zu bytes, %zu needed", memory.size(),
                      memory_bytes(limits, num_blocks));
  }
  static_assert(sizeof(Failure) == 12, "own_bytes() counts 12 bytes per request");
  BumpAllocator alloc(memory);
  const size_t block_bytes = BlockAllocator::memory_bytes(num_blocks);
  uint8_t* block_mem = static_cast<uint8_t*>(alloc.allocate(block_bytes, kAlign));
  EMBER_RETURN_IF_ERROR(blocks_.init(num_blocks, Span<uint8_t>(block_mem, block_bytes), ctx));
  const size_t sched_bytes = Scheduler::memory_bytes(limits);
  uint8_t* sched_mem = static_cast<uint8_t*>(alloc.allocate(sched_bytes, kAlign));
  EMBER_RETURN_IF_ERROR(scheduler_.init(limits, blocks_, Span<uint8_t>(sched_mem, sched_bytes), ctx));
  limits_ = limits;
  const size_t s = size_t(limits.max_seqs), r = size_t(limits.max_requests);
  configs_ = static_cast<GenerationConfig*>(alloc.allocate(r * sizeof(GenerationConfig), kAlign));
  reasons_ = static_cast<FinishReason*>(alloc.allocate(r * sizeof(FinishReason), kAlign));
  failures_ = static_cast<Failure*>(alloc.allocate(r * sizeof(Failure), kAlign));
  temperature_ = static_cast<float*>(alloc.allocate(s * 4, kAlign));
  top_k_ = static_cast<int32_t*>(alloc.allocate(s * 4, kAlign));
  top_p_ = static_cast<float*>(alloc.allocate(s * 4, kAlign));
  penalty_ = static_cast<float*>(alloc.allocate(s * 4, kAlign));
  seed_ = static_cast<int32_t*>(alloc.allocate(s * 4, kAlign));
  sample_position_ = static_cast<int32_t*>(alloc.allocate(s * 4, kAlign));
  history_len_ = static_cast<int32_t*>(alloc.allocate(s * 4, kAlign));
  row_seq_ = static_cast<int32_t*>(alloc.allocate(s * 4, kAlign));
  history_ = static_cast<int32_t*>(alloc.allocate(s * size_t(limits.max_context) * 4, kAlign));
  events_ = static_cast<TokenEvent*>(alloc.allocate(s * sizeof(TokenEvent), kAlign));
  if (events_ == nullptr) return EMBER_FAIL(ctx, Error::Internal, "engine: memory_bytes() is too small");
  for (size_t i = 0; i < r; ++i) {
    configs_[i] = GenerationConfig();
    reasons_[i] = FinishReason::None;
    failures_[i] = Failure();
  }
  for (size_t i = 0; i < eos_ids.size(); ++i) eos_[i] = eos_ids[i];
  eos_count_ = static_cast<int32_t>(eos_ids.size());
  vocab_ = vocab_size;
  method_ = &method;
  rows_ = 0;
  return Status::ok();
}

Result<int32_t> Engine::add(Span<const int32_t> prompt, const GenerationConfig& config, ErrorContext* ctx) {
  if (method_ == nullptr) return EMBER_FAIL(ctx, Error::InvalidState, "engine: add() before init()");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: prompt token %d at index %zu is outside [0, %d)",
                        prompt[i], i, vocab_);
    }
  }
  if (config.max_new_tokens < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: max_new_tokens %d must be >= 1", config.max_new_tokens);
  }
  // Written so that NaN fails every check.
  if (!(config.temperature >= 0.0f && std::isfinite(config.temperature))) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: temperature %g must be finite and >= 0 (0: greedy)",
                      static_cast<double>(config.temperature));
  }
  if (config.top_k < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: top_k %d must be >= 0 (0: off)", config.top_k);
  }
  if (!(config.top_p > 0.0f && config.top_p <= 1.0f)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: top_p %g must be in (0, 1] (1: off)",
                      static_cast<double>(config.top_p));
  }
  if (!(config.repetition_penalty > 0.0f && std::isfinite(config.repetition_penalty))) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "engine: repetition_penalty %g must be finite and > 0 (1: off)",
                      static_cast<double>(config.repetition_penalty));
  }
  if (prompt.size() + 1 > size_t(limits_.max_context)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "engine: the prompt has %zu tokens; the context holds %d (prompt + at least one new token)",
                      prompt.size(), limits_.max_context);
  }
  EMBER_ASSIGN_OR_RETURN(int32_t seq, scheduler_.add(prompt, config.max_new_tokens, ctx));
  configs_[seq] = config;
  reasons_[seq] = FinishReason::None;
  failures_[seq] = Failure();
  return seq;
}

Status Engine::bind(size_t input, const int64_t* dims, int rank, const void* data, size_t bytes, ErrorContext* ctx) {
  const size_t i = inputs_[input];
  EMBER_RETURN_IF_ERROR(method_->set_input_sizes(i, Span<const int64_t>(dims, size_t(rank)), ctx));
  EMBER_ASSIGN_OR_RETURN(TensorView view, method_->input(i));
  if (bytes > 0) std::memcpy(view.data, data, bytes);
  return Status::ok();
}

Result<Span<const TokenEvent>> Engine::step(ErrorContext* ctx) {
  if (method_ == nullptr) return EMBER_FAIL(ctx, Error::InvalidState, "engine: step() before init()");
  stats_ = StepStats();
  rows_ = 0;
  if (!scheduler_.has_work()) return Span<const TokenEvent>();
  const StepPlan plan = scheduler_.schedule();
  const int64_t T = plan.token_count, S = plan.seq_count;
  if (T == 0 || S == 0) {  // the scheduler guarantees progress with a pool of one context
    return EMBER_FAIL(ctx, Error::Internal, "engine: the scheduler planned nothing although requests wait");
  }
  const int64_t max_blocks = scheduler_.max_blocks_per_seq();
  int64_t width = 1;
  for (int64_t r = 0; r < S; ++r) {
    const int32_t seq = plan.seq_ids[size_t(r)];
    row_seq_[r] = seq;
    const GenerationConfig& c = configs_[seq];
    temperature_[r] = c.temperature;
    top_k_[r] = c.top_k;
    top_p_[r] = c.top_p;
    penalty_[r] = c.repetition_penalty;
    seed_[r] = c.seed;
    sample_position_[r] = scheduler_.generated(seq);
    // The penalty's history: every token known before this step's sample (HF: input_ids).
    history_len_[r] = c.repetition_penalty == 1.0f ? 0 : plan.context_lens[size_t(r)];
    if (history_len_[r] > width) width = history_len_[r];
  }
  for (int64_t r = 0; r < S; ++r) {
    const Span<const int32_t> known = scheduler_.tokens(row_seq_[r]);
    for (int64_t j = 0; j < history_len_[r]; ++j) history_[r * width + j] = known[size_t(j)];
  }
  const int64_t t_dims[1] = {T}, s_dims[1] = {S}, s1_dims[1] = {S + 1};
  const int64_t tables_dims[2] = {S, max_blocks}, history_dims[2] = {S, width};
  EMBER_RETURN_IF_ERROR(bind(kTokenIds, t_dims, 1, plan.token_ids.data(), size_t(T) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kPositions, t_dims, 1, plan.positions.data(), size_t(T) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kSlots, t_dims, 1, plan.slot_mapping.data(), size_t(T) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kTables, tables_dims, 2, plan.block_tables.data(), size_t(S * max_blocks) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kLens, s_dims, 1, plan.context_lens.data(), size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kStarts, s1_dims, 1, plan.query_start.data(), size_t(S + 1) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kLogitsIdx, s_dims, 1, plan.logits_indices.data(), size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kTemperature, s_dims, 1, temperature_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kTopK, s_dims, 1, top_k_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kTopP, s_dims, 1, top_p_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kPenalty, s_dims, 1, penalty_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kSeed, s_dims, 1, seed_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kSamplePos, s_dims, 1, sample_position_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kHistory, history_dims, 2, history_, size_t(S * width) * 4, ctx));
  EMBER_RETURN_IF_ERROR(bind(kHistoryLen, s_dims, 1, history_len_, size_t(S) * 4, ctx));
  EMBER_RETURN_IF_ERROR(method_->execute(ctx));
  rows_ = static_cast<int32_t>(S);

  const int32_t* next = method_->output(outputs_[kNextIds])->data_as<const int32_t>();
  const float* logprobs = has_logprobs_ ? method_->output(outputs_[kLogprobs])->data_as<const float>() : nullptr;
  // A sampled row is unusable when its id is outside the vocabulary or its log-probability is not
  // finite: the sample op gives +Inf or NaN there exactly when the row's logits have no finite
  // maximum (all NaN, or an infinity), so a NaN model cannot pass as token 0. The request ends
  // before commit() could append the id. (Without a `logprobs` output only the id is checked.)
  for (int64_t r = 0; r < S; ++r) {
    if (!plan.samples[size_t(r)]) continue;
    const float lp = logprobs != nullptr ? logprobs[r] : 0.0f;
    if (next[r] >= 0 && next[r] < vocab_ && std::isfinite(lp)) continue;
    const int32_t seq = row_seq_[r];
    failures_[seq] = Failure{next[r], lp, sample_position_[r]};
    reasons_[seq] = FinishReason::Failed;
    scheduler_.finish(seq);
  }
  // Padding rows of the plan (beyond S) are ignored by commit; give it the live rows' ids.
  scheduler_.commit(Span<const int32_t>(next, size_t(S)));
  int32_t count = 0;
  for (int64_t r = 0; r < S; ++r) {
    const int32_t q_len = plan.query_start[size_t(r) + 1] - plan.query_start[size_t(r)];
    if (!plan.samples[size_t(r)]) {
      stats_.prefill_tokens += q_len;
      continue;
    }
    const int32_t seq = row_seq_[r];
    if (q_len == 1 && sample_position_[r] > 0) {
      stats_.decode_tokens += 1;  // a generated token fed back
    } else {
      stats_.prefill_tokens += q_len;
    }
    TokenEvent& e = events_[count++];
    e.seq = seq;
    e.token = next[r];
    e.logprob = logprobs != nullptr ? logprobs[r] : std::numeric_limits<float>::quiet_NaN();
    e.finished = FinishReason::None;
    if (reasons_[seq] == FinishReason::Failed) {
      e.finished = FinishReason::Failed;
      continue;
    }
    bool eos = false;
    for (int32_t i = 0; i < eos_count_ && !configs_[seq].ignore_eos; ++i) eos = eos || next[r] == eos_[i];
    if (eos) {
      if (scheduler_.state(seq) == SeqState::Running) scheduler_.finish(seq);
      e.finished = reasons_[seq] = FinishReason::Eos;
    } else if (scheduler_.state(seq) == SeqState::Finished) {
      e.finished = reasons_[seq] = FinishReason::Length;
    }
  }
  return Span<const TokenEvent>(events_, size_t(count));
}

Status Engine::failure(int32_t seq, ErrorContext* ctx) const {
  if (reasons_ == nullptr || seq < 0 || seq >= limits_.max_requests || reasons_[seq] != FinishReason::Failed) {
    return Status::ok();
  }
  const Failure& f = failures_[seq];
  if (f.id < 0 || f.id >= vocab_) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "engine: request %d: the step returned id %d for generated token %d, outside [0, vocab_size %d)",
                      seq, f.id, f.position, vocab_);
  }
  return EMBER_FAIL(ctx, Error::InvalidProgram,
                    "engine: request %d: generated token %d has log-probability %g: the step's logits are not finite "
                    "(NaN or Inf in the weights or activations)",
                    seq, f.position, static_cast<double>(f.logprob));
}

Span<const float> Engine::logits(int32_t seq) const {
  if (!has_logits_) return Span<const float>();
  for (int32_t r = 0; r < rows_; ++r) {
    if (row_seq_[r] == seq) {
      const float* base = method_->output(outputs_[kLogits])->data_as<const float>();
      return Span<const float>(base + size_t(r) * size_t(vocab_), size_t(vocab_));
    }
  }
  return Span<const float>();
}

void Engine::cancel(int32_t seq) {
  scheduler_.cancel(seq);
  reasons_[seq] = FinishReason::Cancelled;
}

void Engine::finish(int32_t seq, FinishReason reason) {
  if (scheduler_.state(seq) == SeqState::Running || scheduler_.state(seq) == SeqState::Waiting) {
    scheduler_.finish(seq);
  }
  reasons_[seq] = reason;
}

void Engine::release(int32_t seq) { scheduler_.release(seq); }

// ---- StopMatcher ----------------------------------------------------------------------------------

Status StopMatcher::init(Span<const std::string_view> stops, ErrorContext* ctx) {
  if (stops.size() > kMaxStops) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "stop strings: %zu given, at most %zu", stops.size(), kMaxStops);
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty() || stops[i].size() > kMaxHold) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "stop string %zu has %zu bytes (1..%zu)", i, stops[i].size(),
                        kMaxHold);
    }
    stops_[i] = stops[i];
  }
  count_ = stops.size();
  held_ = 0;
  matched_ = false;
  return Status::ok();
}

size_t StopMatcher::feed(std::string_view piece, char* out) {
  size_t written = 0;
  for (char ch : piece) {
    if (matched_) break;
    hold_[held_++] = ch;
    // A complete stop string at the end of the held text: emit what precedes it, stop.
    for (size_t s = 0; s < count_; ++s) {
      const std::string_view stop = stops_[s];
      if (held_ >= stop.size() && std::memcmp(hold_ + held_ - stop.size(), stop.data(), stop.size()) == 0) {
        std::memcpy(out + written, hold_, held_ - stop.size());
        written += held_ - stop.size();
        held_ = 0;
        matched_ = true;
        break;
      }
    }
    if (matched_) break;
    // Keep the longest held suffix that is a prefix of some stop string; emit the rest.
    size_t keep = 0;
    for (size_t s = 0; s < count_; ++s) {
      const std::string_view stop = stops_[s];
      for (size_t len = std::min(held_, stop.size() - 1); len > keep; --len) {
        if (std::memcmp(hold_ + held_ - len, stop.data(), len) == 0) {
          keep = len;
          break;
        }
      }
    }
    const size_t emit = held_ - keep;
    std::memcpy(out + written, hold_, emit);
    written += emit;
    std::memmove(hold_, hold_ + emit, keep);
    held_ = keep;
  }
  return written;
}

size_t StopMatcher::flush(char* out) {
  const size_t n = matched_ ? 0 : held_;
  std::memcpy(out, hold_, n);
  held_ = 0;
  return n;
}

}  // namespace ember::llm
