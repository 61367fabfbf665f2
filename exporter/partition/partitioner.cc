#include "exporter/partition/partitioner.h"

#include <algorithm>
#include <map>
#include <set>

namespace ember::exporter {

std::vector<int> Partition::step_inputs(const Graph& graph, size_t step) const {
  const Step& s = steps[step];
  if (s.kind == Step::Kind::Kernel) return graph.nodes[static_cast<size_t>(s.index)].inputs;
  return delegates[static_cast<size_t>(s.index)].inputs;
}

std::vector<int> Partition::step_outputs(const Graph& graph, size_t step) const {
  const Step& s = steps[step];
  if (s.kind == Step::Kind::Kernel) return graph.nodes[static_cast<size_t>(s.index)].outputs;
  return delegates[static_cast<size_t>(s.index)].outputs;
}

Partition portable_partition(const Graph& graph) {
  Partition p;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    p.steps.push_back(Step{Step::Kind::Kernel, static_cast<int>(n)});
    p.node_backend.push_back(kPortableBackend);
  }
  return p;
}

namespace {

DelegateGraph make_delegate(const Graph& graph, const std::string& backend, std::vector<int> nodes,
                            const std::vector<std::vector<int>>& users) {
  DelegateGraph d;
  d.backend = backend;
  d.nodes = std::move(nodes);
  const std::set<int> in_run(d.nodes.begin(), d.nodes.end());
  std::set<int> written;
  for (int n : d.nodes) {
    for (int in : graph.nodes[static_cast<size_t>(n)].inputs) {
      if (in < 0) continue;
      const Value& v = graph.values[static_cast<size_t>(in)];
      if (written.count(in)) continue;  // an internal or an output, classified when written
      // State is never written as an output (Graph::check_structure), so it is read-only here even
      // when a node writes it in place.
      auto& list = v.is_constant() ? d.constants : v.is_state() ? d.states : d.inputs;
      if (std::find(list.begin(), list.end(), in) == list.end()) list.push_back(in);
    }
    for (int out : graph.nodes[static_cast<size_t>(n)].outputs) {
      written.insert(out);
      const auto& readers = users[static_cast<size_t>(out)];
      const bool read_outside = std::any_of(readers.begin(), readers.end(), [&](int r) { return !in_run.count(r); });
      if (read_outside || graph.is_output(out)) {
        d.outputs.push_back(out);
      } else {
        d.internals.push_back(out);
      }
    }
  }
  return d;
}

// A program state lives in one memory (runtime/backend/README.md): the host's (portable kernels and
// backends that do not own state) or that of one backend that owns state. A partition that puts its
// readers in two would be refused by Program::load; refuse it here, naming both.
void check_state_owners(const Graph& graph, const CapabilityManifest& manifest,
                        const std::vector<std::string>& node_backend) {
  std::map<int, std::pair<std::string, int>> owner;  // state value -> (owner, first reader node)
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const std::string& b = node_backend[n];
    const std::string memory = b != kPortableBackend && manifest.backend_owns_state(b) ? b : "host";
    for (int in : graph.nodes[n].inputs) {
      if (in < 0 || !graph.values[static_cast<size_t>(in)].is_state()) continue;
      auto [it, first] = owner.emplace(in, std::make_pair(memory, static_cast<int>(n)));
      if (first || it->second.first == memory) continue;
      const int other = it->second.second;
      throw ExportError("state '" + graph.values[static_cast<size_t>(in)].state + "' would live in two memories: " +
                        format_node(graph, other) + " runs on " + node_backend[static_cast<size_t>(other)] +
                        " (" + it->second.first + " memory) and " + format_node(graph, static_cast<int>(n)) +
                        " on " + b + " (" + memory + " memory); list backends so that one runs every node "
                        "that reads it");
    }
  }
}

// A graph with program state (an LLM step) exported for a backend that owns state (a device: cuda)
// runs whole on it: every node it cannot take is an error naming the op, never a silent round trip
// through host memory and the portable kernels (issue 15). "portable" listed explicitly before it
// allows the mix (check_state_owners still guards the state).
void check_device_step(const Graph& graph, const CapabilityManifest& manifest, const std::vector<std::string>& backends,
                       const std::vector<std::string>& node_backend) {
  if (backends.empty() || backends[0] == kPortableBackend || !manifest.backend_owns_state(backends[0])) return;
  bool has_state = false;
  for (const Value& v : graph.values) has_state = has_state || v.is_state();
  if (!has_state || std::find(backends.begin(), backends.end(), kPortableBackend) != backends.end()) return;
  std::string missing;
  size_t count = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (node_backend[n] == backends[0]) continue;
    const Node& node = graph.nodes[n];
    if (count++ < 8) {
      missing += "\n  " + format_node(graph, static_cast<int>(n)) + ": " +
                 format_signature(to_string(node.op), node_dtypes(graph, node));
    }
  }
  if (count == 0) return;
  throw ExportError(backends[0] + " cannot run " + std::to_string(count) + " node(s) of this stateful (LLM) graph, and " +
                    "a step runs whole on its device (add 'portable' to --backends to allow a mix):" + missing +
                    (count > 8 ? "\n  ..." : ""));
}

}  // namespace

Partition partition_graph(const Graph& graph, const CapabilityManifest& manifest,
                          const std::vector<std::string>& backends) {
  for (const std::string& b : backends) {
    if (b != kPortableBackend && !manifest.has_backend(b)) {
      throw ExportError("backend '" + b + "' is not in the capability manifest " + manifest.source());
    }
  }
  Partition p;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const std::string op = to_string(node.op);
    const std::vector<std::string> dtypes = node_dtypes(graph, node);
    const std::string dim_order = node_dim_order(graph, node);
    std::string chosen;
    for (const std::string& b : backends) {
      const bool ok = b == kPortableBackend ? manifest.portable_supports(op, dtypes, dim_order)
                                            : manifest.backend_supports(b, op, dtypes, dim_order);
      if (ok) {
        chosen = b;
        break;
      }
    }
    if (chosen.empty() && manifest.portable_supports(op, dtypes, dim_order)) chosen = kPortableBackend;
    if (chosen.empty()) {
      std::string tried;
      for (const std::string& b : backends) tried += (tried.empty() ? "" : ", ") + b;
      if (std::find(backends.begin(), backends.end(), kPortableBackend) == backends.end()) {
        tried += (tried.empty() ? "" : ", ") + std::string("portable");
      }
      std::string outs;
      for (int o : node.outputs) outs += (outs.empty() ? "" : ", ") + format_value(graph, o);
      throw ExportError("no backend supports " + format_node(graph, static_cast<int>(n)) + " -> " + outs +
                        ": signature " + format_signature(op, dtypes) + " is in neither the portable kernels nor " +
                        "the backends tried (" + tried + ") of " + manifest.source());
    }
    p.node_backend.push_back(chosen);
  }
  check_device_step(graph, manifest, backends, p.node_backend);
  check_state_owners(graph, manifest, p.node_backend);
  const auto users = graph.users();
  for (size_t n = 0; n < graph.nodes.size();) {
    if (p.node_backend[n] == kPortableBackend) {
      p.steps.push_back(Step{Step::Kind::Kernel, static_cast<int>(n)});
      ++n;
      continue;
    }
    size_t end = n;
    std::vector<int> run;
    while (end < graph.nodes.size() && p.node_backend[end] == p.node_backend[n]) run.push_back(static_cast<int>(end++));
    p.steps.push_back(Step{Step::Kind::Delegate, static_cast<int>(p.delegates.size())});
    p.delegates.push_back(make_delegate(graph, p.node_backend[n], std::move(run), users));
    n = end;
  }
  return p;
}

}  // namespace ember::exporter
