// runtime/llm/scheduler under pressure: a seeded soak of 10,000 requests (EMBER_LLM_SOAK_REQUESTS
// sets another count, e.g. 200000 for a long local run) driven exactly as the Engine drives the
// Scheduler, against tiny KV pools: prompts that share random prefixes (the prefix cache is hit),
// random max_new_tokens (some past the context), EOS ids, stop sequences, cancellations at random
// times, prompts too long for the context, arrivals while others run. The "model" is a pure function
// of a sequence's tokens so far, read back through its block table from a paged cache of token ids,
// so a block that is overwritten, freed while referenced or mapped to the wrong sequence changes
// the tokens. Checked at every step: the plan has at least one token (forward progress); every
// block's refcount equals the number of running sequences whose block table holds it; used + free
// == total; every running sequence reads exactly its own tokens back through its block table.
// Checked at the end: every request ended (length, EOS, stop, cancelled, or refused at add with a
// message naming both lengths), no block is held, and each request's tokens equal the same request
// run alone (unpaged, one at a time); cancelled ones a prefix of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/llm/scheduler.h"
#include "runtime/platform/platform.h"

namespace ember::llm {
namespace {

constexpr int32_t kVocab = 97;
constexpr int32_t kEos = 0;

int32_t NextToken(const int32_t* tokens, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ uint64_t(uint32_t(tokens[i]))) * 1099511628211ull;
  return int32_t((h >> 17) % kVocab);
}

struct Request {
  std::vector<int32_t> prompt;
  int32_t max_new = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop;  // a stop sequence of generated tokens (empty: none)
  int64_t cancel_at = -1;     // the step at which the driver cancels it (-1: never)
  // Outcome.
  enum class End { None, Length, Eos, Stop, Cancelled, Refused } end = End::None;
  std::vector<int32_t> generated;
};

bool EndsWith(const std::vector<int32_t>& v, const std::vector<int32_t>& tail) {
  return !tail.empty() && v.size() >= tail.size() && std::equal(tail.begin(), tail.end(), v.end() - std::ptrdiff_t(tail.size()));
}

// The request run alone without paging: what batching, chunking and preemption must not change.
std::vector<int32_t> Alone(const Request& r, int32_t max_context, Request::End* end) {
  std::vector<int32_t> all = r.prompt, out;
  for (;;) {
    const int32_t t = NextToken(all.data(), all.size());
    all.push_back(t);
    out.push_back(t);
    if (!r.ignore_eos && t == kEos) return *end = Request::End::Eos, out;
    if (EndsWith(out, r.stop)) return *end = Request::End::Stop, out;
    if (int32_t(out.size()) >= r.max_new || int32_t(all.size()) >= max_context) return *end = Request::End::Length, out;
  }
}

int64_t SoakRequests() {
  const char* env = std::getenv("EMBER_LLM_SOAK_REQUESTS");
  return env != nullptr && std::atoll(env) > 0 ? std::atoll(env) : 10000;
}

struct Config {
  const char* name;
  SchedulerLimits limits;
  int32_t num_blocks;
};

void Soak(const Config& c, int64_t request_count, uint64_t seed) {
  SCOPED_TRACE(c.name);
  const SchedulerLimits& l = c.limits;
  std::vector<uint8_t> block_memory(BlockAllocator::memory_bytes(c.num_blocks)), memory(Scheduler::memory_bytes(l));
  BlockAllocator blocks;
  Scheduler sched;
  ASSERT_TRUE(blocks.init(c.num_blocks, Span<uint8_t>(block_memory.data(), block_memory.size())).is_ok());
  ASSERT_TRUE(sched.init(l, blocks, Span<uint8_t>(memory.data(), memory.size())).is_ok());
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int32_t lo, int32_t hi) { return lo + int32_t(rng() % uint64_t(hi - lo + 1)); };

  // Shared prefixes: a few long ones, so that whole blocks repeat across requests.
  std::vector<std::vector<int32_t>> prefixes(6);
  for (auto& p : prefixes) {
    p.resize(size_t(uniform(0, l.max_context - 8)));
    for (int32_t& t : p) t = uniform(1, kVocab - 1);
  }
  std::vector<Request> requests(static_cast<size_t>(request_count));
  for (Request& r : requests) {
    r.prompt = prefixes[size_t(uniform(0, int32_t(prefixes.size()) - 1))];
    r.prompt.resize(size_t(uniform(0, int32_t(r.prompt.size()))));  // a prefix of the prefix
    const int32_t extra = uniform(1, 12);
    for (int32_t i = 0; i < extra; ++i) r.prompt.push_back(uniform(1, kVocab - 1));
    if (uniform(0, 49) == 0) r.prompt.resize(size_t(l.max_context + uniform(0, 3)), 5);  // cannot fit
    r.max_new = uniform(0, 3) == 0 ? uniform(l.max_context / 2, 2 * l.max_context) : uniform(1, 16);
    r.ignore_eos = uniform(0, 3) == 0;
    if (uniform(0, 4) == 0) r.stop = {uniform(1, kVocab - 1)};
    if (uniform(0, 9) == 0) r.cancel_at = uniform(0, 40);  // steps after its admission
  }

  std::vector<int32_t> cache(size_t(c.num_blocks) * size_t(l.block_size), -1);  // token id per KV slot
  std::vector<int64_t> slot_request(size_t(l.max_requests), -1);               // scheduler seq -> request
  std::vector<int64_t> added_at(size_t(l.max_requests), 0);
  std::vector<int32_t> refs(size_t(c.num_blocks));
  std::vector<int32_t> next(size_t(l.max_seqs));
  size_t arrived = 0;
  int64_t step = 0, ended = 0;
  const int64_t step_limit = 50 * request_count + 1000;  // about 8 steps a request here
  auto end_request = [&](int32_t seq, Request::End end) {
    Request& r = requests[size_t(slot_request[size_t(seq)])];
    const Span<const int32_t> all = sched.tokens(seq);
    r.generated.assign(all.begin() + sched.prompt_length(seq), all.end());
    r.end = end;
    sched.release(seq);
    slot_request[size_t(seq)] = -1;
    ++ended;
  };
  while (ended < request_count) {
    ASSERT_LT(step, step_limit) << "no end in sight: " << ended << " of " << request_count << " requests ended";
    // Arrivals: up to 3 per step while request slots last.
    for (int32_t k = uniform(0, 3); k > 0 && arrived < requests.size(); --k) {
      if (std::find(slot_request.begin(), slot_request.end(), -1) == slot_request.end()) break;  // slots full
      Request& r = requests[arrived];
      ErrorContext error;
      Result<int32_t> seq = sched.add(Span<const int32_t>(r.prompt.data(), r.prompt.size()), r.max_new, &error);
      ++arrived;
      if (!seq.is_ok()) {
        ASSERT_EQ(seq.status().code(), Error::InvalidArgument);
        ASSERT_GE(int32_t(r.prompt.size()), l.max_context) << error.message;
        ASSERT_NE(std::string(error.message).find(std::to_string(r.prompt.size())), std::string::npos) << error.message;
        ASSERT_NE(std::string(error.message).find(std::to_string(l.max_context)), std::string::npos) << error.message;
        r.end = Request::End::Refused;
        ++ended;
        continue;
      }
      slot_request[size_t(*seq)] = int64_t(arrived - 1);
      added_at[size_t(*seq)] = step;
    }
    // Cancellations the driver decided on.
    for (int32_t seq = 0; seq < l.max_requests; ++seq) {
      if (slot_request[size_t(seq)] < 0) continue;
      const Request& r = requests[size_t(slot_request[size_t(seq)])];
      if (r.cancel_at >= 0 && step - added_at[size_t(seq)] == r.cancel_at) {
        sched.cancel(seq);
        ASSERT_EQ(sched.state(seq), SeqState::Cancelled);
        end_request(seq, Request::End::Cancelled);
      }
    }
    if (!sched.has_work()) {
      ++step;
      continue;
    }
    const StepPlan p = sched.schedule();
    ++step;
    ASSERT_GT(p.token_count, 0) << "nothing planned at step " << step << " although work waits";
    ASSERT_GT(p.seq_count, 0);
    // The step: K/V (here token ids) written at the planned slots, then each row reads its context.
    for (int32_t t = 0; t < p.token_count; ++t) {
      ASSERT_GE(p.slot_mapping[size_t(t)], 0);
      cache[size_t(p.slot_mapping[size_t(t)])] = p.token_ids[size_t(t)];
    }
    std::vector<int32_t> history;
    for (int32_t row = 0; row < p.seq_count; ++row) {
      const int32_t seq = p.seq_ids[size_t(row)];
      const Span<const int32_t> known = sched.tokens(seq);
      history.clear();
      for (int32_t j = 0; j < p.context_lens[size_t(row)]; ++j) {
        const int32_t block = p.block_tables[size_t(row) * size_t(sched.max_blocks_per_seq()) + size_t(j / l.block_size)];
        history.push_back(cache[size_t(block) * size_t(l.block_size) + size_t(j % l.block_size)]);
        ASSERT_EQ(history.back(), known[size_t(j)]) << "seq " << seq << " position " << j << " step " << step;
      }
      next[size_t(row)] = NextToken(history.data(), history.size());
    }
    sched.commit(Span<const int32_t>(next.data(), next.size()));
    // What the Engine and its caller do after a step: EOS, stop sequences, length.
    for (int32_t row = 0; row < p.seq_count; ++row) {
      const int32_t seq = p.seq_ids[size_t(row)];
      if (p.samples[size_t(row)] == 0) continue;
      const Request& r = requests[size_t(slot_request[size_t(seq)])];
      const Span<const int32_t> all = sched.tokens(seq);
      const std::vector<int32_t> gen(all.begin() + sched.prompt_length(seq), all.end());
      if (sched.state(seq) == SeqState::Running && !r.ignore_eos && gen.back() == kEos) {
        sched.finish(seq);
        end_request(seq, Request::End::Eos);
      } else if (sched.state(seq) == SeqState::Running && EndsWith(gen, r.stop)) {
        sched.finish(seq);
        end_request(seq, Request::End::Stop);
      } else if (sched.state(seq) == SeqState::Finished) {
        // The scheduler ended it at max_new_tokens or the context; an EOS / stop there wins.
        const bool eos = !r.ignore_eos && gen.back() == kEos;
        end_request(seq, eos ? Request::End::Eos : EndsWith(gen, r.stop) ? Request::End::Stop : Request::End::Length);
      }
    }
    // Invariants: refcounts equal the running sequences' block tables; used + free == total;
    // every running sequence reads back exactly its computed tokens (shared blocks intact).
    std::fill(refs.begin(), refs.end(), 0);
    for (int32_t seq = 0; seq < l.max_requests; ++seq) {
      const SeqState state = sched.state(seq);
      const Span<const int32_t> table = sched.block_table(seq);
      if (state != SeqState::Running) {
        ASSERT_EQ(table.size(), 0u) << "seq " << seq << " holds blocks while not running";
        continue;
      }
      const Span<const int32_t> known = sched.tokens(seq);
      ASSERT_GE(int32_t(table.size()) * l.block_size, sched.computed(seq));
      for (int32_t b : table) ++refs[size_t(b)];
      for (int32_t j = 0; j < sched.computed(seq); ++j) {
        const int32_t block = table[size_t(j / l.block_size)];
        ASSERT_EQ(cache[size_t(block) * size_t(l.block_size) + size_t(j % l.block_size)], known[size_t(j)])
            << "seq " << seq << " position " << j << " step " << step;
      }
    }
    int32_t used = 0;
    for (int32_t b = 0; b < c.num_blocks; ++b) {
      ASSERT_EQ(blocks.ref_count(b), refs[size_t(b)]) << "block " << b << " step " << step;
      used += refs[size_t(b)] > 0 ? 1 : 0;
    }
    ASSERT_EQ(used + blocks.free_count(), c.num_blocks) << "step " << step;
  }
  EXPECT_FALSE(sched.has_work());
  EXPECT_EQ(blocks.free_count(), c.num_blocks);
  int64_t counts[6] = {};
  for (const Request& r : requests) {
    ++counts[int(r.end)];
    ASSERT_NE(r.end, Request::End::None);
    if (r.end == Request::End::Refused) continue;
    Request::End alone_end = Request::End::None;
    const std::vector<int32_t> alone = Alone(r, l.max_context, &alone_end);
    if (r.end == Request::End::Cancelled) {
      ASSERT_LE(r.generated.size(), alone.size());
      ASSERT_TRUE(std::equal(r.generated.begin(), r.generated.end(), alone.begin()));
    } else {
      ASSERT_EQ(r.generated, alone);
      ASSERT_EQ(r.end, alone_end);
    }
  }
  // Every kind of ending happened, and the pool was under pressure.
  for (int e = 1; e < 6; ++e) EXPECT_GT(counts[e], 0) << "end kind " << e;
  EXPECT_GT(sched.preemptions(), 0);
  EXPECT_GT(sched.prefix_hit_tokens(), 0);
  std::printf("%s: %lld requests (length %lld, eos %lld, stop %lld, cancelled %lld, refused %lld) in %lld steps, "
              "%d preemptions, %d prefix-cache tokens\n",
              c.name, static_cast<long long>(request_count), static_cast<long long>(counts[1]),
              static_cast<long long>(counts[2]), static_cast<long long>(counts[3]), static_cast<long long>(counts[4]),
              static_cast<long long>(counts[5]), static_cast<long long>(step), sched.preemptions(),
              sched.prefix_hit_tokens());
}

TEST(SchedulerSoakTest, EveryRequestEndsWithItsAloneTokensAndNoBlockLeaks) {
  const int64_t n = SoakRequests();
  set_log_level(static_cast<LogLevel>(4));  // the refused prompts would log one line each
  // A pool of exactly one context, a few more blocks with more rows than fit, and block size 1.
  const Config configs[] = {
      {"one-context pool", SchedulerLimits{4, 16, 4, 64, 8}, 16},
      {"one context + 3 blocks, 8 rows", SchedulerLimits{8, 24, 4, 64, 12}, 19},
      {"block size 1", SchedulerLimits{3, 8, 1, 32, 6}, 32},
  };
  for (size_t i = 0; i < 3; ++i) Soak(configs[i], (n + 2 - int64_t(i)) / 3, 1234 + i);
  set_log_level(LogLevel::Error);
}

}  // namespace
}  // namespace ember::llm
