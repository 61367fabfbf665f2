#include "runtime/llm/scheduler.h"

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
         3 * align8(t * 4) + align8(s * blocks * 4) + 3 * align8(s * 4) + align8((s + 1) * 4) + align8(s);
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
  seqs_[seq].preempted_in = round_;
  ++preemptions_;
}

// A new (or preempted) sequence takes the published blocks that match its leading full blocks.
void Scheduler::reuse_prefix(int32_t seq) {
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
  prefix_hit_tokens_ += q.computed;
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

StepPlan Scheduler::schedule() {
  ++round_;
  const int32_t S = limits_.max_seqs, T = limits_.max_tokens;
  int32_t rows = 0, budget = T;
  for (int32_t i = 0; i < limits_.max_requests; ++i) seqs_[i].scheduled = 0;
  // (1) Decodes: running sequences whose known tokens are all computed but the last.
  for (int32_t i = 0; i < limits_.max_requests; ++i) {
    Seq& q = seqs_[i];
    if (q.state != SeqState::Running || q.computed != q.len - 1) continue;
    if (rows == S || budget == 0) break;
    while (!ensure_blocks(i, q.len)) {
      // Preempt the latest admitted running sequence (possibly this one).
      int32_t victim = -1;
      for (int32_t j = 0; j < limits_.max_requests; ++j) {
        if (seqs_[j].state == SeqState::Running && seqs_[j].block_count > 0 &&
            (victim < 0 || seqs_[j].admitted > seqs_[victim].admitted)) {
          victim = j;
        }
      }
      if (victim < 0) break;
      if (seqs_[victim].scheduled > 0) {  // already in this plan: take it back out
        budget += seqs_[victim].scheduled;
        --rows;
        seqs_[victim].scheduled = 0;
      }
      preempt(victim);
      if (victim == i) break;
    }
    if (q.state != SeqState::Running || q.block_count * limits_.block_size < q.len) continue;
    q.scheduled = 1;
    ++rows;
    --budget;
  }
  // (2) Prompts (new, preempted, or mid-prefill), oldest first.
  while (rows < S && budget > 0) {
    int32_t pick = -1;
    for (int32_t i = 0; i < limits_.max_requests; ++i) {
      const Seq& q = seqs_[i];
      const bool prefill = (q.state == SeqState::Waiting) || (q.state == SeqState::Running && q.computed < q.len - 1);
      if (!prefill || q.scheduled > 0 || q.preempted_in == round_) continue;
      if (pick < 0 || q.arrival < seqs_[pick].arrival) pick = i;
    }
    if (pick < 0) break;
    Seq& q = seqs_[pick];
    if (q.state == SeqState::Waiting) {
      reuse_prefix(pick);
      q.state = SeqState::Running;
      q.admitted = clock_++;
    }
    const int32_t want = q.len - q.computed;
    int32_t n = want < budget ? want : budget;
    // As many tokens as blocks allow.
    while (n > 0 && !ensure_blocks(pick, q.computed + n)) n = (q.block_count * limits_.block_size) - q.computed;
    if (n <= 0) {
      // Not one token fits: preempt the latest admitted other sequence holding blocks and retry;
      // with none left, this one waits (keeping nothing).
      int32_t victim = -1;
      for (int32_t j = 0; j < limits_.max_requests; ++j) {
        if (j != pick && seqs_[j].state == SeqState::Running && seqs_[j].block_count > 0 &&
            (victim < 0 || seqs_[j].admitted > seqs_[victim].admitted)) {
          victim = j;
        }
      }
      if (victim >= 0) {
        if (seqs_[victim].scheduled > 0) {
          budget += seqs_[victim].scheduled;
          --rows;
          seqs_[victim].scheduled = 0;
        }
        preempt(victim);
        continue;
      }
      preempt(pick);
      --preemptions_;  // not a preemption: it never ran
      break;
    }
    q.scheduled = n;
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
