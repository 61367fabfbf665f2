// runtime/llm/scheduler: the step plan's arrays (docs/DESIGN.md §6 padding rules), chunked prefill, prefix
// reuse, preemption by recompute, cancel, errors; and a simulation that runs plans against a
// paged "KV cache" of token ids, checks every sequence reads back exactly its own history through
// its block table, and compares the generated tokens with an unpaged run.
#include "runtime/llm/scheduler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace ember::llm {
namespace {

struct Rig {
  std::vector<uint8_t> block_memory, memory;
  BlockAllocator blocks;
  Scheduler sched;
  Rig(const SchedulerLimits& l, int32_t num_blocks) {
    block_memory.resize(BlockAllocator::memory_bytes(num_blocks));
    EXPECT_TRUE(blocks.init(num_blocks, Span<uint8_t>(block_memory.data(), block_memory.size())).is_ok());
    memory.resize(Scheduler::memory_bytes(l));
    EXPECT_TRUE(sched.init(l, blocks, Span<uint8_t>(memory.data(), memory.size())).is_ok());
  }
};

std::vector<int32_t> Range(int32_t begin, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n), 0);
  for (int32_t i = 0; i < n; ++i) v[size_t(i)] = begin + i;
  return v;
}

Span<const int32_t> SpanOf(const std::vector<int32_t>& v) { return Span<const int32_t>(v.data(), v.size()); }

TEST(SchedulerTest, ChunkedPrefillThenDecodeWithPadding) {
  const SchedulerLimits l{/*max_seqs=*/2, /*max_tokens=*/8, /*block_size=*/4, /*max_context=*/32, /*max_requests=*/4};
  Rig s(l, 8);
  const std::vector<int32_t> prompt = Range(100, 10);
  auto seq = s.sched.add(SpanOf(prompt), 3);
  ASSERT_TRUE(seq.is_ok());
  StepPlan p = s.sched.schedule();
  EXPECT_EQ(p.token_count, 8);
  EXPECT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.samples[0], 0);  // mid-prompt
  for (int32_t t = 0; t < 8; ++t) {
    EXPECT_EQ(p.token_ids[t], 100 + t);
    EXPECT_EQ(p.positions[t], t);
    const int32_t block = p.block_tables[size_t(t / 4)];
    EXPECT_EQ(p.slot_mapping[t], block * 4 + t % 4);
  }
  EXPECT_EQ(p.context_lens[0], 8);
  EXPECT_EQ(p.query_start[0], 0);
  EXPECT_EQ(p.query_start[1], 8);
  EXPECT_EQ(p.query_start[2], 8);  // padding row: query length 0
  EXPECT_EQ(p.context_lens[1], 0);
  EXPECT_EQ(p.seq_ids[1], -1);
  EXPECT_EQ(p.logits_indices[0], 7);
  const int32_t ids[2] = {999, 0};
  s.sched.commit(Span<const int32_t>(ids, 2));
  EXPECT_EQ(s.sched.generated(*seq), 0);  // mid-prompt rows do not sample
  p = s.sched.schedule();
  EXPECT_EQ(p.token_count, 2);
  EXPECT_EQ(p.samples[0], 1);
  EXPECT_EQ(p.positions[0], 8);
  EXPECT_EQ(p.slot_mapping[2], -1);  // padding tokens
  EXPECT_EQ(p.context_lens[0], 10);
  const int32_t next[2] = {7, 0};
  s.sched.commit(Span<const int32_t>(next, 2));
  EXPECT_EQ(s.sched.generated(*seq), 1);
  p = s.sched.schedule();  // a decode: the new token at position 10
  EXPECT_EQ(p.token_count, 1);
  EXPECT_EQ(p.token_ids[0], 7);
  EXPECT_EQ(p.positions[0], 10);
  EXPECT_EQ(p.context_lens[0], 11);
  s.sched.commit(Span<const int32_t>(next, 2));
  p = s.sched.schedule();
  s.sched.commit(Span<const int32_t>(next, 2));
  EXPECT_EQ(s.sched.state(*seq), SeqState::Finished);  // max_new_tokens = 3
  EXPECT_FALSE(s.sched.has_work());
  EXPECT_EQ(s.blocks.free_count(), 8);
  EXPECT_EQ(s.sched.tokens(*seq).size(), 13u);
}

TEST(SchedulerTest, RefusesBadRequests) {
  const SchedulerLimits l{2, 8, 4, 16, 1};
  Rig s(l, 4);
  ErrorContext error;
  const std::vector<int32_t> longp = Range(0, 16), ok = Range(0, 15);
  EXPECT_EQ(s.sched.add(SpanOf(longp), 1, &error).status().code(), Error::InvalidArgument);
  EXPECT_STREQ(error.message,
               "prompt of 16 tokens does not fit the context of 16 tokens (at most 15 leave room for one generated "
               "token)");
  EXPECT_EQ(s.sched.add(Span<const int32_t>(), 1).status().code(), Error::InvalidArgument);
  EXPECT_EQ(s.sched.add(SpanOf(ok), 0).status().code(), Error::InvalidArgument);
  ASSERT_TRUE(s.sched.add(SpanOf(ok), 1).is_ok());
  EXPECT_EQ(s.sched.add(SpanOf(ok), 1).status().code(), Error::OutOfMemory);  // one request slot
  // A pool smaller than one context, and inconsistent limits.
  std::vector<uint8_t> bm(BlockAllocator::memory_bytes(3)), m(Scheduler::memory_bytes(l));
  BlockAllocator small;
  ASSERT_TRUE(small.init(3, Span<uint8_t>(bm.data(), bm.size())).is_ok());
  Scheduler sched;
  ErrorContext init_error;
  EXPECT_EQ(sched.init(l, small, Span<uint8_t>(m.data(), m.size()), &init_error).code(), Error::InvalidArgument);
  EXPECT_STREQ(init_error.message,
               "a pool of 3 KV blocks of 4 tokens cannot hold one context of 16 tokens (needs 4 blocks)");
  EXPECT_EQ(Scheduler::memory_bytes(SchedulerLimits{4, 2, 4, 16, 1}), 0u);  // max_tokens < max_seqs
  EXPECT_EQ(Scheduler::memory_bytes(SchedulerLimits{1, 2, 4, 18, 1}), 0u);  // context not whole blocks
}

// Plans run against a paged cache of token ids: every step writes its tokens at their slots, then
// each sequence reads positions [0, context_len) through its block table and must find its own
// history; the "model" emits next = f(history). The result must equal an unpaged run, whatever
// chunking, preemption and prefix reuse happened.
int32_t NextToken(const std::vector<int32_t>& history) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) h = (h ^ uint64_t(t)) * 1099511628211ull;
  return int32_t(h % 50);
}

void Simulate(const SchedulerLimits& l, int32_t num_blocks, const std::vector<std::vector<int32_t>>& prompts,
              int32_t max_new, int32_t* preemptions, int32_t* prefix_hits) {
  Rig s(l, num_blocks);
  std::vector<int32_t> cache(size_t(num_blocks * l.block_size), -7);
  std::map<int32_t, size_t> which;  // scheduler seq -> prompt index
  size_t next_prompt = 0;
  std::vector<std::vector<int32_t>> results(prompts.size());
  int32_t steps = 0;
  while (next_prompt < prompts.size() || s.sched.has_work()) {
    // Admit one new request per step while slots last (arrivals over time).
    if (next_prompt < prompts.size()) {
      auto seq = s.sched.add(SpanOf(prompts[next_prompt]), max_new);
      if (seq.is_ok()) which[*seq] = next_prompt++;
    }
    const StepPlan p = s.sched.schedule();
    ASSERT_GT(p.token_count, 0) << "no progress at step " << steps;
    for (int32_t t = 0; t < l.max_tokens; ++t) {
      if (p.slot_mapping[t] >= 0) cache[size_t(p.slot_mapping[t])] = p.token_ids[t];
    }
    std::vector<int32_t> next(size_t(l.max_seqs), 0);
    for (int32_t row = 0; row < p.seq_count; ++row) {
      const int32_t seq = p.seq_ids[row];
      const Span<const int32_t> known = s.sched.tokens(seq);
      std::vector<int32_t> history;
      for (int32_t j = 0; j < p.context_lens[row]; ++j) {
        const int32_t block = p.block_tables[size_t(row) * size_t(s.sched.max_blocks_per_seq()) + size_t(j / l.block_size)];
        history.push_back(cache[size_t(block * l.block_size + j % l.block_size)]);
        ASSERT_EQ(history.back(), known[size_t(j)]) << "seq " << seq << " position " << j << " step " << steps;
      }
      next[size_t(row)] = NextToken(history);
    }
    s.sched.commit(SpanOf(next));
    for (const auto& [seq, index] : which) {
      if (s.sched.state(seq) == SeqState::Finished && results[index].empty()) {
        const Span<const int32_t> all = s.sched.tokens(seq);
        results[index].assign(all.begin(), all.end());
        s.sched.release(seq);
      }
    }
    for (auto it = which.begin(); it != which.end();) {
      it = s.sched.state(it->first) == SeqState::Free ? which.erase(it) : std::next(it);
    }
    ASSERT_LT(++steps, 100000);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> expected = prompts[i];
    for (int32_t k = 0; k < max_new; ++k) expected.push_back(NextToken(expected));
    EXPECT_EQ(results[i], expected) << "prompt " << i;
  }
  *preemptions = s.sched.preemptions();
  *prefix_hits = s.sched.prefix_hit_tokens();
}

TEST(SchedulerTest, SimulatedGenerationMatchesAnUnpagedRun) {
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p(size_t(1 + rng() % 40));
    for (int32_t& t : p) t = int32_t(rng() % 50);
    prompts.push_back(p);
  }
  // Shared prefixes: requests 12..15 repeat request 0's prompt plus a suffix.
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = prompts[0];
    p.insert(p.end(), {int32_t(i), 3, 4});
    prompts.push_back(p);
  }
  int32_t preempt = 0, hits = 0;
  // Roomy pool: no preemption; prefix reuse happens.
  Simulate(SchedulerLimits{4, 16, 4, 64, 6}, 96, prompts, 12, &preempt, &hits);
  EXPECT_EQ(preempt, 0);
  EXPECT_GT(hits, 0);
  // Tiny pool (one context + 2 blocks): sequences preempt each other and recompute.
  Simulate(SchedulerLimits{4, 16, 4, 64, 6}, 18, prompts, 12, &preempt, &hits);
  EXPECT_GT(preempt, 0);
  // Block size 1 and one token per step for a single row: the extremes.
  Simulate(SchedulerLimits{1, 1, 1, 64, 3}, 64, prompts, 5, &preempt, &hits);
}

// A decode that needs a block when none is free preempts the most recently admitted sequence: its
// blocks go back, its tokens stay, and it is recomputed (prompt + generated) once there is room.
TEST(SchedulerTest, ADecodePreemptsTheMostRecentlyAdmittedAndItIsRecomputedLater) {
  const SchedulerLimits l{/*max_seqs=*/2, /*max_tokens=*/16, /*block_size=*/4, /*max_context=*/16, /*max_requests=*/2};
  Rig s(l, 4);  // one context
  const std::vector<int32_t> pa = Range(100, 8), pb = Range(200, 8);
  const int32_t a = s.sched.add(SpanOf(pa), 2).value(), b = s.sched.add(SpanOf(pb), 2).value();
  StepPlan p = s.sched.schedule();  // both prompts: 2 blocks each, the pool is full
  ASSERT_EQ(p.seq_count, 2);
  EXPECT_EQ(p.token_count, 16);
  EXPECT_EQ(s.blocks.free_count(), 0);
  const int32_t first[2] = {1, 2};
  s.sched.commit(Span<const int32_t>(first, 2));
  // a's decode writes position 8: a third block, none free: b (admitted after a) is preempted.
  p = s.sched.schedule();
  ASSERT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.seq_ids[0], a);
  EXPECT_EQ(p.positions[0], 8);
  EXPECT_EQ(s.sched.preemptions(), 1);
  EXPECT_EQ(s.sched.state(b), SeqState::Waiting);
  EXPECT_EQ(s.sched.block_table(b).size(), 0u);
  EXPECT_EQ(s.sched.tokens(b).size(), 9u);  // prompt + its generated token, kept
  EXPECT_EQ(s.blocks.free_count(), 1);      // b's two blocks back, one taken by a
  const int32_t second[2] = {3, 0};
  s.sched.commit(Span<const int32_t>(second, 2));
  EXPECT_EQ(s.sched.state(a), SeqState::Finished);  // max_new_tokens 2
  // b is recomputed: its 9 known tokens in one chunk, sampling its second token.
  p = s.sched.schedule();
  ASSERT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.seq_ids[0], b);
  EXPECT_EQ(p.token_count, 9);
  EXPECT_EQ(p.samples[0], 1);
  for (int32_t t = 0; t < 8; ++t) EXPECT_EQ(p.token_ids[size_t(t)], 200 + t);
  EXPECT_EQ(p.token_ids[8], 2);
  s.sched.commit(Span<const int32_t>(second, 2));
  EXPECT_EQ(s.sched.state(b), SeqState::Finished);
  EXPECT_EQ(s.sched.generated(b), 2);
  EXPECT_EQ(s.blocks.free_count(), 4);
}

// The old policy let a waiting sequence preempt an older running one, which then preempted it back:
// a livelock. Now a running sequence is never preempted to admit a newer one; the newer one waits.
TEST(SchedulerTest, AWaitingSequenceNeverPreemptsAnOlderRunningOne) {
  const SchedulerLimits l{2, 16, 4, 16, 2};
  Rig s(l, 4);
  const std::vector<int32_t> pa = Range(0, 14), pb = Range(50, 6);
  const int32_t a = s.sched.add(SpanOf(pa), 2).value();
  s.sched.schedule();
  const int32_t ids[2] = {7, 7};
  s.sched.commit(Span<const int32_t>(ids, 2));
  const int32_t b = s.sched.add(SpanOf(pb), 3).value();  // needs 2 blocks; 0 free
  StepPlan p = s.sched.schedule();
  ASSERT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.seq_ids[0], a);
  EXPECT_EQ(s.sched.state(b), SeqState::Waiting);
  EXPECT_EQ(s.sched.preemptions(), 0);
  s.sched.commit(Span<const int32_t>(ids, 2));  // a finishes (max_new_tokens 2)
  p = s.sched.schedule();
  ASSERT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.seq_ids[0], b);
  EXPECT_EQ(p.token_count, 6);
}

// The runner repro: two 84-token prompts, a pool of one 128-token context (8 blocks of 16), 20 new
// tokens each, 8 tokens and 2 rows a step (and 32 and 4). It used to plan nothing ("the scheduler
// planned nothing although requests wait"); now every step plans a token and both requests finish.
TEST(SchedulerTest, TwoPromptsThatDoNotFitTogetherBothFinish) {
  for (const SchedulerLimits& l : {SchedulerLimits{2, 8, 16, 128, 2}, SchedulerLimits{4, 32, 16, 128, 2}}) {
    SCOPED_TRACE(l.max_tokens);
    Rig s(l, 8);
    const std::vector<int32_t> pa = Range(0, 84), pb = Range(1000, 84);
    const int32_t a = s.sched.add(SpanOf(pa), 20).value(), b = s.sched.add(SpanOf(pb), 20).value();
    const int32_t next[4] = {5, 5, 5, 5};
    int32_t steps = 0;
    while (s.sched.has_work()) {
      ASSERT_LT(++steps, 400);
      const StepPlan p = s.sched.schedule();
      ASSERT_GT(p.token_count, 0) << "step " << steps;
      s.sched.commit(Span<const int32_t>(next, 4));
    }
    EXPECT_EQ(s.sched.generated(a), 20);
    EXPECT_EQ(s.sched.generated(b), 20);
    EXPECT_EQ(s.blocks.free_count(), 8);
  }
}

// Three long prompts with 100 new tokens each against a one-context pool (the runner's livelock):
// every request reaches the context limit, one after the other.
TEST(SchedulerTest, ThreeLongPromptsOnAOneContextPoolAllFinish) {
  const SchedulerLimits l{4, 32, 16, 128, 3};
  Rig s(l, 8);
  std::vector<int32_t> seqs;
  for (int32_t r = 0; r < 3; ++r) {
    const std::vector<int32_t> prompt = Range(100 * r, 81 + 6 * r);
    seqs.push_back(s.sched.add(SpanOf(prompt), 100).value());
  }
  const int32_t next[4] = {9, 9, 9, 9};
  int32_t steps = 0;
  while (s.sched.has_work()) {
    ASSERT_LT(++steps, 2000);
    ASSERT_GT(s.sched.schedule().token_count, 0) << "step " << steps;
    s.sched.commit(Span<const int32_t>(next, 4));
  }
  for (int32_t seq : seqs) {
    EXPECT_EQ(s.sched.state(seq), SeqState::Finished);
    EXPECT_EQ(s.sched.tokens(seq).size(), 128u);  // ended by the context
  }
  EXPECT_EQ(s.blocks.free_count(), 8);
}

// Prefix-cache blocks shared by two running sequences survive the preemption of one of them (the
// refcount drops, the block stays with the other) and are found again when it is re-admitted.
TEST(SchedulerTest, SharedPrefixBlocksSurviveThePreemptionOfOneSharer) {
  const SchedulerLimits l{2, 16, 4, 16, 2};
  Rig s(l, 4);
  std::vector<int32_t> pa = Range(0, 9), pb = Range(0, 9);
  pb[8] = 99;  // the first two blocks are the same
  const int32_t a = s.sched.add(SpanOf(pa), 5).value();
  s.sched.schedule();
  const int32_t ids[2] = {4, 4};
  s.sched.commit(Span<const int32_t>(ids, 2));  // a's two full blocks are published
  const int32_t b = s.sched.add(SpanOf(pb), 5).value();
  StepPlan p = s.sched.schedule();  // a decodes; b finds 8 tokens in the cache and computes 1
  ASSERT_EQ(p.seq_count, 2);
  EXPECT_EQ(s.sched.prefix_hit_tokens(), 8);
  const Span<const int32_t> ta = s.sched.block_table(a), tb = s.sched.block_table(b);
  ASSERT_EQ(tb.size(), 3u);
  EXPECT_EQ(tb[0], ta[0]);
  EXPECT_EQ(tb[1], ta[1]);
  const int32_t shared0 = ta[0], shared1 = ta[1];
  EXPECT_EQ(s.blocks.ref_count(shared0), 2);
  EXPECT_EQ(s.blocks.free_count(), 0);
  s.sched.commit(Span<const int32_t>(ids, 2));
  for (int k = 0; k < 2; ++k) {  // both decode inside their third blocks
    EXPECT_EQ(s.sched.schedule().seq_count, 2);
    s.sched.commit(Span<const int32_t>(ids, 2));
  }
  // a's position 12 needs a fourth block and the pool is full: b, admitted after a, is preempted;
  // the shared blocks lose one reference and stay with a.
  p = s.sched.schedule();
  ASSERT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.seq_ids[0], a);
  EXPECT_EQ(s.sched.preemptions(), 1);
  EXPECT_EQ(s.sched.state(b), SeqState::Waiting);
  EXPECT_EQ(s.blocks.ref_count(shared0), 1);
  EXPECT_EQ(s.blocks.ref_count(shared1), 1);
  EXPECT_TRUE(s.blocks.is_published(shared0));
  s.sched.commit(Span<const int32_t>(ids, 2));
  EXPECT_EQ(s.sched.state(a), SeqState::Finished);  // 5 tokens
  // b comes back and finds both shared blocks (free now, still published); it recomputes the rest.
  p = s.sched.schedule();
  ASSERT_EQ(p.seq_count, 1);
  EXPECT_EQ(p.seq_ids[0], b);
  EXPECT_EQ(s.sched.prefix_hit_tokens(), 16);
  EXPECT_EQ(p.positions[0], 8);
  EXPECT_EQ(p.token_count, 4);  // 99 and its three generated tokens
  EXPECT_EQ(s.sched.block_table(b)[0], shared0);
  EXPECT_EQ(s.sched.block_table(b)[1], shared1);
}

TEST(SchedulerTest, CancelReleasesBlocks) {
  const SchedulerLimits l{2, 8, 4, 32, 4};
  Rig s(l, 8);
  const std::vector<int32_t> prompt = Range(0, 6);
  auto a = s.sched.add(SpanOf(prompt), 5);
  ASSERT_TRUE(a.is_ok());
  s.sched.schedule();
  EXPECT_LT(s.blocks.free_count(), 8);
  s.sched.cancel(*a);
  EXPECT_EQ(s.blocks.free_count(), 8);
  const int32_t ids[2] = {1, 1};
  s.sched.commit(Span<const int32_t>(ids, 2));  // the cancelled row is ignored
  EXPECT_EQ(s.sched.state(*a), SeqState::Cancelled);
  EXPECT_EQ(s.sched.generated(*a), 0);
  EXPECT_FALSE(s.sched.has_work());
  s.sched.release(*a);
  EXPECT_EQ(s.sched.state(*a), SeqState::Free);
}

}  // namespace
}  // namespace ember::llm
