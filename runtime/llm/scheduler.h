// Continuous batching for the `step` method (docs/DESIGN.md §6): which sequences run in the next step, with
// how many tokens each, and the step's int32 metadata. Owns each sequence's tokens and block table;
// the KV blocks come from a BlockAllocator.
//
//   Scheduler sched;
//   EMBER_RETURN_IF_ERROR(sched.init(limits, blocks, memory, &ctx));   // memory_bytes(limits)
//   EMBER_ASSIGN_OR_RETURN(int32_t seq, sched.add(prompt_ids, max_new_tokens, &ctx));
//   while (sched.has_work()) {
//     StepPlan plan = sched.schedule();      // fills the step inputs (views into the scheduler)
//     ... run `step` with plan's arrays, read next_ids[S] ...
//     sched.commit(next_ids);                // appends sampled tokens, finishes / publishes blocks
//   }
//
// Policy, per step. Priority is admission order: the sequence admitted first comes first.
//  (1) Running sequences, in priority order, each get one decode token or their next prompt chunk
//      (chunked prefill: as many tokens as the step's budget allows). When the blocks for it are
//      not free, a prompt chunk shrinks to what the free blocks hold; when not even one token fits,
//      the lowest-priority running sequence (the most recently admitted) is preempted: its blocks go
//      back to the pool, its tokens are kept, and it waits to be recomputed later (prompt +
//      generated so far). A sequence never preempts one admitted before it.
//  (2) With token budget and sequence rows left and no preemption in this step, waiting sequences
//      (new or preempted) are admitted in arrival order while the free blocks hold everything they
//      know (prompt + generated); the first that does not fit stops admission (first come, first
//      served). An admitted sequence first looks its leading full blocks up in the prefix cache
//      (BlockAllocator::lookup) and skips computing the ones found (never the block holding the
//      last token: its logits are needed). Full blocks are published after the step that computed
//      them.
// Forward progress: the pool holds at least one context (init), waiting sequences hold no blocks,
// and the highest-priority running sequence can take every block the others hold, so every
// schedule() with waiting or running work plans at least one token (and only the highest-priority
// sequence is never preempted, so every request ends). A prompt that cannot fit the context is
// refused by add().
//
// Padding (docs/DESIGN.md §6): the plan is always [max_tokens] tokens and [max_seqs] rows; token rows past
// the scheduled ones have slot -1 and position 0, sequence rows past the live ones have query length
// 0, context length 0 and an all-zero block table row. No heap: init takes caller memory. Not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/llm/block_allocator.h"

namespace ember::llm {

struct SchedulerLimits {
  int32_t max_seqs = 0;             // S: sequence rows per step
  int32_t max_tokens = 0;           // T: token rows per step (>= max_seqs)
  int32_t block_size = 0;           // tokens per KV block
  int32_t max_context = 0;          // tokens per sequence (prompt + generated); a multiple of block_size
  int32_t max_requests = 0;         // sequences held at once, waiting or running
};

enum class SeqState : uint8_t { Free, Waiting, Running, Finished, Cancelled };

// One step's inputs, pointing into the scheduler (valid until the next schedule / commit).
struct StepPlan {
  int32_t token_count = 0;          // scheduled token rows (the rest are padding)
  int32_t seq_count = 0;            // live sequence rows (the rest are padding)
  Span<const int32_t> token_ids;    // [T]
  Span<const int32_t> positions;    // [T]
  Span<const int32_t> slot_mapping; // [T], -1 = padding
  Span<const int32_t> block_tables; // [S, max_blocks]
  Span<const int32_t> context_lens; // [S], after this step's writes
  Span<const int32_t> query_start;  // [S + 1]
  Span<const int32_t> logits_indices;  // [S]: the row of each sequence's last scheduled token
  Span<const int32_t> seq_ids;      // [S]: which sequence each row is (-1 = padding)
  Span<const uint8_t> samples;      // [S]: 1 when this step reaches the end of the row's known tokens
                                    // (its next_ids entry is a new token), 0 mid-prompt
};

class Scheduler {
 public:
  static size_t memory_bytes(const SchedulerLimits& limits);

  // `blocks` must hold at least one full context (max_context / block_size blocks): with fewer, a
  // long sequence could never run (InvalidArgument naming both counts).
  Status init(const SchedulerLimits& limits, BlockAllocator& blocks, Span<uint8_t> memory,
              ErrorContext* error = nullptr);

  // A new sequence with `prompt` (copied) that may generate up to max_new_tokens tokens (it also
  // ends when it reaches max_context tokens). Errors: an empty prompt, a prompt of max_context
  // tokens or more (it leaves no room for a generated token; InvalidArgument naming both lengths),
  // max_new_tokens < 1 (InvalidArgument), no free request slot (OutOfMemory).
  Result<int32_t> add(Span<const int32_t> prompt, int32_t max_new_tokens, ErrorContext* error = nullptr);
  // Stops a sequence now: its blocks are released; its tokens stay readable until release().
  void cancel(int32_t seq);
  // Frees a finished or cancelled sequence's slot.
  void release(int32_t seq);
  // Marks a running sequence finished (e.g. an EOS token or a stop string the caller detected).
  void finish(int32_t seq);

  bool has_work() const;
  // The next step's plan. Plans at least one token whenever has_work() (see the policy above).
  StepPlan schedule();
  // next_ids[row] for the plan's rows (padding rows ignored); sequences whose plan row sampled get
  // the token appended, and finish when they reach max_new_tokens or max_context.
  void commit(Span<const int32_t> next_ids);

  SeqState state(int32_t seq) const { return seqs_[seq].state; }
  // The sequence's tokens: prompt then generated.
  Span<const int32_t> tokens(int32_t seq) const;
  int32_t prompt_length(int32_t seq) const { return seqs_[seq].prompt_len; }
  // The KV blocks the sequence holds now (running: those of its computed and scheduled tokens; empty
  // when waiting or ended). Valid until the next schedule(), cancel(), finish() or release().
  Span<const int32_t> block_table(int32_t seq) const {
    return Span<const int32_t>(tables_ + size_t(seq) * size_t(max_blocks_), size_t(seqs_[seq].block_count));
  }
  // Tokens whose K/V are in the cache (running sequences; 0 otherwise).
  int32_t computed(int32_t seq) const { return seqs_[seq].computed; }
  int32_t generated(int32_t seq) const { return seqs_[seq].len - seqs_[seq].prompt_len; }
  int32_t preemptions() const { return preemptions_; }
  int32_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  int32_t max_blocks_per_seq() const { return max_blocks_; }

 private:
  struct Seq {
    SeqState state = SeqState::Free;
    int32_t prompt_len = 0, len = 0;     // tokens known
    int32_t computed = 0;                // tokens whose K/V are in the cache
    int32_t scheduled = 0;               // tokens in the current plan
    int32_t block_count = 0;
    int32_t published = 0;               // leading blocks published
    int32_t max_new = 0;
    int64_t admitted = -1;               // admission order (preemption picks the latest)
    int64_t arrival = 0;
    uint64_t last_hash = 0;              // chain hash of the last published block
  };
  bool ensure_blocks(int32_t seq, int32_t tokens);  // blocks for positions [0, tokens)
  void free_blocks(int32_t seq);
  void preempt(int32_t seq);
  int32_t reuse_prefix(int32_t seq);  // returns the tokens found in the prefix cache
  int32_t admit_waiting(int32_t budget);  // phase (2) for one sequence; its tokens, 0 when none fits
  void publish_full_blocks(int32_t seq);
  int32_t* table(int32_t seq) { return tables_ + size_t(seq) * size_t(max_blocks_); }

  SchedulerLimits limits_{};
  BlockAllocator* blocks_ = nullptr;
  int32_t max_blocks_ = 0;
  Seq* seqs_ = nullptr;
  int32_t* tokens_ = nullptr;          // [max_requests, max_context]
  int32_t* tables_ = nullptr;          // [max_requests, max_blocks]
  int32_t* plan_tokens_ = nullptr;     // the plan arrays
  int32_t* plan_positions_ = nullptr;
  int32_t* plan_slots_ = nullptr;
  int32_t* plan_tables_ = nullptr;
  int32_t* plan_context_ = nullptr;
  int32_t* plan_query_start_ = nullptr;
  int32_t* plan_logits_ = nullptr;
  int32_t* plan_seq_ids_ = nullptr;
  uint8_t* plan_samples_ = nullptr;
  int32_t* order_ = nullptr;           // [max_requests]: running sequences by priority (schedule())
  StepPlan plan_{};
  int64_t clock_ = 0;
  int32_t preemptions_ = 0;
  int32_t prefix_hit_tokens_ = 0;
};

}  // namespace ember::llm
