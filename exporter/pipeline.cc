#include "exporter/pipeline.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

namespace ember::exporter {
namespace {

std::string spec_text(const CompileSpecOption& spec) {
  return spec.backend + ":" + spec.key + "=" + std::string(spec.value.begin(), spec.value.end());
}

// Before any work: each spec names a listed backend, and a backend has each key once.
void check_spec_backends(const ExportOptions& options) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const CompileSpecOption& spec : options.compile_specs) {
    bool listed = false;
    std::string list;
    for (const std::string& b : options.backends) {
      listed = listed || b == spec.backend;
      list += (list.empty() ? "" : ",") + b;
    }
    if (!listed) {
      throw ExportError("--compile-spec " + spec_text(spec) + ": backend '" + spec.backend + "' is not in --backends (" +
                        list + ")");
    }
    if (!seen.emplace(spec.backend, spec.key).second) {
      throw ExportError("--compile-spec " + spec_text(spec) + ": key '" + spec.key + "' given twice for backend '" +
                        spec.backend + "'");
    }
  }
}

// After partitioning: a spec no delegate would carry is a mistake (a misspelt backend, or nodes that
// all went elsewhere), not something to drop silently.
void check_spec_delegates(const std::vector<CompileSpecOption>& specs, const Partition& partition) {
  for (const CompileSpecOption& spec : specs) {
    bool used = false;
    for (const DelegateGraph& d : partition.delegates) used = used || d.backend == spec.backend;
    if (!used) {
      throw ExportError("--compile-spec " + spec_text(spec) + ": no delegate went to backend '" + spec.backend + "' (" +
                        (spec.backend == kPortableBackend ? "the portable kernels are not a delegate"
                                                          : "no node of the graph runs on it") +
                        "), so nothing would carry the spec");
    }
  }
}

}  // namespace

ExportResult export_graph(Graph graph, const ExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  check_spec_backends(options);
  ExportResult r;
  auto stage = [&](const char* name) {
    if (options.stage != nullptr) *options.stage = name;
  };
  graph.check_structure();
  // Weights as imported (a pass could hide a NaN: folding it through relu, say), then the constants
  // the passes made; bytes already scanned are not scanned again.
  stage("checking weights");
  std::set<const void*> scanned;
  auto check_finite = [&](const char* when) {
    WeightCheck found = check_weights(graph, &scanned);
    r.weights.tensors_checked += found.tensors_checked;
    r.weights.bytes_checked += found.bytes_checked;
    if (found.tensors.empty()) return;
    if (!options.allow_non_finite_weights) {
      throw ExportError("non-finite weights " + std::string(when) + ": " + found.format() +
                        " (pass --allow-non-finite-weights to export them anyway)");
    }
    r.weights.tensors.insert(r.weights.tensors.end(), found.tensors.begin(), found.tensors.end());
  };
  check_finite("in the model");
  stage("folding constants");
  r.batch_norms_folded = fold_batch_norms(graph);
  if (options.fold_constants) r.fold = fold_constants(graph);
  if (options.fuse_conv_clamps) r.conv_clamps_fused = fuse_conv_clamps(graph);
  r.dead_nodes_removed = remove_dead_code(graph);
  // After folding, so constants computed at export (a sqrt(2) from Sqrt(2.0)) are seen as scalars,
  // and after dead code, so the nodes the fusion leaves unread are all that its own cleanup drops.
  if (options.fuse_gelu) r.gelus_fused = fuse_gelus(graph);
  graph.check_structure();
  if (options.quantize) {
    stage("quantizing");
    r.quantize = quantize_graph(graph, *options.quantize);
    graph.check_structure();
  }
  stage("checking weights");
  check_finite("after folding and quantization");
  if (!r.weights.tensors.empty()) {
    r.warnings.push_back("exporting non-finite weights (--allow-non-finite-weights): " + r.weights.format());
  }
  stage("partitioning");
  if (options.manifest != nullptr) {
    r.partition = partition_graph(graph, *options.manifest, options.backends);
  } else {
    for (const std::string& b : options.backends) {
      if (b != kPortableBackend) throw ExportError("backend '" + b + "' needs a capability manifest (--manifest)");
    }
    r.partition = portable_partition(graph);
  }
  check_spec_delegates(options.compile_specs, r.partition);
  stage("planning memory");
  r.plan = plan_memory(graph, r.partition);
  stage("serializing");
  SerializeOptions so;
  so.strip_debug = options.strip_debug;
  so.llm = options.llm;
  so.method_name = options.method_name;
  so.compile_specs = options.compile_specs;
  r.program = serialize_program(graph, r.partition, r.plan, so);
  r.graph = std::move(graph);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string format_summary(const ExportResult& r, bool instructions) {
  const Graph& g = r.graph;
  std::string s;
  char buf[256];
  std::map<std::string, int> histogram;
  for (const Node& n : g.nodes) ++histogram[to_string(n.op)];
  s += "ops:";
  for (const auto& [op, count] : histogram) s += " " + op + " x" + std::to_string(count);
  s += "\n";
  std::snprintf(buf, sizeof(buf),
                "passes: %d batch norms folded, %d nodes folded, %d constants dropped, %d dead nodes removed, "
                "%d gelus fused\n",
                r.batch_norms_folded, r.fold.folded_nodes, r.fold.removed_constants, r.dead_nodes_removed,
                r.gelus_fused);
  s += buf;
  s += "fusions: " + std::to_string(r.conv_clamps_fused) + " relu / clip into conv2d\n";
  std::map<std::string, int> per_backend;
  for (const std::string& b : r.partition.node_backend) ++per_backend[b];
  s += "backends:";
  for (const auto& [backend, count] : per_backend) s += " " + backend + " " + std::to_string(count) + " nodes";
  s += "\n";
  size_t delegate_calls = 0;
  for (const Step& step : r.partition.steps) delegate_calls += step.kind == Step::Kind::Kernel ? 0 : 1;
  s += "instructions: " + std::to_string(r.partition.steps.size()) + " (" +
       std::to_string(r.partition.steps.size() - delegate_calls) + " kernel calls, " + std::to_string(delegate_calls) +
       " delegate calls)" + (instructions ? ":" : "; --verbose lists them") + "\n";
  for (size_t i = 0; instructions && i < r.partition.steps.size(); ++i) {
    const Step& step = r.partition.steps[i];
    if (step.kind == Step::Kind::Kernel) {
      const Node& n = g.nodes[static_cast<size_t>(step.index)];
      std::snprintf(buf, sizeof(buf), "  %3zu  %-18s %-12s -> %s\n", i, to_string(n.op), n.name.c_str(),
                    r.partition.node_backend[static_cast<size_t>(step.index)].c_str());
      s += buf;
    } else {
      const DelegateGraph& d = r.partition.delegates[static_cast<size_t>(step.index)];
      std::string nodes;
      for (int n : d.nodes) nodes += (nodes.empty() ? "" : ", ") + g.nodes[static_cast<size_t>(n)].name;
      std::snprintf(buf, sizeof(buf), "  %3zu  delegate %-9d %zu nodes    -> %s (GRAPH v%u): ", i, step.index,
                    d.nodes.size(), d.backend.c_str(), kGraphDelegateFormatVersion);
      s += buf + nodes;
      std::string states;
      for (int v : d.states) states += (states.empty() ? "" : ", ") + g.values[static_cast<size_t>(v)].state;
      s += (states.empty() ? "" : "; state " + states) + "\n";
    }
  }
  std::snprintf(buf, sizeof(buf), "weights: %llu bytes in %zu constants\n",
                static_cast<unsigned long long>(r.program.constant_bytes), r.program.constant_count);
  s += buf;
  std::snprintf(buf, sizeof(buf), "arenas: activation %llu bytes, io %llu bytes\n",
                static_cast<unsigned long long>(r.plan.activation_size), static_cast<unsigned long long>(r.plan.io_size));
  s += buf;
  s += r.plan.summary() + "\n";
  std::snprintf(buf, sizeof(buf), "file: %zu bytes (FlatBuffer %llu bytes, segments at %llu), features 0x%llx\n",
                r.program.bytes.size(), static_cast<unsigned long long>(r.program.flatbuffer_size),
                static_cast<unsigned long long>(r.program.segment_base),
                static_cast<unsigned long long>(r.program.required_features));
  s += buf;
  std::snprintf(buf, sizeof(buf), "time: %.1f ms\n", r.seconds * 1e3);
  s += buf;
  return s;
}

}  // namespace ember::exporter
