// runner: loads an Ember program and runs it (docs/DESIGN.md §1). See --help.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backends/builtin.h"
#include "kernels/builtin.h"
#include "kernels/cpu/targets.h"
#include "runtime/core/data_loader.h"
#include "runtime/core/event_tracer.h"
#include "runtime/core/thread_pool.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/platform/platform.h"
#include "tools/common/host_io.h"
#include "tools/common/npy.h"
#include "tools/runner/input_ranges.h"
#include "tools/runner/llm_runner.h"
#include "tools/runner/runner_common.h"

namespace {

using namespace ember;
using namespace ember::runner;

constexpr const char* kVersion = "0.1.0";



std::string dims_string(const int64_t* dims, int rank, const char* const* symbols = nullptr) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    if (symbols && symbols[i]) s += std::string(symbols[i]) + "<=";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}






std::string bytes_string(uint64_t bytes) {
  char text[32];
  return format_bytes(bytes, text, sizeof(text));
}

std::string memory_string(const MemoryRequirements& m) {
  return "host " + bytes_string(m.host_bytes) + ", pinned " + bytes_string(m.pinned_bytes) + ", device " +
         bytes_string(m.device_bytes);
}

// Under a totals line: each domain that lists parts, by purpose ("device 15.2 GiB: weights 14.2 GiB,
// values ..."), then the graphs the backend captures at init. Their memory is the driver's, taken
// when it instantiates them and known only afterwards, so no total includes it.
void print_parts(const MemoryRequirements& m) {
  static constexpr MemoryDomain kDomains[] = {MemoryDomain::Host, MemoryDomain::PinnedHost, MemoryDomain::Device};
  char line[1024];
  for (MemoryDomain domain : kDomains) {
    bool listed = false;
    for (const MemoryPart& part : m.parts()) listed = listed || part.domain == domain;
    if (listed) std::printf("    %s\n", format_memory(m, domain, line, sizeof(line)));
  }
  if (m.graph_count > 0) std::printf("    graphs: %u captured (driver memory not included)\n", m.graph_count);
}

// Per delegate: the backend chosen at load and why, and the bytes its init() takes (plan_memory) by
// purpose; the program state; then the totals per backend, program state included, and over all
// of them when there is more than one.
void print_backend_plan(const Program& p, const MethodMeta& meta) {
  struct Total {
    std::string backend;
    MemoryRequirements memory;
  };
  std::vector<Total> totals;
  auto add = [&](const std::string& backend, const MemoryRequirements& m) {
    for (Total& t : totals) {
      if (t.backend == backend) {
        t.memory += m;
        return;
      }
    }
    totals.push_back(Total{backend, m});
  };
  ErrorContext ctx;
  Result<DelegateMeta> body = meta.delegate(DelegateMeta::kWholeMethod, &ctx);
  if (!body.is_ok()) fail(body.status(), ctx, "planning the method body");
  if (std::strcmp(body->runs_on, "portable") != 0) {
    std::printf("  whole method -> %s (%s): %s\n", body->runs_on, body->reason, memory_string(body->memory).c_str());
    print_parts(body->memory);
    add(body->runs_on, body->memory);
  } else if (body->reason[0] != '\0' && std::strcmp(body->reason, "portable kernels") != 0) {
    std::printf("  whole method -> portable (%s)\n", body->reason);
  }
  for (uint32_t d = 0; d < meta.delegate_count(); ++d) {
    Result<DelegateMeta> del = meta.delegate(d, &ctx);
    if (!del.is_ok()) fail(del.status(), ctx, "planning delegate " + std::to_string(d));
    std::printf("  delegate %u (%u instructions, exported for %s) -> %s (%s)", d, del->instruction_count,
                del->exported_for, del->runs_on[0] ? del->runs_on : "none", del->reason);
    const bool on_backend = del->runs_on[0] != '\0' && std::strcmp(del->runs_on, "portable") != 0;
    if (on_backend) std::printf(": %s", memory_string(del->memory).c_str());
    std::printf("\n");
    if (on_backend) {
      print_parts(del->memory);
      add(del->runs_on, del->memory);
    }
  }
  MemoryRequirements host_state, all_state;
  for (size_t s = 0; s < p.state_count(); ++s) {
    const Program::State& state = p.state(s);
    all_state += state.memory;
    if (state.backend != nullptr) {
      add(state.owner, state.memory);
    } else {
      host_state += state.memory;
    }
  }
  if (p.state_count() > 0) {
    std::printf("  program state: %zu tensors", p.state_count());
    const Program::State& first = p.state(0);
    std::printf(" (e.g. '%s' %s, %s, in %s memory of %s): %s\n", first.name, to_string(first.dtype),
                bytes_string(first.nbytes).c_str(), to_string(first.domain), first.owner,
                memory_string(all_state).c_str());
    print_parts(all_state);
  }
  if (host_state.host_bytes > 0) add("program (host state)", host_state);
  MemoryRequirements all;
  for (const Total& t : totals) {
    std::printf("  memory of %s: %s\n", t.backend.c_str(), memory_string(t.memory).c_str());
    print_parts(t.memory);
    all += t.memory;
  }
  if (totals.size() > 1) {
    std::printf("  memory in total: %s\n", memory_string(all).c_str());
    print_parts(all);
  }
}

int run_info(const Options& o) {
  auto s = open_program(o.info, o);
  const Program& p = *s->program;
  const fb::Program& fp = p.flatbuffer();
  std::printf("program: %s\n", o.info.c_str());
  std::printf("  format %u.%u, producer: %s\n", p.header().major, p.header().minor,
              fp.producer() ? fp.producer()->c_str() : "(none)");
  std::string features;
  for (int bit = 0; bit < 64; ++bit) {
    if (p.header().required_features & (uint64_t{1} << bit)) {
      features += std::string(features.empty() ? "" : ", ") + feature_name(uint64_t{1} << bit);
    }
  }
  std::printf("  required features: %s\n", features.empty() ? "none" : features.c_str());
  uint64_t constant_bytes = 0;
  for (const SegmentData& seg : p.segments()) {
    if (seg.kind == fb::SegmentKind::Constants) constant_bytes += seg.size;
  }
  std::printf("  segments: %zu (constants %" PRIu64 " bytes)%s\n", p.segments().size(), constant_bytes,
              p.debug_info() ? ", debug info present" : "");
  print_llm_info(p);  // LLM programs: the LlmInfo table and the KV cache (llm_runner.cc)
  for (size_t m = 0; m < p.method_count(); ++m) {
    ErrorContext ctx;
    Result<MethodMeta> meta = p.method_meta(p.method_name(m), &ctx);
    if (!meta.is_ok()) fail(meta.status(), ctx, "method meta");
    std::printf("method '%s': %zu instructions, %zu delegates\n", meta->name(), meta->instruction_count(),
                meta->delegate_count());
    for (size_t i = 0; i < meta->input_count(); ++i) {
      const TensorMeta t = meta->input(i).value();
      std::printf("  input  %-12s %-5s %s (%" PRIu64 " bytes max)\n", t.name, to_string(t.dtype),
                  dims_string(t.max_dims, t.rank, t.dim_symbols).c_str(), t.max_nbytes);
    }
    for (size_t i = 0; i < meta->output_count(); ++i) {
      const TensorMeta t = meta->output(i).value();
      std::printf("  output %-12s %-5s %s (%" PRIu64 " bytes max)\n", t.name, to_string(t.dtype),
                  dims_string(t.max_dims, t.rank, t.dim_symbols).c_str(), t.max_nbytes);
    }
    static const char* const kKinds[] = {"?", "activation", "io", "scratch"};
    for (size_t a = 0; a < meta->arena_count(); ++a) {
      const ArenaMeta arena = meta->arena(a).value();
      std::printf("  arena %zu: %-10s %" PRIu64 " bytes, %u-aligned\n", a, kKinds[static_cast<int>(arena.kind) & 3],
                  arena.size, arena.alignment);
    }
    std::printf("  method allocator: %zu bytes, scratch: %zu bytes\n", meta->method_allocator_bytes(),
                meta->scratch_bytes());
    // Which backend runs what, why, and what its init will take: asked before the method loads.
    print_backend_plan(p, meta.value());
    MethodMemory memory(meta.value());
    Result<Method> method = p.load_method(meta->name(), *memory.plan, &ctx);
    if (!method.is_ok()) fail(method.status(), ctx, std::string("cannot load method '") + meta->name() + "'");
    const fb::Graph& g = *fp.methods()->Get(static_cast<uint32_t>(m))->graph();
    std::printf("  instructions:\n");
    for (size_t i = 0; i < method->instruction_count(); ++i) {
      const fb::Instruction* ins = g.instructions()->Get(static_cast<uint32_t>(i));
      std::string what;
      if (const fb::KernelCall* call = ins->args_as_KernelCall()) {
        what = to_string(static_cast<OpCode>(call->op()));
      } else if (const fb::DelegateCall* call = ins->args_as_DelegateCall()) {
        const fb::Delegate* d = fp.methods()->Get(static_cast<uint32_t>(m))->delegates()->Get(call->index());
        const fb::Graph* dg = d->payload_nested_root();
        what = "delegate " + std::to_string(call->index()) + " (";
        for (uint32_t k = 0; dg && dg->instructions() && k < dg->instructions()->size(); ++k) {
          const fb::KernelCall* kc = dg->instructions()->Get(k)->args_as_KernelCall();
          if (k) what += ", ";
          what += kc ? to_string(static_cast<OpCode>(kc->op())) : "?";
        }
        what += ")";
      } else {
        what = ins->args_as_Move() ? "move" : "jump_if_false";
      }
      std::string node;
      if (p.debug_info() && ins->debug_id() > 0 && p.debug_info()->nodes() &&
          ins->debug_id() <= p.debug_info()->nodes()->size()) {
        const fb::DebugNode* dn = p.debug_info()->nodes()->Get(ins->debug_id() - 1);
        if (dn->name()) node = dn->name()->str();
      }
      std::printf("    %3zu %-28s -> %-28s %s\n", i, what.c_str(), method->instruction_backend(i), node.c_str());
    }
  }
  return 0;
}

// JSON string contents: quotes, backslashes and control characters escaped (names come from the file).
std::string json_escape(const char* text) {
  std::string out;
  for (const char* c = text; *c; ++c) {
    const unsigned char u = static_cast<unsigned char>(*c);
    if (u == '"' || u == '\\') {
      out += '\\';
      out += *c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += *c;
    }
  }
  return out;
}

// Records every instruction's time into preallocated storage (no allocation while executing) and
// writes a Chrome trace (chrome://tracing, Perfetto) plus a per-op summary.
class ProfileTracer final : public EventTracer {
 public:
  struct Event {
    uint32_t index;
    const char* what;
    const char* node;
    uint64_t begin_ns;
    uint64_t end_ns;
  };
  explicit ProfileTracer(size_t capacity) { events_.reserve(capacity); }
  void begin_instruction(uint32_t index, const char* what, const char* node) override {
    if (events_.size() < events_.capacity()) events_.push_back(Event{index, what, node, platform_now_ns(), 0});
  }
  void end_instruction(uint32_t index) override {
    if (!events_.empty() && events_.back().end_ns == 0 && events_.back().index == index) {
      events_.back().end_ns = platform_now_ns();
    }
  }

  void write(const std::string& path, const Method& method) const {
    const uint64_t origin = events_.empty() ? 0 : events_.front().begin_ns;
    std::string text = "{\"traceEvents\": [\n";
    std::vector<char> line(256);
    for (size_t i = 0; i < events_.size(); ++i) {
      const Event& e = events_[i];
      const std::string what = json_escape(e.what), backend = json_escape(method.instruction_backend(e.index));
      const std::string node = json_escape(e.node);
      const char* format = "  {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": 1, "
                           "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"instruction\": %u, \"node\": \"%s\"}}%s\n";
      const auto print = [&] {
        return std::snprintf(line.data(), line.size(), format, what.c_str(), backend.c_str(), (e.begin_ns - origin) / 1e3,
                             (e.end_ns - e.begin_ns) / 1e3, e.index, node.c_str(), i + 1 < events_.size() ? "," : "");
      };
      const int n = print();
      if (n >= 0 && static_cast<size_t>(n) >= line.size()) {
        line.resize(static_cast<size_t>(n) + 1);
        print();
      }
      text += line.data();
    }
    text += "]}\n";
    try {
      tools::write_file_atomically(path, text.data(), text.size(), "--profile");
    } catch (const std::exception& e) {
      fail(e.what());
    }
    // Per-op totals, largest first.
    std::vector<std::pair<std::string, std::pair<double, int>>> totals;
    for (const Event& e : events_) {
      const std::string key = std::string(e.what) + " [" + method.instruction_backend(e.index) + "]";
      auto it = std::find_if(totals.begin(), totals.end(), [&](const auto& t) { return t.first == key; });
      if (it == totals.end()) it = totals.insert(totals.end(), {key, {0.0, 0}});
      it->second.first += (e.end_ns - e.begin_ns) / 1e6;
      it->second.second += 1;
    }
    std::sort(totals.begin(), totals.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double all = 0;
    for (const auto& t : totals) all += t.second.first;
    std::printf("profile: %zu events -> %s\n", events_.size(), path.c_str());
    for (const auto& t : totals) {
      std::printf("  %-36s %8.3f ms total %6.1f%%  (%d calls)\n", t.first.c_str(), t.second.first,
                  all > 0 ? 100.0 * t.second.first / all : 0.0, t.second.second);
    }
  }

 private:
  std::vector<Event> events_;
};

// Integers uniform in [range.lo, range.hi) (tools/runner/input_ranges.h), floats in [-1, 1).
void fill_random(TensorView& view, std::mt19937_64& rng, const tools::InputRange& range) {
  const uint64_t n = view.numel();
  const uint64_t span = static_cast<uint64_t>(range.hi - range.lo);
  switch (view.dtype) {
    case ScalarType::F32: {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (uint64_t i = 0; i < n; ++i) view.data_as<float>()[i] = dist(rng);
      break;
    }
    case ScalarType::I32: {
      for (uint64_t i = 0; i < n; ++i) view.data_as<int32_t>()[i] = static_cast<int32_t>(range.lo + int64_t(rng() % span));
      break;
    }
    case ScalarType::I64: {
      for (uint64_t i = 0; i < n; ++i) view.data_as<int64_t>()[i] = range.lo + static_cast<int64_t>(rng() % span);
      break;
    }
    case ScalarType::Bool: {
      for (uint64_t i = 0; i < n; ++i) view.data_as<bool>()[i] = (rng() & 1) != 0;
      break;
    }
    default: {
      uint8_t* bytes = view.data_as<uint8_t>();
      for (uint64_t i = 0; i < view.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
      break;
    }
  }
}

std::string summarize(const TensorView& view) {
  if (view.dtype != ScalarType::F32) return "";
  const float* v = view.data_as<const float>();
  const uint64_t n = view.numel();
  if (n == 0) return "(empty)";
  double lo = v[0], hi = v[0], sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    lo = std::min<double>(lo, v[i]);
    hi = std::max<double>(hi, v[i]);
    sum += v[i];
  }
  char text[256];
  std::snprintf(text, sizeof(text), "min %.6g max %.6g mean %.6g first [", lo, hi, sum / static_cast<double>(n));
  std::string out = text;
  for (uint64_t i = 0; i < std::min<uint64_t>(n, 5); ++i) {
    std::snprintf(text, sizeof(text), "%s%.6g", i ? ", " : "", v[i]);
    out += text;
  }
  return out + (n > 5 ? ", ...]" : "]");
}

int run_program(const Options& o) {
  if (o.iterations < 1) fail("--iterations must be >= 1, got " + std::to_string(o.iterations));
  auto s = open_program(o.program, o);
  const Program& p = *s->program;
  const char* name = method_name_or_default(p, o.method);
  ErrorContext ctx;
  Result<MethodMeta> meta = p.method_meta(name, &ctx);
  if (!meta.is_ok()) fail(meta.status(), ctx, "cannot find method");
  MethodMemory memory(meta.value());
  Result<Method> loaded = p.load_method(name, *memory.plan, &ctx);
  if (!loaded.is_ok()) fail(loaded.status(), ctx, std::string("cannot load method '") + name + "'");
  Method& method = loaded.value();

  // Inputs: "name=path" or positional paths; the rest random at the upper-bound shape.
  std::vector<bool> given(meta->input_count(), false);
  size_t positional = 0;
  std::mt19937_64 rng(o.seed);
  for (const std::string& spec : o.inputs) {
    size_t index = positional;
    std::string path = spec;
    const size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      const std::string input_name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
      index = meta->input_count();
      for (size_t i = 0; i < meta->input_count(); ++i) {
        if (input_name == meta->input(i).value().name) index = i;
      }
      if (index == meta->input_count()) fail("--input: method '" + std::string(name) + "' has no input '" + input_name + "'");
    } else {
      ++positional;
    }
    if (index >= meta->input_count()) fail("--input: more inputs given than the method takes");
    tools::NpyArray array;
    std::string error;
    // Bounded by what the input can take (plus room for the header): a huge file is not read.
    const uint64_t max_bytes = meta->input(index).value().max_nbytes + (uint64_t(1) << 20);
    if (!tools::read_npy(path, &array, &error, max_bytes)) fail("--input " + error);
    TensorView src;
    src.dtype = array.dtype;
    src.rank = static_cast<uint8_t>(std::min<size_t>(array.dims.size(), kMaxRank));
    if (array.dims.size() > static_cast<size_t>(kMaxRank)) fail("--input " + path + ": rank above 8");
    for (int d = 0; d < src.rank; ++d) src.dims[d] = array.dims[d];
    src.data = array.data.data();
    if (!method.set_input(index, src, &ctx).is_ok()) fail(Status(ctx.code), ctx, "--input " + path);
    given[index] = true;
  }
  // Inputs not given are made up, each announced with its range (integers: below the size of the
  // table they index, else 0 or 1).
  const fb::Graph* graph = nullptr;
  for (size_t m = 0; m < p.method_count(); ++m) {
    if (std::strcmp(p.method_name(m), name) == 0) graph = p.flatbuffer().methods()->Get(static_cast<uint32_t>(m))->graph();
  }
  for (size_t i = 0; i < meta->input_count(); ++i) {
    if (given[i]) continue;
    TensorView view = method.input(i).value();
    const TensorMeta t = meta->input(i).value();
    tools::InputRange range;
    const bool integer = view.dtype == ScalarType::I32 || view.dtype == ScalarType::I64;
    if (integer && graph != nullptr) range = tools::integer_input_range(*graph, static_cast<uint32_t>(i), p.debug_info());
    fill_random(view, rng, range);
    if (integer) {
      std::printf("input %s: random %s %s in [%lld, %lld) (%s)\n", t.name, to_string(view.dtype),
                  dims_string(view.dims, view.rank).c_str(), static_cast<long long>(range.lo),
                  static_cast<long long>(range.hi), range.why.c_str());
    } else {
      std::printf("input %s: random %s %s%s\n", t.name, to_string(view.dtype), dims_string(view.dims, view.rank).c_str(),
                  view.dtype == ScalarType::F32 ? " in [-1, 1)" : view.dtype == ScalarType::Bool ? " (0 or 1)" : " (random bytes)");
    }
  }

  // --output-dir: created if missing (with its parents); each output's file name is its name made
  // safe (output_file_names), decided before running so a bad folder fails before the work.
  std::vector<std::string> output_files;
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec || !std::filesystem::is_directory(o.output_dir)) {
      fail("--output-dir " + o.output_dir + ": cannot create the folder" + (ec ? ": " + ec.message() : std::string()));
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < meta->output_count(); ++i) names.push_back(meta->output(i).value().name);
    output_files = tools::output_file_names(names);
  }

  std::unique_ptr<ProfileTracer> tracer;
  if (!o.profile.empty()) {
    tracer = std::make_unique<ProfileTracer>(static_cast<size_t>(o.iterations) * method.instruction_count());
    method.set_event_tracer(tracer.get());
  }
  std::vector<double> latencies_ms;
  latencies_ms.reserve(static_cast<size_t>(o.iterations));  // no allocation inside the timed loop
  for (int it = 0; it < o.iterations; ++it) {
    const uint64_t start = platform_now_ns();
    const Status status = method.execute(&ctx);
    const uint64_t stop = platform_now_ns();
    if (!status.is_ok()) fail(status, ctx, "execute failed");
    latencies_ms.push_back(static_cast<double>(stop - start) / 1e6);
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const double median = latencies_ms[latencies_ms.size() / 2];

  std::printf("method '%s' (%zu instructions, %d thread%s, cpu kernels %s)\n", name, method.instruction_count(),
              o.threads, o.threads == 1 ? "" : "s", kernels::cpu_target());
  for (size_t i = 0; i < method.output_count(); ++i) {
    const TensorView& out = *method.output(i);
    const TensorMeta t = meta->output(i).value();
    std::printf("  output %s: %s %s %s\n", t.name, to_string(out.dtype), dims_string(out.dims, out.rank).c_str(),
                summarize(out).c_str());
    if (!o.output_dir.empty()) {
      tools::NpyArray array;
      array.dtype = tools::npy_descr(out.dtype) ? out.dtype : ScalarType::U8;
      array.dims.assign(out.dims, out.dims + out.rank);
      if (array.dtype == ScalarType::U8 && out.dtype != ScalarType::U8) array.dims = {static_cast<int64_t>(out.nbytes())};
      const uint8_t* bytes = out.data_as<const uint8_t>();
      array.data.assign(bytes, bytes + out.nbytes());
      std::string error;
      const std::string& file = output_files[i];
      const std::string path = o.output_dir + "/" + file;
      if (!tools::write_npy(path, array, &error)) fail("--output-dir " + error);
      if (file != std::string(t.name) + ".npy") {
        std::printf("    wrote %s (output '%s': its name is not a plain file name)\n", path.c_str(), t.name);
      } else {
        std::printf("    wrote %s\n", path.c_str());
      }
    }
  }
  if (tracer) {
    method.set_event_tracer(nullptr);
    tracer->write(o.profile, method);
  }
  std::printf("latency: median %.3f ms over %d iteration%s (min %.3f, max %.3f)\n", median, o.iterations,
              o.iterations == 1 ? "" : "s", latencies_ms.front(), latencies_ms.back());
  return 0;
}

// The LLM flags' numbers, parsed strictly: the whole text must be a number in the flag's range, or
// one error line names the flag and the value (never a silent default). The ranges are
// GenerationConfig's (runtime/llm/engine.h).
struct LlmNumberFlags {
  std::string max_new_tokens, temperature, top_k, top_p, repetition_penalty, kv_blocks;
};

int64_t parse_int_flag(const char* flag, const std::string& text, int64_t lo, int64_t hi, const char* rule) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0]))) {
    fail(std::string(flag) + " '" + text + "': not an integer");
  }
  if (errno == ERANGE || v < lo || v > hi) fail(std::string(flag) + " " + text + ": " + rule);
  return v;
}

float parse_float_flag(const char* flag, const std::string& text, bool (*ok)(float), const char* rule) {
  errno = 0;
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0]))) {
    fail(std::string(flag) + " '" + text + "': not a number");
  }
  if ((errno == ERANGE && std::isinf(v)) || !ok(v)) fail(std::string(flag) + " " + text + ": " + rule);
  return v;
}

// Fills o from the flags that were given; the others keep their "program default" value.
void apply_llm_flags(const CLI::App& app, const LlmNumberFlags& f, Options* o) {
  constexpr int64_t kInt32Max = 2147483647;
  if (app.count("--prompt") > 0 && o->prompt.empty()) fail("--prompt is empty");
  if (app.count("--prompts-file") > 0 && o->prompts_file.empty()) fail("--prompts-file is empty");
  if (app.count("--prompt-ids") > 0 && o->prompt_ids.empty()) fail("--prompt-ids is empty");
  if (app.count("--dump-logits") > 0 && o->dump_logits.empty()) fail("--dump-logits is empty");
  if (app.count("--max-new-tokens") > 0) {
    o->max_new_tokens = static_cast<int>(
        parse_int_flag("--max-new-tokens", f.max_new_tokens, 1, kInt32Max, "must be in [1, 2147483647]"));
  }
  if (app.count("--top-k") > 0) {
    o->top_k = static_cast<int>(parse_int_flag("--top-k", f.top_k, 0, kInt32Max, "must be in [0, 2147483647] (0 = off)"));
  }
  if (app.count("--kv-blocks") > 0) {
    o->kv_blocks = parse_int_flag("--kv-blocks", f.kv_blocks, 1, kInt32Max, "must be in [1, 2147483647]");
  }
  if (app.count("--temperature") > 0) {
    o->temperature = parse_float_flag("--temperature", f.temperature,
                                      [](float v) { return std::isfinite(v) && v >= 0.0f; },
                                      "must be finite and >= 0 (0 = greedy)");
  }
  if (app.count("--top-p") > 0) {
    o->top_p = parse_float_flag("--top-p", f.top_p, [](float v) { return v > 0.0f && v <= 1.0f; },
                                "must be in (0, 1] (1 = off)");
  }
  if (app.count("--repetition-penalty") > 0) {
    o->repetition_penalty = parse_float_flag("--repetition-penalty", f.repetition_penalty,
                                             [](float v) { return std::isfinite(v) && v > 0.0f; },
                                             "must be finite and > 0 (1 = off)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  LlmNumberFlags llm_numbers;
  CLI::App app{"runner: load an Ember program (.pte) and run it"};
  app.set_version_flag("--version", std::string("runner (Ember) ") + kVersion + ", program format " +
                                        std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor));
  app.add_option("--program", o.program, "Program to run");
  app.add_option("--info", o.info, "Describe a program: methods, I/O, arenas, which backend runs each instruction");
  app.add_option("--method", o.method, "Method to run (default: the first)");
  app.add_option("--input", o.inputs, "Input as [name=]file.npy (repeatable); missing inputs are random");
  app.add_option("--output-dir", o.output_dir, "Write each output as <dir>/<name>.npy");
  app.add_option("--iterations", o.iterations, "Times to execute (latency = median)")->capture_default_str();
  app.add_option("--threads", o.threads, "Thread pool size, caller included")->capture_default_str();
  app.add_option("--cpu-target", o.cpu_target,
                 "Cap the cpu kernels' SIMD target (Highway name, e.g. AVX2 on an AVX-512 machine); default: the best "
                 "this CPU supports");
  app.add_option("--backends", o.backends,
                 "Backends in priority order, e.g. sim,portable: each delegate (or a method without delegates, "
                 "whole) runs on the first listed backend that supports all its instructions; 'portable' "
                 "allows the portable kernels to run what none takes. Default: the backends the program "
                 "was exported for, with fallback. This build has: " + std::string(builtin_backend_names()));
  app.add_option("--verify", o.verification, "full | structural (skip weight hashes) | trusted")->capture_default_str();
  app.add_flag("--mmap", o.mmap, "Map the file instead of reading it");
  app.add_option("--seed", o.seed, "Seed for random inputs (LLM: the sampling seed)")->capture_default_str();
  app.add_flag("--verbose", o.verbose, "Log load details (fallbacks, ...)");
  app.add_option("--profile", o.profile, "Write per-instruction timings as a Chrome trace (JSON) and print a per-op summary");
  // LLM programs (exported from a Hugging Face checkpoint folder).
  app.add_option("--prompt", o.prompt, "LLM: generate from this prompt (not empty), streaming the text; prints prefill and decode tokens/s");
  app.add_option("--prompt-ids", o.prompt_ids,
                 "LLM: generate from these token ids (comma- or space-separated, each in [0, vocab_size)) instead "
                 "of --prompt: no tokenizer needed; the output is text when there is one, else ids");
  app.add_option("--dump-logits", o.dump_logits,
                 "LLM (exported with --emit-logits): write the logits each generated token was sampled from "
                 "(row 0: at the prompt's last position, row i: after generated token i-1) as float32 .npy "
                 "[generated tokens, vocab_size]");
  app.add_option("--prompts-file", o.prompts_file,
                 "LLM: one prompt per line (empty lines are skipped), run concurrently (continuous batching)");
  app.add_flag("--chat", o.chat, "LLM: wrap the prompt in the program's chat template (ChatML, Llama-3)");
  app.add_option("--system", o.system, "LLM: a system message for --chat");
  app.add_option("--max-new-tokens", llm_numbers.max_new_tokens,
                 "LLM: tokens to generate at most, >= 1 (generation also ends at the context); default 128");
  app.add_option("--temperature", llm_numbers.temperature,
                 "LLM: finite, >= 0; 0 = greedy (default: greedy, or generation_config.json's when it samples)");
  app.add_option("--top-k", llm_numbers.top_k, "LLM: keep the k most likely tokens, >= 0 (0 = off)");
  app.add_option("--top-p", llm_numbers.top_p, "LLM: nucleus sampling threshold in (0, 1] (1 = off)");
  app.add_option("--repetition-penalty", llm_numbers.repetition_penalty, "LLM: HF repetition penalty, finite, > 0 (1 = off)");
  app.add_option("--stop", o.stops, "LLM: stop when the text contains this string (repeatable, up to 8)");
  app.add_flag("--ignore-eos", o.ignore_eos, "LLM: keep generating after an EOS token");
  app.add_flag("--warmup", o.warmup,
               "LLM: first run an untimed 2-token generation of the first prompt's ids reversed (so it "
               "shares no leading KV block with it unless the prompt is a palindrome over a block), so the "
               "timed prefill does not pay first-touch costs; the prefix-hit and preemption counts include it");
  app.add_option("--kv-blocks", llm_numbers.kv_blocks,
                 "LLM: KV cache blocks, at least one context and at most the program's maximum (the default)");
  app.add_flag("--print-ids", o.print_ids, "LLM: print the prompt and generated token ids");
  app.add_option("--tokenizer", o.tokenizer, "LLM: tokenizer.json to use instead of the program's");
  app.add_option("--encode", o.encode, "Print the token ids of TEXT (with --tokenizer or an LLM --program)");
  app.add_option("--decode", o.decode, "Print the text of space- or comma-separated token IDS");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "runner: error: %s (see --help)\n", e.what());  // one line, as every other error
    return 2;
  }
  // Errors reach the user through ErrorContext as one "runner: error: ..." line; runtime errors are
  // logged only at Debug level, so --verbose (Info) adds load details without repeating them.
  set_log_level(o.verbose ? LogLevel::Info : LogLevel::Error);
  try {
    if (!o.cpu_target.empty()) {
      ErrorContext target_ctx;
      const Status s = kernels::set_cpu_target(o.cpu_target.c_str(), &target_ctx);
      if (!s.is_ok()) fail(s, target_ctx, "--cpu-target");
    }
    apply_llm_flags(app, llm_numbers, &o);
    // Files read are noted, so that no output (--output-dir, --profile) replaces one of them.
    tools::ReadLog inputs;
    for (const std::string& path : {o.program, o.info, o.tokenizer, o.prompts_file}) {
      if (!path.empty()) inputs.add_path(path);
    }
    if (!o.info.empty()) return run_info(o);
    if (wants_llm(o)) return run_llm(o);
    if (!o.dump_logits.empty()) fail("--dump-logits needs an LLM generation: --prompt or --prompt-ids");
    if (o.program.empty()) {
      std::fprintf(stderr, "runner: error: give --program FILE or --info FILE (see --help)\n");
      return 2;
    }
    return run_program(o);
  } catch (const Failure& f) {
    std::fprintf(stderr, "runner: error: %s\n", f.message.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runner: error: %s\n", e.what());
    return 1;
  }
}
