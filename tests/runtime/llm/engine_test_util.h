// Shared by llm_end_to_end_test.cc and sim_backend_llm_test.cc: generation through the Engine on a
// loaded step method, recording every request's tokens, logprobs and logits.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/executor/method.h"
#include "runtime/llm/engine.h"

namespace ember::testing {

struct Generation {
  std::vector<std::vector<int32_t>> ids;                // per request
  std::vector<std::vector<float>> logprobs;             // per request, per sampled token
  std::vector<std::vector<std::vector<float>>> logits;  // per request, per sampled token: [vocab] (empty without)
  bool has_logits = false;                              // Engine::has_logits()
  int32_t preemptions = 0;
  int32_t steps = 0;  // Engine::step() calls
};

// An Engine on `method` (`limits`, `num_blocks` KV blocks, `vocab`, no EOS ids) generates `prompts`,
// one request each with `config`, until it has no work. A failed init, add or step is a test failure
// and ends the generation (what it has so far is returned).
inline Generation generate(Method& method, const llm::SchedulerLimits& limits, int32_t num_blocks, int32_t vocab,
                           const std::vector<std::vector<int32_t>>& prompts, const llm::GenerationConfig& config) {
  Generation g;
  std::vector<uint8_t> memory(llm::Engine::memory_bytes(limits, num_blocks));
  llm::Engine engine;
  ErrorContext ctx;
  const Status init = engine.init(method, limits, num_blocks, vocab, Span<const int32_t>(),
                                  Span<uint8_t>(memory.data(), memory.size()), &ctx);
  EXPECT_TRUE(init.is_ok()) << ctx.message;
  if (!init.is_ok()) return g;
  g.has_logits = engine.has_logits();
  std::vector<int32_t> seqs;
  for (const std::vector<int32_t>& prompt : prompts) {
    Result<int32_t> seq = engine.add(Span<const int32_t>(prompt.data(), prompt.size()), config, &ctx);
    EXPECT_TRUE(seq.is_ok()) << ctx.message;
    if (!seq.is_ok()) return g;
    seqs.push_back(seq.value());
  }
  g.ids.resize(seqs.size());
  g.logprobs.resize(seqs.size());
  g.logits.resize(seqs.size());
  while (engine.has_work()) {
    Result<Span<const llm::TokenEvent>> events = engine.step(&ctx);
    EXPECT_TRUE(events.is_ok()) << ctx.message;
    if (!events.is_ok()) break;
    ++g.steps;
    for (const llm::TokenEvent& e : events.value()) {
      for (size_t r = 0; r < seqs.size(); ++r) {
        if (seqs[r] != e.seq) continue;
        g.ids[r].push_back(e.token);
        g.logprobs[r].push_back(e.logprob);
        const Span<const float> l = engine.logits(e.seq);
        g.logits[r].emplace_back(l.begin(), l.end());
      }
    }
  }
  g.preemptions = engine.scheduler().preemptions();
  return g;
}

}  // namespace ember::testing
