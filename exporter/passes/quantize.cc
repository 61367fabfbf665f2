#include "exporter/passes/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>

#include "kernels/reference/quantize.h"
#include "runtime/core/float_codecs.h"

namespace ember::exporter {
namespace {

namespace ref = kernels::reference;

constexpr int64_t kFp8Block = 128;

bool glob_match(const char* p, const char* s) {
  for (; *p != '\0'; ++p, ++s) {
    if (*p == '*') {
      while (p[1] == '*') ++p;
      for (const char* t = s;; ++t) {
        if (glob_match(p + 1, t)) return true;
        if (*t == '\0') return false;
      }
    }
    if (*s == '\0' || (*p != '?' && *p != *s)) return false;
  }
  return *s == '\0';
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& p : patterns) {
    if (glob_match(p.c_str(), name.c_str())) return true;
  }
  return false;
}

double sqnr_db(double signal, double noise) {
  if (noise == 0) return std::numeric_limits<double>::infinity();
  if (signal == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

void check(const Status& s, const std::string& what) {
  if (!s.is_ok()) throw ExportError("quantize: " + what + " failed (" + to_string(s.code()) + ")");
}

// One quantized weight: the IR parameters and its exact dequantization (what the kernels compute with).
struct Quantized {
  ScalarType dtype = ScalarType::Invalid;
  std::vector<uint8_t> codes;
  QuantParams params;
  std::vector<float> dequantized;
};

Quantized quantize_weight(QuantPreset preset, const std::vector<float>& w, int64_t n, int64_t k) {
  Quantized q;
  q.dequantized.resize(w.size());
  const size_t count = static_cast<size_t>(n * k);
  switch (preset) {
    case QuantPreset::Fp8:
    case QuantPreset::Fp8Dynamic:
    case QuantPreset::Fp8Block: {
      const int64_t bn = preset == QuantPreset::Fp8Block ? kFp8Block : 1;
      const int64_t bk = preset == QuantPreset::Fp8Block ? kFp8Block : k;
      const int64_t rows = (n + bn - 1) / bn, cols = (k + bk - 1) / bk;
      q.dtype = ScalarType::F8E4M3FN;
      q.codes.resize(count);
      std::vector<float> scales(static_cast<size_t>(rows * cols));
      check(ref::quantize_fp8_e4m3(w.data(), n, k, bn, bk, q.codes.data(), scales.data()), "fp8 quantization");
      check(ref::dequantize_fp8_e4m3(q.codes.data(), n, k, bn, bk, scales.data(), q.dequantized.data()), "fp8 dequantization");
      q.params.scale_dtype = ScalarType::F32;
      q.params.block = {bn, bk};
      q.params.scale_dims = {rows, cols};
      auto bytes = std::make_shared<std::vector<uint8_t>>(scales.size() * 4);
      std::memcpy(bytes->data(), scales.data(), bytes->size());
      q.params.scale = std::move(bytes);
      break;
    }
    case QuantPreset::Mxfp8: {
      q.dtype = ScalarType::F8E4M3FN;
      q.codes.resize(count);
      auto scales = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * (k / ref::kMxfp8Block)));
      check(ref::quantize_mxfp8(w.data(), n, k, q.codes.data(), scales->data()), "mxfp8 quantization");
      check(ref::dequantize_mxfp8(q.codes.data(), n, k, scales->data(), q.dequantized.data()), "mxfp8 dequantization");
      q.params.scale_dtype = ScalarType::E8M0;
      q.params.block = {1, ref::kMxfp8Block};
      q.params.scale_dims = {n, k / ref::kMxfp8Block};
      q.params.scale = std::move(scales);
      break;
    }
    case QuantPreset::Nvfp4: {
      q.dtype = ScalarType::F4E2M1;
      q.codes.resize(count / 2);
      auto scales = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * (k / ref::kNvfp4Block)));
      float g = 1.0f;
      check(ref::quantize_nvfp4(w.data(), n, k, q.codes.data(), scales->data(), &g), "nvfp4 quantization");
      check(ref::dequantize_nvfp4(q.codes.data(), n, k, scales->data(), g, q.dequantized.data()), "nvfp4 dequantization");
      q.params.scale_dtype = ScalarType::UE4M3;
      q.params.block = {1, ref::kNvfp4Block};
      q.params.scale_dims = {n, k / ref::kNvfp4Block};
      q.params.scale = std::move(scales);
      q.params.has_global_scale = true;
      q.params.global_scale = g;
      break;
    }
  }
  return q;
}

// FP8 per-token fake quantization of a linear's input (rows along the last dim), as the W8A8 kernels
// quantize activations: s = amax / 448 (1 when 0), x ≈ f32(e4m3(x / s)) · s.
void fake_quant_per_token(HostTensor& x) {
  std::vector<float> v = x.to_f32();
  const size_t k = x.dims.empty() ? 1 : static_cast<size_t>(x.dims.back());
  for (size_t row = 0; k > 0 && row < v.size() / k; ++row) {
    float amax = 0;
    for (size_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(v[row * k + j]));
    float s = amax / 448.0f;
    if (s == 0) s = 1.0f;
    for (size_t j = 0; j < k; ++j) v[row * k + j] = e4m3fn_to_f32(f32_to_e4m3fn(v[row * k + j] / s)) * s;
  }
  x = HostTensor::from_f32(x.dims, v);
}

}  // namespace

QuantPreset parse_quant_preset(const std::string& name) {
  for (QuantPreset p : {QuantPreset::Fp8, QuantPreset::Fp8Block, QuantPreset::Fp8Dynamic, QuantPreset::Mxfp8,
                        QuantPreset::Nvfp4}) {
    if (name == to_string(p)) return p;
  }
  throw ExportError("--quantize '" + name + "': expected fp8, fp8-block, fp8-dynamic, mxfp8 or nvfp4");
}

const char* to_string(QuantPreset preset) {
  switch (preset) {
    case QuantPreset::Fp8: return "fp8";
    case QuantPreset::Fp8Block: return "fp8-block";
    case QuantPreset::Fp8Dynamic: return "fp8-dynamic";
    case QuantPreset::Mxfp8: return "mxfp8";
    case QuantPreset::Nvfp4: return "nvfp4";
  }
  return "?";
}

QuantizeReport quantize_graph(Graph& graph, const QuantizeOptions& options) {
  QuantizeReport report;
  report.preset = options.preset;
  const Graph original = graph;  // the f32 model, for the output SQNR
  std::map<int, int> replaced;   // f32 weight id -> quantized value id (weights shared by linears)
  std::map<int, HostTensor> dequantized;  // quantized value id -> what the kernels compute with
  std::map<int, size_t> layer_of;         // node index -> report row
  std::vector<char> w8a8(graph.nodes.size(), 0);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    if (node.op != OpCode::Linear || node.inputs.size() < 2 || node.inputs[1] < 0) continue;
    const int wid = node.inputs[1];
    const Value& w = graph.values[static_cast<size_t>(wid)];
    // f32 weights, and bf16 / f16 ones (LLM checkpoints: widened exactly here, kept as they are
    // when the layer is skipped).
    const bool wide = w.dtype == ScalarType::F32 || w.dtype == ScalarType::BF16 || w.dtype == ScalarType::F16;
    if (!w.is_constant() || !wide || w.dims.size() != 2 || w.quant) continue;
    QuantLayerReport row;
    row.node = node.name;
    row.n = w.dims[0].max;
    row.k = w.dims[1].max;
    const bool included = options.include.empty() || matches_any(options.include, node.name);
    if (matches_any(options.exclude, node.name)) {
      row.skipped = "excluded by --quantize-exclude";
    } else if (!included) {
      row.skipped = "not matched by --quantize-include";
    } else if (options.include.empty() && std::min(row.n, row.k) < options.min_size) {
      row.skipped = "min(N, K) = " + std::to_string(std::min(row.n, row.k)) + " < " + std::to_string(options.min_size);
    } else if (options.preset == QuantPreset::Mxfp8 && row.k % ref::kMxfp8Block != 0) {
      row.skipped = "K = " + std::to_string(row.k) + " is not a multiple of 32";
    } else if (options.preset == QuantPreset::Nvfp4 && row.k % ref::kNvfp4Block != 0) {
      row.skipped = "K = " + std::to_string(row.k) + " is not a multiple of 16";
    }
    if (!row.skipped.empty()) {
      report.layers.push_back(row);
      continue;
    }
    std::vector<float> wf(static_cast<size_t>(row.n * row.k));
    for (size_t i = 0; i < wf.size(); ++i) {
      uint16_t h = 0;
      if (w.dtype == ScalarType::F32) {
        std::memcpy(&wf[i], w.data->data() + 4 * i, 4);
        continue;
      }
      std::memcpy(&h, w.data->data() + 2 * i, 2);
      wf[i] = w.dtype == ScalarType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    // Only reachable with ExportOptions::allow_non_finite_weights (the pipeline refuses them
    // otherwise): the scales of such a weight would be NaN, so it stays as it is.
    const size_t bad = static_cast<size_t>(std::count_if(wf.begin(), wf.end(), [](float x) { return !std::isfinite(x); }));
    if (bad != 0) {
      row.skipped = std::to_string(bad) + " non-finite weight(s)";
      report.layers.push_back(row);
      continue;
    }
    auto it = replaced.find(wid);
    if (it == replaced.end()) {
      Quantized q = quantize_weight(options.preset, wf, row.n, row.k);
      Value qv;
      qv.name = w.name + "." + to_string(options.preset);
      qv.dtype = q.dtype;
      qv.dims = {Dim{row.n, 0}, Dim{row.k, 0}};
      qv.data = std::make_shared<const std::vector<uint8_t>>(std::move(q.codes));
      qv.quant = std::make_shared<const QuantParams>(std::move(q.params));
      report.f32_weight_bytes += w.data->size();
      report.quantized_weight_bytes += qv.data->size() + qv.quant->scale->size() + (qv.quant->has_global_scale ? 4 : 0);
      const int id = graph.add_value(std::move(qv));
      dequantized[id] = HostTensor::from_f32({row.n, row.k}, q.dequantized);
      it = replaced.emplace(wid, id).first;
    }
    double signal = 0, noise = 0;
    const std::vector<float> dq = dequantized.at(it->second).to_f32();
    for (size_t i = 0; i < wf.size(); ++i) {
      signal += static_cast<double>(wf[i]) * wf[i];
      noise += (static_cast<double>(wf[i]) - dq[i]) * (static_cast<double>(wf[i]) - dq[i]);
    }
    row.weight_sqnr_db = sqnr_db(signal, noise);
    row.output_sqnr_db = std::numeric_limits<double>::quiet_NaN();
    row.quantized = true;
    node.inputs[1] = it->second;
    if (options.preset == QuantPreset::Fp8Dynamic) {
      node.attrs.activation_quant = ActivationQuant::Fp8PerToken;
      w8a8[n] = 1;
    }
    layer_of[n] = report.layers.size();
    report.layers.push_back(row);
  }
  remove_dead_code(graph);  // the f32 weights nothing reads any more

  std::vector<std::vector<HostTensor>> samples = options.samples;
  try {
    for (int i = 0; options.samples.empty() && i < options.random_samples; ++i) {
      samples.push_back(make_sample_inputs(original, static_cast<uint32_t>(i + 1)));
    }
  } catch (const ExportError& e) {
    report.samples_note = std::string("output SQNR not measured: ") + e.what();
    return report;
  }
  if (samples.empty() || layer_of.empty()) {
    report.samples_note = layer_of.empty() ? "no layer quantized" : "no sample inputs: output SQNR not measured";
    return report;
  }
  // Output SQNR: the original graph, once with its f32 weights and once with the dequantized ones.
  std::map<int, HostTensor> simulated;
  for (size_t n = 0; n < original.nodes.size(); ++n) {
    if (!layer_of.count(n)) continue;
    const int original_w = original.nodes[n].inputs[1];
    simulated[original_w] = dequantized.at(replaced.at(original_w));
  }
  std::vector<double> signal(original.nodes.size(), 0), noise(original.nodes.size(), 0);
  try {
    EvaluateOptions quantized;
    quantized.constants = &simulated;
    quantized.before_node = [&](size_t n, std::vector<const HostTensor*>& ins, std::vector<HostTensor>& keep) {
      if (!w8a8[n] || ins[0] == nullptr) return;
      keep.push_back(*ins[0]);
      fake_quant_per_token(keep.back());
      ins[0] = &keep.back();
    };
    for (const std::vector<HostTensor>& sample : samples) {
      const auto f32 = evaluate_all(original, sample);
      const auto q = evaluate_all(original, sample, quantized);
      for (const auto& [n, row] : layer_of) {
        const int out = original.nodes[n].outputs[0];
        const std::vector<float> a = f32[static_cast<size_t>(out)]->to_f32(), b = q[static_cast<size_t>(out)]->to_f32();
        for (size_t i = 0; i < a.size(); ++i) {
          signal[n] += static_cast<double>(a[i]) * a[i];
          noise[n] += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        }
      }
    }
  } catch (const ExportError& e) {
    report.samples_note = std::string("output SQNR not measured: evaluating a sample failed: ") + e.what();
    return report;
  }
  for (const auto& [n, row] : layer_of) report.layers[row].output_sqnr_db = sqnr_db(signal[n], noise[n]);
  report.samples_note = "output SQNR over " + std::to_string(samples.size()) + " sample input(s)" +
                        (options.samples.empty() ? " (random, symbols at their min)" : "");
  return report;
}

std::vector<HostTensor> make_sample_inputs(const Graph& graph, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 7);
  std::vector<HostTensor> out;
  for (const NamedValue& nv : graph.inputs) {
    const Value& v = graph.values[static_cast<size_t>(nv.value)];
    HostTensor t;
    t.dtype = v.dtype;
    for (const Dim& d : v.dims) {
      t.dims.push_back(d.sym == 0 ? d.max : std::max<int64_t>(1, graph.symbols[d.sym - 1u].min));
    }
    const size_t n = static_cast<size_t>(t.numel());
    t.bytes.resize(nbytes_of(v.dtype, n));
    for (size_t i = 0; i < n; ++i) {
      switch (v.dtype) {
        case ScalarType::F32: { const float x = normal(rng); std::memcpy(t.bytes.data() + i * 4, &x, 4); break; }
        case ScalarType::I64: { const int64_t x = small(rng); std::memcpy(t.bytes.data() + i * 8, &x, 8); break; }
        case ScalarType::I32: { const int32_t x = small(rng); std::memcpy(t.bytes.data() + i * 4, &x, 4); break; }
        case ScalarType::Bool: t.bytes[i] = 1; break;
        default: throw ExportError("quantize: no sample data for input '" + nv.name + "' of dtype " + to_string(v.dtype));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string format_quantize_report(const QuantizeReport& r) {
  std::string s;
  char buf[512];
  int quantized = 0;
  for (const QuantLayerReport& l : r.layers) quantized += l.quantized;
  std::snprintf(buf, sizeof(buf), "quantize %s: %d of %zu linear layers; their weights %llu -> %llu bytes (%s)\n",
                to_string(r.preset), quantized, r.layers.size(), static_cast<unsigned long long>(r.f32_weight_bytes),
                static_cast<unsigned long long>(r.quantized_weight_bytes), r.samples_note.c_str());
  s += buf;
  for (const QuantLayerReport& l : r.layers) {
    if (l.quantized) {
      std::snprintf(buf, sizeof(buf), "  %-40s [%lld, %lld]  weight SQNR %6.2f dB  output SQNR %6.2f dB\n", l.node.c_str(),
                    static_cast<long long>(l.n), static_cast<long long>(l.k), l.weight_sqnr_db, l.output_sqnr_db);
    } else {
      std::snprintf(buf, sizeof(buf), "  %-40s [%lld, %lld]  kept as is: %s\n", l.node.c_str(), static_cast<long long>(l.n),
                    static_cast<long long>(l.k), l.skipped.c_str());
    }
    s += buf;
  }
  return s;
}

}  // namespace ember::exporter
