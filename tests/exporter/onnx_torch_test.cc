// Models exported by torch.onnx.export at test time (tests/exporter/data/onnx/make_torch_models.py,
// /usr/bin/python3 with Debian's python3-torch): imported, run on the reference evaluator, compared
// with PyTorch's output (also after the pipeline's passes: the GELU fusion); and the `exporter` CLI on
// the same files. Skipped without python3-torch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "exporter/cli/cli.h"
#include "exporter/importers/onnx/onnx_importer.h"
#include "exporter/passes/evaluate.h"
#include "exporter/plan/overlap_check.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

namespace fs = std::filesystem;

// Runs the export script once per test binary; "" when torch is unavailable.
const std::string& torch_models_dir() {
  static const std::string dir = [] {
    const fs::path out = fs::temp_directory_path() / ("ember_onnx_torch_" + std::to_string(::getpid()));
    if (!fs::exists("/usr/bin/python3")) return std::string();
    const std::string cmd = "/usr/bin/python3 " + testing::test_data_path("onnx/make_torch_models.py") + " " +
                            out.string() + " > " + out.string() + ".log 2>&1";
    const int rc = std::system(cmd.c_str());
    if (rc != 0) return std::string();
    return out.string();
  }();
  return dir;
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<int64_t> read_shape(const std::string& path) {
  std::ifstream in(path);
  std::vector<int64_t> dims;
  int64_t d;
  while (in >> d) dims.push_back(d);
  return dims;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct Case {
  const char* model;
  int opset;
  const char* shape;  // --input-shape
};

class TorchExportTest : public ::testing::TestWithParam<Case> {};

TEST_P(TorchExportTest, MatchesPyTorch) {
  const std::string& dir = torch_models_dir();
  ASSERT_FALSE(dir.empty()) << "making the PyTorch test models failed: run scripts/setup.sh (python3-torch, python3-onnx)";
  const Case c = GetParam();
  const std::string base = dir + "/" + c.model;
  OnnxImportOptions options;
  options.input_shapes = parse_input_shapes({c.shape});
  OnnxImport imp = import_onnx_file(base + "_opset" + std::to_string(c.opset) + ".onnx", options);
  EXPECT_EQ(imp.stats.opset, c.opset);
  if (std::string(c.model) == "tiny_cnn" && c.opset == 13) {
    EXPECT_EQ(imp.stats.folded_batch_norms, 4);
  }
  for (const Node& n : imp.graph.nodes) EXPECT_NE(n.op, OpCode::BatchNorm) << n.name;
  const std::vector<int64_t> dims = read_shape(base + "_shape.txt");
  const std::vector<float> x = read_f32(base + "_input.bin"), expected = read_f32(base + "_output.bin");
  const std::vector<HostTensor> out = evaluate(imp.graph, {HostTensor::from_f32(dims, x)});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> actual = out[0].to_f32();
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_LE(rel_l2(actual, expected), 1e-4);
  // The batch stays symbolic: every reshape names the symbol instead of a baked-in 2.
  const int batch = imp.graph.find_symbol("batch");
  ASSERT_NE(batch, 0);
  for (const Node& n : imp.graph.nodes) {
    if (n.op == OpCode::Reshape) {
      EXPECT_EQ(n.attrs.shape_sym[0], batch) << n.name;
    }
  }
  // And it runs at another batch size (the first output row must not change).
  std::vector<int64_t> one = dims;
  one[0] = 1;
  std::vector<float> x1(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(x.size() / static_cast<size_t>(dims[0])));
  const std::vector<float> y1 = evaluate(imp.graph, {HostTensor::from_f32(one, x1)})[0].to_f32();
  std::vector<float> e1(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(y1.size()));
  EXPECT_LE(rel_l2(y1, e1), 1e-4);

  // The pipeline's GELU fusion on torch's own spelling of nn.GELU() (tiny_attention has one; at
  // opset 13 its constants are Constant nodes, at 17 folded by torch): one gelu node, no erf left,
  // and the fused graph still matches PyTorch.
  const ExportResult r = export_graph(imp.graph, ExportOptions{});
  const int gelus = std::string(c.model) == "tiny_attention" ? 1 : 0;
  EXPECT_EQ(r.gelus_fused, gelus);
  int gelu_nodes = 0, erf_nodes = 0;
  for (const Node& n : r.graph.nodes) {
    gelu_nodes += n.op == OpCode::Gelu;
    erf_nodes += n.op == OpCode::Erf;
  }
  EXPECT_EQ(gelu_nodes, gelus);
  EXPECT_EQ(erf_nodes, 0);
  const std::vector<float> fused = evaluate(r.graph, {HostTensor::from_f32(dims, x)}).at(0).to_f32();
  ASSERT_EQ(fused.size(), expected.size());
  EXPECT_LE(rel_l2(fused, expected), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Models, TorchExportTest,
                         ::testing::Values(Case{"tiny_cnn", 13, "input=batch:1..8x3x16x16"},
                                           Case{"tiny_cnn", 17, "input=batch:1..8x3x16x16"},
                                           Case{"tiny_attention", 13, "input=batch:1..4xseq:1..32x16"},
                                           Case{"tiny_attention", 17, "input=batch:1..4xseq:1..32x16"}),
                         [](const auto& info) {
                           return std::string(info.param.model) + "_opset" + std::to_string(info.param.opset);
                         });

struct CliRun {
  int code = 0;
  std::string out, err;
};

CliRun run_exporter(std::vector<std::string> args) {
  args.insert(args.begin(), "exporter");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CliRun r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(OnnxCliTest, ExportsATorchModelAndPrintsTheSummary) {
  const std::string& dir = torch_models_dir();
  ASSERT_FALSE(dir.empty()) << "making the PyTorch test models failed: run scripts/setup.sh (python3-torch, python3-onnx)";
  const std::string path = testing::temp_path("tiny_cnn.pte");
  const std::string manifest = testing::test_data_path("test_manifest.json");
  const CliRun r = run_exporter({dir + "/tiny_cnn_opset13.onnx", "-o", path, "--input-shape", "input=batch:1..8x3x16x16",
                                 "--manifest", manifest});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"onnx: opset 13", "import: 4 BatchNorm folded", "symbols: batch 1..8", "ops:", "backends:",
                           "weights:", "arenas:", "planned peak", "time:", "total:"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(testing::validate_with_runtime(file), "");
  const auto violations = check_overlaps(file);
  EXPECT_TRUE(violations.empty()) << violations.front();
  std::remove(path.c_str());

  // Errors: one line, exit 1.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {dir + "/tiny_cnn_opset13.onnx", "-o", path, "--manifest", manifest},  // symbolic batch without bounds
           {dir + "/tiny_cnn_opset13.onnx", "-o", path, "--input-shape", "input=1x3x15x16", "--manifest", manifest},
           {dir + "/tiny_cnn_opset13.onnx", "-o", path, "--input-shape", "nope=1", "--manifest", manifest},
           {dir + "/tiny_cnn_opset13.onnx", "--example", "mlp", "-o", path},
           {"/nonexistent.onnx", "-o", path, "--manifest", manifest},
       }) {
    const CliRun e = run_exporter(args);
    EXPECT_EQ(e.code, 1) << args[0];
    EXPECT_EQ(e.err.rfind("exporter: error: ", 0), 0u) << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
  }
  EXPECT_FALSE(fs::exists(path));  // no program is written when export fails
}

TEST(OnnxCliTest, TheSummaryCountsFusedGelus) {
  const std::string& dir = torch_models_dir();
  ASSERT_FALSE(dir.empty()) << "making the PyTorch test models failed: run scripts/setup.sh (python3-torch, python3-onnx)";
  const std::string path = testing::temp_path("tiny_attention.pte");
  // The test manifest has no erf kernel: only the fused model exports with it.
  const CliRun r = run_exporter({dir + "/tiny_attention_opset17.onnx", "-o", path, "--input-shape",
                                 "input=batch:1..4xseq:1..32x16", "--manifest", testing::test_data_path("test_manifest.json"),
                                 "--verbose"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("onnx: opset 17, ir 8, producer pytorch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" Erf x1 "), std::string::npos) << r.out;  // the ONNX histogram
  EXPECT_NE(r.out.find("dead nodes removed, 1 gelus fused\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gelu               /ff/ff.1/Mul_1 -> portable\n"), std::string::npos) << r.out;
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(testing::validate_with_runtime(file), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember::exporter
