// Serialization: a partitioned, planned Graph to .pte bytes (schema/README.md has the container):
// 64-byte header, the Program FlatBuffer at offset 64 (file_identifier EM01), then the segments
// from a 64 KiB-aligned segment base: Constants (every constant any instruction or delegate reads,
// each 64-aligned, stored once) and, unless stripped, a Debug segment (its own FlatBuffer, root
// DebugInfo: one node per graph node, then one per delegate call) last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/partition/partitioner.h"
#include "exporter/plan/memory_planner.h"
#include "exporter/serialize/llm_info.h"

namespace ember::exporter {

constexpr const char* kProducer = "ember-exporter 0.1.0";
constexpr uint32_t kGraphDelegateFormatVersion = 1;

// One compile spec (schema: Delegate.compile_specs) for every delegate of `backend` (exporter
// --compile-spec BACKEND:KEY=VALUE). The exporter does not interpret it; the backend reads it at load
// (plan_memory / init) and refuses keys it does not know.
struct CompileSpecOption {
  std::string backend;
  std::string key;
  std::vector<uint8_t> value;  // the text after '=', as UTF-8 bytes
};

struct SerializeOptions {
  std::string method_name = "forward";
  bool strip_debug = false;
  // LLM programs: the LlmInfo table (tokenizer included). Borrowed for the call; nullptr = none.
  const LlmProgramInfo* llm = nullptr;
  // Written to each delegate whose backend matches, in this order (checked by export_graph).
  std::vector<CompileSpecOption> compile_specs;
};

struct SerializedProgram {
  std::vector<uint8_t> bytes;
  uint64_t flatbuffer_size = 0;
  uint64_t segment_base = 0;
  uint64_t constant_bytes = 0;   // sum of the constants' nbytes (without alignment padding)
  size_t constant_count = 0;
  uint64_t required_features = 0;
};

// `plan` must come from plan_memory(graph, partition) (tests may alter it to make a bad file).
SerializedProgram serialize_program(const Graph& graph, const Partition& partition, const MemoryPlan& plan,
                                    const SerializeOptions& options = {});

// Feature bits the graph needs: its dtypes (kFeatureFp8, ...), state, paged attention, conv clamps.
uint64_t required_features_of(const Graph& graph);

}  // namespace ember::exporter
