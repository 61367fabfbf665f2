#include "tests/fuzz/fuzz_exporter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/importers/hf_llm/config.h"
#include "exporter/importers/hf_llm/safetensors.h"
#include "exporter/importers/onnx/model_proto.h"
#include "exporter/importers/onnx/onnx_importer.h"
#include "exporter/ir/graph.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/llm/tokenizer.h"
#include "runtime/platform/platform.h"
#include "onnx.pb.h"
#include "tools/common/tokenizer_json.h"

namespace ember::fuzz {
namespace {

ParserStats g_onnx, g_safetensors, g_hf_config, g_tokenizer;
std::string g_last_error;

// Largest tokenizer tables the harness builds (a 40 KB tokenizer.json needs well under 1 MiB).
constexpr size_t kMaxTokenizerBytes = size_t{64} << 20;

[[noreturn]] void finding(const char* harness, const char* kind, const char* what) {
  std::fprintf(stderr, "ember fuzz finding in %s: %s: %s\n", harness, kind, what);
  std::fflush(stderr);
  std::abort();
}

bool strict() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_FUZZ_STRICT");
    return v == nullptr || v[0] != '0';  // on unless EMBER_FUZZ_STRICT=0
  }();
  return on;
}

// Runs one parse and sorts its outcome (fuzz_exporter.h: findings vs rejections). `onnx` says that
// only ExportError is a rejection.
template <typename Fn>
void classify(const char* harness, ParserStats& stats, bool onnx, Fn&& fn) {
  ++stats.inputs;
  try {
    fn();
    ++stats.accepted;
  } catch (const std::bad_alloc& e) {
    finding(harness, "std::bad_alloc (an allocation sized by the input)", e.what());
  } catch (const std::length_error& e) {
    finding(harness, "std::length_error (an allocation sized by the input)", e.what());
  } catch (const std::logic_error& e) {
    finding(harness, "std::logic_error (a missing check)", e.what());
  } catch (const exporter::ExportError& e) {
    ++stats.rejected;
    g_last_error = e.what();
  } catch (const std::runtime_error& e) {
    if (onnx) finding(harness, "a std::runtime_error that is not an ExportError", e.what());
    ++stats.rejected;
    g_last_error = e.what();
  } catch (const std::exception& e) {
    if (onnx || strict()) finding(harness, "an exception of the wrong type (its text names no file or field)", e.what());
    ++stats.unclear;
    g_last_error = e.what();
  }
}

// Splits "first\0second" (no NUL: second is absent).
std::pair<std::string, std::optional<std::string>> split_at_nul(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {std::string(all), std::nullopt};
  return {std::string(all.substr(0, nul)), std::string(all.substr(nul + 1))};
}

struct Scratch {
  Scratch() {
    std::string base = "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
    }
    dir = base + "/ember-fuzz-" + std::to_string(::getpid());
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (::mkdir(dir.c_str(), 0700) != 0) {
      std::fprintf(stderr, "ember fuzz: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
  }
  std::string dir;
};

void quiet_runtime_logs() {
  static const bool once = [] {
    PlatformHooks hooks;
    hooks.log = [](LogLevel, const char*, int, const char*) {};
    set_platform_hooks(hooks);
    return true;
  }();
  (void)once;
}

// Folders the readers that take a directory look into (each holds only what the harness wrote).
std::string subdir(const char* name) {
  const std::string d = scratch_dir() + "/" + name;
  ::mkdir(d.c_str(), 0700);
  return d;
}

uint64_t touch(const uint8_t* p, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

// What `--input-shape` would give the importer: every dim_param becomes a symbol 1..8, an unknown
// dim 1 (without specs, most real models stop at their dynamic batch dim).
exporter::OnnxImportOptions bind_symbolic_inputs(const onnx::ModelProto& model) {
  exporter::OnnxImportOptions options;
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::set<std::string> named;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name()) || !named.insert(in.name()).second) continue;
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    const auto& shape = in.type().tensor_type().shape();
    if (shape.dim_size() > 8) continue;
    exporter::InputShapeSpec spec;
    spec.name = in.name();
    spec.text = in.name() + "=(fuzz)";
    bool symbolic = false;
    for (const auto& d : shape.dim()) {
      exporter::InputDimSpec dim;
      if (d.has_dim_value() && d.dim_value() >= 0) {
        dim.size = d.dim_value();
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        dim.symbol = d.dim_param();
        dim.min = 1;
        dim.max = 8;
        symbolic = true;
      } else {
        dim.size = 1;
        symbolic = true;
      }
      spec.dims.push_back(std::move(dim));
    }
    if (symbolic) options.input_shapes.push_back(std::move(spec));
  }
  return options;
}

void exercise_tokenizer(const tools::TokenizerData& data) {
  std::vector<llm::AddedTokenDesc> added;
  const llm::TokenizerDesc desc = tools::make_tokenizer_desc(data, &added);
  const size_t bytes = llm::Tokenizer::memory_bytes(desc);
  if (bytes > kMaxTokenizerBytes) return;
  std::vector<uint8_t> pool(bytes + 16);
  BumpAllocator allocator(Span<uint8_t>(pool.data(), pool.size()));
  ErrorContext ctx;
  Result<llm::Tokenizer> loaded = llm::Tokenizer::load(desc, allocator, &ctx);
  if (!loaded.is_ok()) throw std::runtime_error(std::string("Tokenizer::load: ") + ctx.message);
  const llm::Tokenizer& tok = *loaded;
  std::vector<std::string> texts = {"Hello, world! 123 4567", "  indented\n\tline\r\n", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                    "e\xcc\x81", "\xff\xfe bad utf-8", ""};
  for (const tools::TokenizerData::AddedToken& a : data.added_tokens) {
    if (texts.size() >= 10) break;
    texts.push_back("x" + a.content + "y " + a.content);
  }
  std::vector<int32_t> all_ids;
  for (const std::string& text : texts) {
    std::vector<int32_t> ids(tok.max_token_count(text.size()));
    std::vector<uint8_t> scratch(tok.encode_scratch_bytes(text.size()));
    Result<size_t> n = tok.encode(text, Span<int32_t>(ids.data(), ids.size()), Span<uint8_t>(scratch.data(), scratch.size()),
                                  /*add_special_tokens=*/true, &ctx);
    if (!n.is_ok()) continue;  // ill-formed UTF-8 is refused, as documented
    ids.resize(*n);
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
  }
  // Every id once (up to a bound), then the encoded ones, then two that are out of range.
  for (size_t id = 0; id < tok.token_count() && id < 512; ++id) all_ids.push_back(static_cast<int32_t>(id));
  std::vector<char> text(3 * (tok.max_token_bytes() + 3) * (all_ids.size() + 2));
  for (bool skip : {false, true}) {
    (void)tok.decode(Span<const int32_t>(all_ids.data(), all_ids.size()), Span<char>(text.data(), text.size()), skip, &ctx);
  }
  const int32_t bad[] = {-1, static_cast<int32_t>(tok.token_count())};
  (void)tok.decode(Span<const int32_t>(bad, 2), Span<char>(text.data(), text.size()), false, &ctx);
  llm::StreamDecoder stream(tok);
  std::vector<char> piece(stream.max_push_bytes());
  for (int32_t id : all_ids) (void)stream.push(id, Span<char>(piece.data(), piece.size()), &ctx);
  (void)stream.flush(Span<char>(piece.data(), piece.size()), &ctx);
  for (size_t i = 0; i < tok.token_count() && i < 64; ++i) {
    const Span<const uint8_t> b = tok.token_bytes(static_cast<uint32_t>(i));
    (void)tok.find_token(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
  }
}

}  // namespace

const ParserStats& onnx_stats() { return g_onnx; }
const ParserStats& safetensors_stats() { return g_safetensors; }
const ParserStats& hf_config_stats() { return g_hf_config; }
const ParserStats& tokenizer_stats() { return g_tokenizer; }
const std::string& last_error() { return g_last_error; }

const std::string& scratch_dir() {
  static Scratch* s = new Scratch();  // never destroyed: the atexit hook reads it
  return s->dir;
}

std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  if (name.empty()) std::abort();
  const std::string path = scratch_dir() + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "ember fuzz: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    std::abort();
  }
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::fprintf(stderr, "ember fuzz: writing %s failed: %s\n", path.c_str(), std::strerror(errno));
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

void remove_scratch_file(const std::string& name) { ::unlink((scratch_dir() + "/" + name).c_str()); }

int onnx_one(const uint8_t* data, size_t size) {
  static const bool weights = [] {
    uint8_t bytes[256];
    for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
    write_scratch_file("weights.bin", bytes, sizeof(bytes));
    return true;
  }();
  (void)weights;
  quiet_runtime_logs();  // the shape functions log what they refuse; the ExportError says it too
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  classify("ember_fuzz_onnx", g_onnx, /*onnx=*/true, [&] {
    onnx::ModelProto model;
    exporter::parse_onnx_model(bytes, "fuzz input", &model);
    exporter::OnnxImport imported = exporter::import_onnx_model(model, scratch_dir(), bind_symbolic_inputs(model));
    imported.graph.check_structure();
  });
  return 0;
}

size_t onnx_mutate(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                   size_t (*byte_mutate)(uint8_t*, size_t, size_t)) {
  std::mt19937 rng(seed);
  onnx::ModelProto model;
  // Half the time, or when the input is not a ModelProto: libFuzzer's own byte-level mutations.
  if ((rng() & 1) == 0 || !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph()) {
    return byte_mutate(data, size, max_size);
  }
  static const int64_t kInteresting[] = {0, 1, 2, 3, -1, -2, 7, 8, 255, 256, 4097, 65535, int64_t{1} << 31,
                                         (int64_t{1} << 31) - 1, int64_t{1} << 32, int64_t{1} << 40, int64_t{1} << 62,
                                         INT64_MAX, INT64_MIN};
  static const char* const kOps[] = {
      "Constant", "Identity", "Shape", "Size", "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Relu",
      "Softmax", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "LayerNormalization", "Flatten",
      "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Slice", "Split", "Gather", "Where", "Equal", "Cast",
      "Expand", "Pad", "ReduceMean", "ReduceSum", "ReduceL2", "ConstantOfShape", "Range", "ScatterND", "Einsum", "Not",
      "Mod", "Less", "Min", "Max", "ReduceProd", "Clip", "Gelu", "If"};
  static const char* const kAttrs[] = {"axis", "axes", "perm", "to", "kernel_shape", "strides", "pads", "dilations",
                                       "group", "transB", "alpha", "beta", "epsilon", "keepdims", "split", "value",
                                       "mode", "equation", "auto_pad", "ceil_mode", "num_outputs", "start", "end"};
  auto pick = [&](size_t n) { return static_cast<int>(rng() % n); };
  auto interesting = [&] {
    return (rng() & 1) ? kInteresting[pick(sizeof(kInteresting) / sizeof(kInteresting[0]))]
                       : static_cast<int64_t>(rng() % 17) - 4;
  };
  onnx::GraphProto& g = *model.mutable_graph();
  // Every value name, for rewiring inputs.
  std::vector<std::string> names;
  for (const auto& in : g.input()) names.push_back(in.name());
  for (const auto& init : g.initializer()) names.push_back(init.name());
  for (const auto& n : g.node()) names.insert(names.end(), n.output().begin(), n.output().end());
  const int steps = 1 + pick(3);
  for (int step = 0; step < steps; ++step) {
    switch (pick(8)) {
      case 0: {  // an initializer's dims or data type
        if (g.initializer_size() == 0) break;
        onnx::TensorProto& t = *g.mutable_initializer(pick(static_cast<size_t>(g.initializer_size())));
        if ((rng() & 3) == 0) {
          t.set_data_type(pick(27));
        } else if (t.dims_size() > 0 && (rng() & 1)) {
          t.set_dims(pick(static_cast<size_t>(t.dims_size())), interesting());
        } else {
          t.add_dims(interesting());
        }
        break;
      }
      case 1: {  // a node's op type
        if (g.node_size() == 0) break;
        g.mutable_node(pick(static_cast<size_t>(g.node_size())))->set_op_type(kOps[pick(sizeof(kOps) / sizeof(kOps[0]))]);
        break;
      }
      case 2:
      case 3: {  // an attribute's numbers (or a new attribute)
        if (g.node_size() == 0) break;
        onnx::NodeProto& n = *g.mutable_node(pick(static_cast<size_t>(g.node_size())));
        onnx::AttributeProto* a = n.attribute_size() > 0 && (rng() & 3) != 0
                                      ? n.mutable_attribute(pick(static_cast<size_t>(n.attribute_size())))
                                      : n.add_attribute();
        if (a->name().empty()) a->set_name(kAttrs[pick(sizeof(kAttrs) / sizeof(kAttrs[0]))]);
        if (a->ints_size() > 0 && (rng() & 1)) {
          a->set_ints(pick(static_cast<size_t>(a->ints_size())), interesting());
        } else if (a->has_t() && a->t().dims_size() > 0) {
          a->mutable_t()->set_dims(pick(static_cast<size_t>(a->t().dims_size())), interesting());
        } else {
          const int kind = pick(3);
          a->set_type(kind == 0 ? onnx::AttributeProto::INT : kind == 1 ? onnx::AttributeProto::INTS : onnx::AttributeProto::FLOAT);
          if (kind == 0) a->set_i(interesting());
          if (kind == 1) a->add_ints(interesting());
          if (kind == 2) a->set_f(static_cast<float>(interesting()));
        }
        break;
      }
      case 4: {  // rewire a node input, or drop one
        if (g.node_size() == 0 || names.empty()) break;
        onnx::NodeProto& n = *g.mutable_node(pick(static_cast<size_t>(g.node_size())));
        if (n.input_size() > 0 && (rng() & 3) == 0) {
          n.mutable_input()->RemoveLast();
        } else if (n.input_size() > 0) {
          n.set_input(pick(static_cast<size_t>(n.input_size())), names[pick(names.size())]);
        } else {
          n.add_input(names[pick(names.size())]);
        }
        break;
      }
      case 5: {  // a graph input's dims
        if (g.input_size() == 0) break;
        auto* shape = g.mutable_input(pick(static_cast<size_t>(g.input_size())))->mutable_type()->mutable_tensor_type()->mutable_shape();
        if (shape->dim_size() > 0 && (rng() & 1)) {
          auto* d = shape->mutable_dim(pick(static_cast<size_t>(shape->dim_size())));
          if (rng() & 1) d->set_dim_value(interesting());
          else d->set_dim_param((rng() & 1) ? "batch" : "seq");
        } else {
          shape->add_dim()->set_dim_value(1 + pick(4));
        }
        break;
      }
      case 6: {  // the default-domain opset
        for (auto& op : *model.mutable_opset_import()) {
          if (op.domain().empty()) op.set_version(9 + pick(14));
        }
        break;
      }
      default: {  // move a node (topological order) or duplicate one
        if (g.node_size() < 2) break;
        const int a = pick(static_cast<size_t>(g.node_size())), b = pick(static_cast<size_t>(g.node_size()));
        if (rng() & 1) g.mutable_node()->SwapElements(a, b);
        else *g.add_node() = g.node(a);
        break;
      }
    }
  }
  const std::string out = model.SerializeAsString();
  if (out.size() > max_size) return byte_mutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

int safetensors_one(const uint8_t* data, size_t size) {
  static const std::string dir = subdir("safetensors");
  write_scratch_file("safetensors/model.safetensors", data, size);
  classify("ember_fuzz_safetensors", g_safetensors, /*onnx=*/false, [&] {
    exporter::hf::Checkpoint ckpt = exporter::hf::Checkpoint::open(dir);
    uint64_t sum = 0;
    for (const std::string& name : ckpt.leftovers()) {
      const exporter::hf::SafeTensor& t = ckpt.take(name);
      if (t.numel() < 0) std::abort();
      sum += touch(t.data, t.nbytes);
    }
    if (!ckpt.leftovers().empty()) std::abort();
    (void)sum;
  });
  return 0;
}

int hf_config_one(const uint8_t* data, size_t size) {
  static const std::string dir = subdir("hf_config");
  auto [config, generation] = split_at_nul(data, size);
  write_scratch_file("hf_config/config.json", reinterpret_cast<const uint8_t*>(config.data()), config.size());
  if (generation) {
    write_scratch_file("hf_config/generation_config.json", reinterpret_cast<const uint8_t*>(generation->data()),
                       generation->size());
  } else {
    remove_scratch_file("hf_config/generation_config.json");
  }
  classify("ember_fuzz_hf_config", g_hf_config, /*onnx=*/false, [&] {
    const exporter::hf::LlmConfig c = exporter::hf::load_config(dir);
    const std::vector<float> inv = exporter::hf::rope_inv_freq(c);
    if (inv.size() != static_cast<size_t>(c.head_dim / 2)) std::abort();
  });
  return 0;
}

int tokenizer_one(const uint8_t* data, size_t size) {
  quiet_runtime_logs();
  const auto files = split_at_nul(data, size);  // tokenizer.json, tokenizer_config.json
  classify("ember_fuzz_tokenizer", g_tokenizer, /*onnx=*/false, [&] {
    const tools::TokenizerData parsed =
        tools::parse_tokenizer_json(files.first, files.second.value_or(""), "fuzz/tokenizer.json");
    exercise_tokenizer(parsed);
  });
  return 0;
}

}  // namespace ember::fuzz
