#include "runtime/llm/scheduler.h"

#include <algorithm>
#include <cstring>

#include "runtime/core/error.h"

namespace ember::llm {
namespace {

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

bool limits_ok(const SchedulerLimits& l) {
  return l.max_seqs >= 1 && l.max_tokens >= l.max_seqs && l.block_size >= 1 && l.max_context >= l.block_size &&
         l.max_context % l.block_size == 0 && l.max_requests >= 1 && l.max_requests <= (1 << 20) &&
         l.max_tokens <= (1 << 24) && l.max_context <= (1 << 24);
}

}  // namespace

size_t Scheduler::memory_bytes(const SchedulerLimits& l) {
  if (!limits_ok(l)) return 0;
  const size_t r = size_t(l.max_requests), s = size_t(l.max_seqs), t = size_t(l.max_tokens);
  const size_t blocks = size_t(l.max_context / l.block_size);
  return 8 + align8(r * sizeof(Seq)) + align8(r * size_t(l.max_context) * 4) + align8(r * blocks * 4) +
         3 * align8(t * 4) + align8(s * blocks * 4) + 3 * align8(s * 4) + align8((s + 1) * 4) + align8(s) +
         align8(r * 4);
}

Status Scheduler::init(const SchedulerLimits& l, BlockAllocator& blocks, Span<uint8_t> memory, ErrorContext* error) {
  const size_t need = memory_bytes(l);
  if (need == 0) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "scheduler limits: max_seqs %d, max_tokens %d, block_size %d, max_context %d, "
                      "max_requests %d (need 1 <= max_seqs <= max_tokens, max_context a multiple of block_size)",
                      l.max_seqs, l.max_tokens, l.block_size, l.max_context, l.max_requests);
  }
  if (memory.size() < need) {
    return EMBER_FAIL(error, Error::OutOfMemory, "scheduler needs %zu bytes, got %zu", need, memory.size());
  }
  if (blocks.block_count() < l.max_context / l.block_size) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "a pool of %d KV blocks of %d tokens cannot hold one context of %d tokens (needs %d blocks)",
                      blocks.block_count(), l.block_size, l.max_context, l.max_context / l.block_size);
  }
  limits_ = l;
  blocks_ = &blocks;
  max_blocks_ = l.max_context / l.block_size;
  uint8_t* p = memory.data();
  p += (8 - reinterpret_cast<uintptr_t>(p) % 8) % 8;
  auto take = [&p](size_t bytes) {
    uint8_t* at = p;
    p += align8(bytes);
    return at;
  };
  const size_t r = size_t(l.max_requests), s = size_t(l.max_seqs), t = size_t(l.max_tokens);
  seqs_ = reinterpret_cast<Seq*>(take(r * sizeof(Seq)));
  for (size_t i = 0; i < r; ++i) new (&seqs_[i]) Seq();
  tokens_ = reinterpret_cast<int32_t*>(take(r * size_t(l.max_context) * 4));
  tables_ = reinterpret_cast<int32_t*>(take(r * size_t(max_blocks_) * 4));
  plan_tokens_ = reinterpret_cast<int32_t*>(take(t * 4));
  plan_positions_ = reinterpret_cast<int32_t*>(take(t * 4));
  plan_slots_ = reinterpret_cast<int32_t*>(take(t * 4));
  plan_tables_ = reinterpret_cast<int32_t*>(take(s * size_t(max_blocks_) * 4));
  plan_context_ = reinterpret_cast<int32_t*>(take(s * 4));
  plan_logits_ = reinterpret_cast<int32_t*>(take(s * 4));
  plan_seq_ids_ = reinterpret_cast<int32_t*>(take(s * 4));
  plan_query_start_ = reinterpret_cast<int32_t*>(take((s + 1) * 4));
  plan_samples_ = take(s);
  order_ = reinterpret_cast<int32_t*>(take(r * 4));
  plan_.token_ids = Span<const int32_t>(plan_tokens_, t);
  plan_.positions = Span<const int32_t>(plan_positions_, t);
  plan_.slot_mapping = Span<const int32_t>(plan_slots_, t);
  plan_.block_tables = Span<const int32_t>(plan_tables_, s * size_t(max_blocks_));
  plan_.context_lens = Span<const int32_t>(plan_context_, s);
  plan_.query_start = Span<const int32_t>(plan_query_start_, s + 1);
  plan_.logits_indices = Span<const int32_t>(plan_logits_, s);
  plan_.seq_ids = Span<const int32_t>(plan_seq_ids_, s);
  plan_.samples = Span<const uint8_t>(plan_samples_, s);
  clock_ = 0;
  preemptions_ = prefix_hit_tokens_ = 0;
  return Status::ok();
}

Result<int32_t> Scheduler::add(Span<const int32_t> prompt, int32_t max_new_tokens, ErrorContext* error) {
  if (prompt.size() == 0) return EMBER_FAIL(error, Error::InvalidArgument, "empty prompt");
  if (prompt.size() >= size_t(limits_.max_context)) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "prompt of %zu tokens does not fit the context of %d tokens (at most %d leave room for one "
                      "generated token)", prompt.size(), limits_.max_context, limits_.max_context - 1);
  }
  if (max_new_tokens < 1) {
    return EMBER_FAIL(error, Error::InvalidArgument, "max_new_tokens %d must be at least 1", max_new_tokens);
  }
  for (int32_t i = 0; i < limits_.max_requests; ++i) {
    Seq& q = seqs_[i];
    if (q.state != SeqState::Free) continue;
    q = Seq();
    q.state = SeqState::Waiting;
    q.prompt_len = q.len = int32_t(prompt.size());
    q.max_new = max_new_tokens;
    q.arrival = clock_++;
    std::memcpy(tokens_ + size_t(i) * size_t(limits_.max_context), prompt.data(), prompt.size() * 4);
    return i;
  }
  return EMBER_FAIL(error, Error::OutOfMemory, "all %d request slots are in use", limits_.max_requests);
}

Span<const int32_t> Scheduler::tokens(int32_t seq) const {
  return Span<const int32_t>(tokens_ + size_t(seq) * size_t(limits_.max_context), size_t(seqs_[seq].len));
}

bool Scheduler::has_work() const {
  for (int32_t i = 0; i < limits_.max_requests; ++i) {
    if (seqs_[i].state == SeqState::Waiting || seqs_[i].state == SeqState::Running) return true;
  }
  return false;
}

void Scheduler::free_blocks(int32_t seq) {
  Seq& q = seqs_[seq];
  for (int32_t b = 0; b < q.block_count; ++b) blocks_->release(table(seq)[b]);
  q.block_count = 0;
  q.published = 0;
  q.last_hash = 0;
  q.computed = 0;
}

void Scheduler::cancel(int32_t seq) {
  Seq& q = seqs_[seq];
  if (q.state == SeqState::Free || q.state == SeqState::Finished || q.state == SeqState::Cancelled) return;
  free_blocks(seq);
  q.state = SeqState::Cancelled;
}

void Scheduler::finish(int32_t seq) {
  Seq& q = seqs_[seq];
  if (q.state != SeqState::Running && q.state != SeqState::Waiting) return;
  free_blocks(seq);
  q.state = SeqState::Finished;
}

void Scheduler::release(int32_t seq) {
  Seq& q = seqs_[seq];
  if (q.state == SeqState::Running || q.state == SeqState::Waiting) free_blocks(seq);
  q = Seq();
}

bool Scheduler::ensure_blocks(int32_t seq, int32_t tokens) {
  Seq& q = seqs_[seq];
  const int32_t need = (tokens + limits_.block_size - 1) / limits_.block_size;
  while (q.block_count < need) {
    const int32_t b = blocks_->allocate();
    if (b < 0) return false;
    table(seq)[q.block_count++] = b;
  }
  return true;
}

void Scheduler::preempt(int32_t seq) {
  free_blocks(seq);
  seqs_[seq].state = SeqState::Waiting;
  seqs_[seq].admitted = -1;
  ++preemptions_;
}

// A new (or preempted) sequence takes the published blocks that match its leading full blocks.
int32_t Scheduler::reuse_prefix(int32_t seq) {
  Seq& q = seqs_[seq];
  const int32_t bs = limits_.block_size;
  const int32_t* toks = tokens_ + size_t(seq) * size_t(limits_.max_context);
  uint64_t parent = 0;
  // Never the block holding the last known token: its logits must be computed.
  while ((q.block_count + 1) * bs <= q.len - 1) {
    const uint64_t h = BlockAllocator::chain_hash(parent, Span<const int32_t>(toks + q.block_count * bs, size_t(bs)));
    const int32_t b = blocks_->lookup(h);
    if (b < 0) break;
    table(seq)[q.block_count++] = b;
    parent = h;
  }
  q.published = q.block_count;
  q.last_hash = parent;
  q.computed = q.block_count * bs;
  return q.computed;
}

void Scheduler::publish_full_blocks(int32_t seq) {
  Seq& q = seqs_[seq];
  const int32_t bs = limits_.block_size;
  const int32_t* toks = tokens_ + size_t(seq) * size_t(limits_.max_context);
  while ((q.published + 1) * bs <= q.computed) {
    const uint64_t h =
        BlockAllocator::chain_hash(q.last_hash, Span<const int32_t>(toks + q.published * bs, size_t(bs)));
    blocks_->publish(table(seq)[q.published], h);
    q.last_hash = h;
    ++q.published;
  }
}

// The waiting sequence that arrived first becomes running when the free blocks (after its prefix
// cache hits) hold all its known tokens; its first chunk is scheduled. 0 when none waits or it does
// not fit (then it holds nothing and keeps waiting).
int32_t Scheduler::admit_waiting(int32_t budget) {
  int32_t pick = -1;
  for (int32_t i = 0; i < limits_.max_requests; ++i) {
    if (seqs_[i].state == SeqState::Waiting && (pick < 0 || seqs_[i].arrival < seqs_[pick].arrival)) pick = i;
  }
  if (pick < 0) return 0;
  Seq& q = seqs_[pick];
  const int32_t bs = limits_.block_size;
  const int32_t hits = reuse_prefix(pick);
  const int32_t missing = (q.len + bs - 1) / bs - q.block_count;
  if (missing > blocks_->free_count()) {
    free_blocks(pick);  // the prefix hits go back (still published)
    return 0;
  }
  q.state = SeqState::Running;
  q.admitted = clock_++;
  prefix_hit_tokens_ += hits;
  const int32_t n = q.len - q.computed < budget ? q.len - q.computed : budget;
  const bool fits = ensure_blocks(pick, q.computed + n);
  EMBER_DCHECK(fits);
  (void)fits;
  q.scheduled = n;
  return n;
}

StepPlan Scheduler::schedule() {
  const int32_t S = limits_.max_seqs, T = limits_.max_tokens, bs = limits_.block_size;
  int32_t rows = 0, budget = T, running = 0;
  bool preempted = false;
  for (int32_t i = 0; i < limits_.max_requests; ++i) {
    seqs_[i].scheduled = 0;
    if (seqs_[i].state == SeqState::Running) order_[running++] = i;
  }
  std::sort(order_, order_ + running, [this](int32_t a, int32_t b) { return seqs_[a].admitted < seqs_[b].admitted; });
  // (1) Running sequences by priority: a decode token, or the next prompt chunk.
  for (int32_t k = 0; k < running && rows < S && budget > 0; ++k) {
    const int32_t i = order_[k];
    Seq& q = seqs_[i];
    if (q.state != SeqState::Running) continue;  // preempted for a higher-priority sequence
    const int32_t want = q.len - q.computed < budget ? q.len - q.computed : budget;
    int32_t n = 0;
    for (;;) {
      ensure_blocks(i, q.computed + want);  // keeps the blocks it got when not all are free
      n = q.block_count * bs - q.computed;
      if (n > want) n = want;
      if (n >= 1) break;
      // Not one token fits: preempt the lowest-priority running sequence below this one. The
      // highest-priority sequence always ends here with a token: the others hold every block it
      // lacks, and it needs at most one context.
      int32_t victim = -1;
      for (int32_t j = running - 1; j > k && victim < 0; --j) {
        if (seqs_[order_[j]].state == SeqState::Running) victim = order_[j];
      }
      if (victim < 0) break;
      preempt(victim);
      preempted = true;
    }
    if (n < 1) continue;  // the lowest-priority one keeps its blocks and waits for a free one
    q.scheduled = n;
    ++rows;
    budget -= n;
  }
  // (2) Waiting sequences, first come first served, unless this step is short of blocks.
  while (!preempted && rows < S && budget > 0) {
    const int32_t n = admit_waiting(budget);
    if (n == 0) break;
    ++rows;
    budget -= n;
  }
  // (3) The plan arrays, in request-slot order.
  int32_t t = 0, row = 0;
  plan_query_start_[0] = 0;
  for (int32_t i = 0; i < limits_.max_requests && row < S; ++i) {
    Seq& q = seqs_[i];
    if (q.scheduled == 0) continue;
    const int32_t* toks = tokens_ + size_t(i) * size_t(limits_.max_context);
    for (int32_t k = 0; k < q.scheduled; ++k, ++t) {
      const int32_t pos = q.computed + k;
      plan_tokens_[t] = toks[pos];
      plan_positions_[t] = pos;
      plan_slots_[t] = table(i)[pos / limits_.block_size] * limits_.block_size + pos % limits_.block_size;
    }
    std::memcpy(plan_tables_ + size_t(row) * size_t(max_blocks_), table(i), size_t(q.block_count) * 4);
    std::memset(plan_tables_ + size_t(row) * size_t(max_blocks_) + q.block_count, 0,
                size_t(max_blocks_ - q.block_count) * 4);
    plan_context_[row] = q.computed + q.scheduled;
    plan_query_start_[row + 1] = t;
    plan_logits_[row] = t - 1;
    plan_seq_ids_[row] = i;
    plan_samples_[row] = q.computed + q.scheduled == q.len ? 1 : 0;
    ++row;
  }
  plan_.token_count = t;
  plan_.seq_count = row;
  for (; t < T; ++t) plan_tokens_[t] = plan_positions_[t] = 0, plan_slots_[t] = -1;
  for (int32_t r = row; r < S; ++r) {
    std::memset(plan_tables_ + size_t(r) * size_t(max_blocks_), 0, size_t(max_blocks_) * 4);
    plan_context_[r] = 0;
    plan_query_start_[r + 1] = plan_.token_count;
    plan_logits_[r] = 0;
    plan_seq_ids_[r] = -1;
    plan_samples_[r] = 0;
  }
  return plan_;
}

void Scheduler::commit(Span<const int32_t> next_ids) {
  for (int32_t row = 0; row < plan_.seq_count; ++row) {
    const int32_t i = plan_seq_ids_[row];
    Seq& q = seqs_[i];
    if (q.state != SeqState::Running || q.scheduled == 0) continue;  // cancelled or finished meanwhile
    q.computed += q.scheduled;
    q.scheduled = 0;
    publish_full_blocks(i);
    if (plan_samples_[row] == 0 || size_t(row) >= next_ids.size()) continue;
    tokens_[size_t(i) * size_t(limits_.max_context) + size_t(q.len)] = next_ids[row];
    ++q.len;
    if (q.len - q.prompt_len >= q.max_new || q.len >= limits_.max_context) finish(i);
  }
  plan_.seq_count = 0;
}

}  // namespace ember::llm
