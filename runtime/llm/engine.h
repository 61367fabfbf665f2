// Engine: runs an LLM program's `step` method (docs/DESIGN.md §6) over a Scheduler and a BlockAllocator:
// requests in, tokens out, continuous batching, with generation control (EOS ids, max new tokens,
// the context limit, cancel). Stop strings are text-level: the caller detokenizes (Tokenizer,
// StreamDecoder), matches them (StopMatcher below) and calls finish().
//
//   Engine engine;
//   EMBER_RETURN_IF_ERROR(engine.init(method, limits, num_blocks, vocab_size, eos_ids, memory, &ctx));
//   EMBER_ASSIGN_OR_RETURN(int32_t seq, engine.add(prompt_ids, config, &ctx));
//   while (engine.has_work()) {
//     EMBER_ASSIGN_OR_RETURN(Span<const TokenEvent> events, engine.step(&ctx));
//     for (const TokenEvent& e : events) ...   // one new token per sampling sequence
//   }
//
// Memory: init() takes all it needs from caller memory (memory_bytes()); step() makes no heap
// allocation. The Method must be loaded with num_blocks as its program's `num_blocks` symbol (the KV
// pool) and must outlive the Engine. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/executor/method.h"
#include "runtime/llm/block_allocator.h"
#include "runtime/llm/scheduler.h"

namespace ember::llm {

// Engine::add() refuses, with InvalidArgument naming the field and its value, every value outside
// the ranges below (NaN included): nothing is silently replaced by a default.
struct GenerationConfig {
  int32_t max_new_tokens = 128;     // >= 1; generation also ends at the context (FinishReason::Length)
  float temperature = 0.0f;         // finite, >= 0; 0: greedy
  int32_t top_k = 0;                // >= 0; 0: off
  float top_p = 1.0f;               // in (0, 1]; 1: off
  float repetition_penalty = 1.0f;  // finite, > 0; 1: off; else over the prompt and the generated tokens (HF)
  int32_t seed = 0;                 // the Philox key; draw i of the sequence uses counter i
  bool ignore_eos = false;
};

// Failed: the step's output for the request was unusable (a sampled row whose log-probability is
// not finite, i.e. its logits are NaN or infinite, or an id outside the vocabulary); the request
// ends without that token and Engine::failure() says why.
enum class FinishReason : uint8_t { None = 0, Eos = 1, Length = 2, Stop = 3, Cancelled = 4, Failed = 5 };
const char* to_string(FinishReason reason);

struct TokenEvent {
  int32_t seq = -1;
  int32_t token = 0;     // with FinishReason::Failed: the step's unusable id (not appended)
  float logprob = 0.0f;  // NaN when the step method has no `logprobs` output (has_logprobs())
  FinishReason finished = FinishReason::None;  // None: the sequence goes on
};

struct StepStats {
  int32_t prefill_tokens = 0;  // prompt (or recomputed) tokens of the last step
  int32_t decode_tokens = 0;   // tokens sampled by the last step
};

class Engine {
 public:
  // Bytes init() needs for these limits and pool size.
  static size_t memory_bytes(const SchedulerLimits& limits, int32_t num_blocks);

  // `method`: a loaded `step` method whose inputs and outputs are those of the hf_llm exporter
  // (exporter/importers/hf_llm/step_graph.h), checked by name, dtype and max dims: next_ids [S] i32
  // is required; logprobs [S] f32 is optional (the exporter emits it unless --no-logprobs) and so is
  // logits [S, vocab_size] f32 (the exporter emits it only with --emit-logits; see logits()). `limits` must fit them (max_seqs, max_tokens,
  // max_context, block_size) and num_blocks must equal the pool the method was loaded with.
  // vocab_size: the model's vocabulary (the program's LlmInfo vocab_size,
  // LlmProgramView::vocab_size), the bound of prompt ids and EOS ids. eos_ids is copied (up to 16).
  // Errors: InvalidArgument naming the mismatch (a missing input or output, a dtype, a dim, an EOS
  // id outside the vocabulary), OutOfMemory (memory too small).
  Status init(Method& method, const SchedulerLimits& limits, int32_t num_blocks, int32_t vocab_size,
              Span<const int32_t> eos_ids, Span<uint8_t> memory, ErrorContext* ctx = nullptr);

  // A new request. Errors: InvalidArgument (empty prompt, a prompt that leaves no room for one new
  // token in the context, an id outside the vocabulary, a GenerationConfig field out of its range:
  // the message names the field and the value), OutOfMemory (no request slot).
  Result<int32_t> add(Span<const int32_t> prompt, const GenerationConfig& config, ErrorContext* ctx = nullptr);
  bool has_work() const { return scheduler_.has_work(); }
  // One execute() of `step`; the events of the tokens it sampled (valid until the next step()).
  // A request whose sampled row is unusable (see FinishReason::Failed) ends with a Failed event; the
  // other rows go on. Errors: those of Method::execute, and Internal if the scheduler planned nothing
  // although requests wait (it guarantees progress: a bug).
  Result<Span<const TokenEvent>> step(ErrorContext* ctx = nullptr);
  // Why a request ended with FinishReason::Failed: InvalidProgram naming the request, the generated
  // token's index and the step's id and log-probability. Ok for any other request.
  Status failure(int32_t seq, ErrorContext* ctx = nullptr) const;

  // Stops a sequence (its blocks are freed at once); finish() marks it done with `reason` (a stop
  // string, say). Both keep its tokens readable until release().
  void cancel(int32_t seq);
  void finish(int32_t seq, FinishReason reason);
  void release(int32_t seq);
  FinishReason finish_reason(int32_t seq) const { return reasons_[seq]; }
  Span<const int32_t> tokens(int32_t seq) const { return scheduler_.tokens(seq); }
  int32_t prompt_length(int32_t seq) const { return scheduler_.prompt_length(seq); }
  const Scheduler& scheduler() const { return scheduler_; }
  const BlockAllocator& blocks() const { return blocks_; }
  const StepStats& last_step() const { return stats_; }
  // The logits [vocab] the last step computed for `seq` (before the repetition penalty); empty when
  // the sequence was not in that step, or always when the step method has no `logits` output (the
  // exporter's default; export with --emit-logits to have them). Valid until the next step().
  Span<const float> logits(int32_t seq) const;
  bool has_logits() const { return has_logits_; }
  bool has_logprobs() const { return has_logprobs_; }
  int32_t vocab_size() const { return vocab_; }

 private:
  static constexpr int kMaxEos = 16;
  Status bind(size_t input, const int64_t* dims, int rank, const void* data, size_t bytes, ErrorContext* ctx);

  Method* method_ = nullptr;
  SchedulerLimits limits_{};
  BlockAllocator blocks_;
  Scheduler scheduler_;
  int32_t vocab_ = 0;
  int32_t eos_[kMaxEos] = {};
  int32_t eos_count_ = 0;
  struct Failure {
    int32_t id = 0;
    float logprob = 0.0f;
    int32_t position = 0;  // the generated token's index
  };
  GenerationConfig* configs_ = nullptr;   // [max_requests]
  FinishReason* reasons_ = nullptr;       // [max_requests]
  Failure* failures_ = nullptr;           // [max_requests], for FinishReason::Failed
  // Per-row step inputs [max_seqs] and the history [max_seqs, max_context].
  float* temperature_ = nullptr;
  int32_t* top_k_ = nullptr;
  float* top_p_ = nullptr;
  float* penalty_ = nullptr;
  int32_t* seed_ = nullptr;
  int32_t* sample_position_ = nullptr;
  int32_t* history_ = nullptr;
  int32_t* history_len_ = nullptr;
  int32_t* row_seq_ = nullptr;            // [max_seqs]: the last step's rows
  int32_t rows_ = 0;
  TokenEvent* events_ = nullptr;          // [max_seqs]
  StepStats stats_{};
  size_t inputs_[15] = {};                // method input index of each step input (step_graph.h order)
  size_t outputs_[3] = {};                // next_ids, logprobs (when has_logprobs_), logits (when has_logits_)
  bool has_logits_ = false;
  bool has_logprobs_ = false;
};

// Finds stop strings in a growing text (the detokenized output of one sequence) without heap: call
// feed() with each new piece; it returns how many bytes of the piece may be shown (the rest may be
// the start of a stop string, or follows one) and sets matched() once a stop string is complete.
// Holds up to kMaxHold bytes back; stop strings longer than that are refused by init().
class StopMatcher {
 public:
  static constexpr size_t kMaxStops = 8, kMaxHold = 256;
  // Errors: InvalidArgument (too many, empty, or longer than kMaxHold). The strings are borrowed.
  Status init(Span<const std::string_view> stops, ErrorContext* ctx = nullptr);
  // Appends `piece`; writes the text that is now safe to show into `out` (at most piece.size() +
  // kMaxHold bytes) and returns its size. After a match, the text up to the stop string is emitted
  // and everything later is dropped.
  size_t feed(std::string_view piece, char* out);
  // The held-back text when the sequence ends without a match (to show it all).
  size_t flush(char* out);
  bool matched() const { return matched_; }

 private:
  std::string_view stops_[kMaxStops];
  size_t count_ = 0;
  char hold_[kMaxHold * 2] = {};
  size_t held_ = 0;
  bool matched_ = false;
};

}  // namespace ember::llm
