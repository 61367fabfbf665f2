// The exporter against hostile and careless input (issue #14): deep JSON in every JSON file it
// reads, FIFOs where files belong, paths inside model files that leave the model's folder (by "..",
// an absolute path or a symlink), -o naming an input, and failed exports. Each case is one error
// line and exit code 1, never a crash, a hang (ctest TIMEOUT) or a partial output.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "exporter/cli/cli.h"
#include "tests/exporter/onnx_test_util.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

namespace fs = std::filesystem;
using testing::OnnxModel;

struct CliRun {
  int code = 0;
  std::string out, err;
};

CliRun run(std::vector<std::string> args) {
  args.insert(args.begin(), "exporter");
  args.push_back("--manifest");
  args.push_back(testing::test_data_path("test_manifest.json"));
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CliRun r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string deep_arrays() { return std::string(100000, '[') + std::string(100000, ']'); }

std::string deep_objects() {
  std::string s;
  for (int i = 0; i < 100000; ++i) s += "{\"a\":";
  return s + "1" + std::string(100000, '}');
}

// A config.json the importer accepts (the failures under test come after it).
constexpr const char* kConfig =
    R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 16})";

// A safetensors file: 8-byte little-endian header length, the header, `data` zero bytes.
std::string safetensors(const std::string& header, size_t data = 0) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  return out + header + std::string(data, '\0');
}

// One error line naming what the test expects, and no output.
void ExpectOneErrorLine(const CliRun& r, const std::string& expected) {
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "exporter: error: " + expected + "\n");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

class ExporterIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("ember_exporter_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path model() const { return dir_ / "model"; }
  std::string out() const { return (dir_ / "out.pte").string(); }
  std::vector<std::string> names(const fs::path& d) const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(d)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }

  // model/model.onnx: y = x @ w^T with w [3, 4] f32 as external data at `location`.
  fs::path write_onnx(const std::string& location) const {
    OnnxModel m;
    m.input("x", onnx::TensorProto::FLOAT, {"2", "4"});
    onnx::TensorProto* t = m.graph().add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(3);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t->add_external_data();
    e->set_key("location");
    e->set_value(location);
    auto& g = m.node("Gemm", {"x", "w"}, {"y"}, "fc");
    testing::attr_i(g, "transB", 1);
    m.output("y");
    write(model() / "model.onnx", m.bytes());
    return model() / "model.onnx";
  }
  static std::string weights() { return std::string(48, '\0'); }

  fs::path dir_;
};

// ---- Deep and malformed JSON --------------------------------------------------------------------

TEST_F(ExporterIoTest, DeepJsonInConfigAndGenerationConfigIsAClearError) {
  for (const std::string& deep : {deep_arrays(), deep_objects()}) {
    write(model() / "config.json", deep);
    ExpectOneErrorLine(run({model().string(), "-o", out()}),
                       (model() / "config.json").string() + ": JSON nested deeper than 512 levels at line 1, column " +
                           (deep[0] == '[' ? "513 (byte 512)" : "2561 (byte 2560)"));
    write(model() / "config.json", kConfig);
    write(model() / "generation_config.json", deep);
    ExpectOneErrorLine(run({model().string(), "-o", out()}),
                       (model() / "generation_config.json").string() +
                           ": JSON nested deeper than 512 levels at line 1, column " +
                           (deep[0] == '[' ? "513 (byte 512)" : "2561 (byte 2560)"));
    fs::remove(model() / "generation_config.json");
  }
  EXPECT_FALSE(fs::exists(out()));
}

TEST_F(ExporterIoTest, DeepJsonInTheSafetensorsHeaderAndIndexIsAClearError) {
  write(model() / "config.json", kConfig);
  write(model() / "model.safetensors", safetensors(deep_arrays()));
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     (model() / "model.safetensors").string() +
                         " (header): JSON nested deeper than 512 levels at line 1, column 513 (byte 512)");
  write(model() / "model.safetensors.index.json", deep_objects());
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     (model() / "model.safetensors.index.json").string() +
                         ": JSON nested deeper than 512 levels at line 1, column 2561 (byte 2560)");
  EXPECT_FALSE(fs::exists(out()));
}

TEST_F(ExporterIoTest, MalformedJsonAndWrongTypesNameTheFileAndTheField) {
  const std::string config = (model() / "config.json").string();
  write(model() / "config.json", R"({"model_type": "llama",})");
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     config + ": not valid JSON at line 1, column 24 (byte 23): syntax error while parsing object key - "
                              "unexpected '}'; expected string literal");
  std::string text = kConfig;
  text.replace(text.find("\"vocab_size\": 8"), 15, "\"vocab_size\": \"8\"");
  write(model() / "config.json", text);
  ExpectOneErrorLine(run({model().string(), "-o", out()}), config + ": vocab_size = \"8\": expected an integer, got string");
  write(model() / "config.json", "[1]");
  ExpectOneErrorLine(run({model().string(), "-o", out()}), config + ": expected a JSON object, got array");
  write(model() / "config.json", kConfig);
  write(model() / "generation_config.json", R"({"top_k": "20"})");
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     (model() / "generation_config.json").string() + ": top_k = \"20\": expected an integer, got string");
}

// The tokenizer is read after the weights: a real (tiny) checkpoint with a deep tokenizer.json.
TEST_F(ExporterIoTest, DeepTokenizerJsonIsAClearError) {
  const fs::path ckpt = dir_ / "llama";
  fs::copy(fs::path(EMBER_LLM_CHECKPOINTS) / "llama_f32", ckpt);
  write(ckpt / "tokenizer.json", deep_arrays());
  ExpectOneErrorLine(run({ckpt.string(), "-o", out()}),
                     (ckpt / "tokenizer.json").string() +
                         ": JSON nested deeper than 512 levels at line 1, column 513 (byte 512)");
  EXPECT_FALSE(fs::exists(out()));
}

// ---- FIFOs and devices ---------------------------------------------------------------------------

TEST_F(ExporterIoTest, FifosAreRefusedWithoutBlocking) {
  // No writer ever opens them: a blocking open() would hang (ctest TIMEOUT).
  write(model() / "config.json", kConfig);
  ASSERT_EQ(::mkfifo((model() / "model.safetensors").c_str(), 0600), 0);
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     (model() / "model.safetensors").string() + ": not a regular file (FIFO)");
  fs::remove(model() / "model.safetensors");
  ASSERT_EQ(::mkfifo((model() / "shard.safetensors").c_str(), 0600), 0);
  write(model() / "model.safetensors.index.json", R"({"weight_map": {"w": "shard.safetensors"}})");
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     (model() / "shard.safetensors").string() + ": not a regular file (FIFO)");
  const fs::path fifo = dir_ / "model.onnx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectOneErrorLine(run({fifo.string(), "-o", out()}), "onnx: " + fifo.string() + ": not a regular file (FIFO)");
  ExpectOneErrorLine(run({"/dev/zero", "-o", out()}), "onnx: /dev/zero: not a regular file (character device)");
  ASSERT_EQ(::mkfifo((model() / "w.bin").c_str(), 0600), 0);
  ExpectOneErrorLine(run({write_onnx("w.bin").string(), "-o", out()}),
                     "onnx: initializer 'w': external data file " + (model() / "w.bin").string() + ": not a regular file (FIFO)");
  EXPECT_FALSE(fs::exists(out()));
}

// ---- Paths that leave the model's folder ----------------------------------------------------------

TEST_F(ExporterIoTest, ExternalDataThroughASymlinkOutTheFolderNeedsTheTrustFlag) {
  write(dir_ / "secret.bin", weights());  // stands for /etc/passwd
  fs::create_symlink(dir_ / "secret.bin", model() / "link.bin");
  const std::string onnx = write_onnx("link.bin").string();
  const std::string real_secret = fs::canonical(dir_ / "secret.bin").string();
  ExpectOneErrorLine(run({onnx, "-o", out()}),
                     "onnx: initializer 'w': external data location 'link.bin' leaves the model's folder: it resolves to '" +
                         real_secret + "', outside '" + fs::canonical(model()).string() +
                         "' (pass --trust-model-folder if the folder is trusted)");
  EXPECT_FALSE(fs::exists(out()));
  const CliRun trusted = run({onnx, "-o", out(), "--trust-model-folder"});
  EXPECT_EQ(trusted.code, 0) << trusted.err;
  EXPECT_TRUE(fs::exists(out()));
  // A symlink that stays inside the folder needs nothing.
  fs::remove(out());
  write(model() / "real.bin", weights());
  fs::create_symlink("real.bin", model() / "inner.bin");
  const CliRun inner = run({write_onnx("inner.bin").string(), "-o", out()});
  EXPECT_EQ(inner.code, 0) << inner.err;
}

TEST_F(ExporterIoTest, DotDotAndAbsoluteExternalDataAreRefused) {
  write(dir_ / "w.bin", weights());
  ExpectOneErrorLine(run({write_onnx("../w.bin").string(), "-o", out()}),
                     "onnx: initializer 'w': external data location '../w.bin' leaves the model's folder "
                     "(pass --trust-model-folder if the folder is trusted)");
  const std::string absolute = (dir_ / "w.bin").string();
  ExpectOneErrorLine(run({write_onnx(absolute).string(), "-o", out()}),
                     "onnx: initializer 'w': external data location '" + absolute +
                         "' is an absolute path; paths in a model file must be relative to its folder "
                         "(pass --trust-model-folder if the folder is trusted)");
  EXPECT_FALSE(fs::exists(out()));
  EXPECT_EQ(run({write_onnx("../w.bin").string(), "-o", out(), "--trust-model-folder"}).code, 0);
}

TEST_F(ExporterIoTest, ShardsAndFixedFilesMustResolveInsideTheFolder) {
  write(model() / "config.json", kConfig);
  write(dir_ / "outside.safetensors", safetensors("{}"));
  const std::string index = (model() / "model.safetensors.index.json").string();
  write(index, R"({"weight_map": {"w": "../outside.safetensors"}})");
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     index + ": weight_map.w names '../outside.safetensors' leaves the model's folder "
                             "(pass --trust-model-folder if the folder is trusted)");
  write(index, R"({"weight_map": {"w": "/etc/passwd"}})");
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     index + ": weight_map.w names '/etc/passwd' is an absolute path; paths in a model file must be "
                             "relative to its folder (pass --trust-model-folder if the folder is trusted)");
  fs::create_symlink(dir_ / "outside.safetensors", model() / "link.safetensors");
  write(index, R"({"weight_map": {"w": "link.safetensors"}})");
  const std::string real = fs::canonical(dir_ / "outside.safetensors").string();
  ExpectOneErrorLine(run({model().string(), "-o", out()}),
                     index + ": weight_map.w names 'link.safetensors' leaves the model's folder: it resolves to '" + real +
                         "', outside '" + fs::canonical(model()).string() +
                         "' (pass --trust-model-folder if the folder is trusted)");
  // Trusted, the link is followed (and the empty shard then lacks the tensor).
  ExpectOneErrorLine(run({model().string(), "-o", out(), "--trust-model-folder"}),
                     index + ": tensor 'w' is not in link.safetensors");
  // config.json itself.
  fs::remove(model() / "config.json");
  write(dir_ / "config.json", kConfig);
  fs::create_symlink(dir_ / "config.json", model() / "config.json");
  const CliRun r = run({model().string(), "-o", out()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("model folder entry 'config.json' leaves the model's folder: it resolves to '" +
                       fs::canonical(dir_ / "config.json").string() + "'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out()));
}

// ---- Outputs -------------------------------------------------------------------------------------

TEST_F(ExporterIoTest, AnOutputThatIsAnInputIsRefusedAndTheInputIsUnchanged) {
  write(model() / "w.bin", weights());
  const fs::path onnx = write_onnx("w.bin");
  const std::string onnx_bytes = read(onnx);
  fs::create_directories(dir_ / "x");
  ASSERT_EQ(::link(onnx.c_str(), (dir_ / "hard.onnx").c_str()), 0);
  for (const std::string& o : {onnx.string(), (dir_ / "x/../model/model.onnx").string(), (dir_ / "hard.onnx").string()}) {
    SCOPED_TRACE(o);
    ExpectOneErrorLine(run({onnx.string(), "-o", o}),
                       "-o " + o + ": is the same file as the input " + onnx.string() + "; choose another output");
  }
  // A file read from the model's folder: the external data.
  const std::string w = (model() / "w.bin").string();
  ExpectOneErrorLine(run({onnx.string(), "-o", w}), "-o " + w + ": is the same file as the input " + w + "; choose another output");
  EXPECT_EQ(read(onnx), onnx_bytes);
  EXPECT_EQ(read(model() / "w.bin"), weights());
  EXPECT_EQ(names(model()), (std::vector<std::string>{"model.onnx", "w.bin"}));  // no temporary left
  // The manifest was read too.
  const std::string manifest = (dir_ / "manifest.json").string();
  fs::copy_file(testing::test_data_path("test_manifest.json"), manifest);
  std::vector<std::string> args = {"exporter", "--example", "mlp", "-o", manifest, "--manifest", manifest};
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream sink, err;
  EXPECT_EQ(run_cli(static_cast<int>(argv.size()), argv.data(), sink, err), 1);
  EXPECT_EQ(err.str(), "exporter: error: -o " + manifest + ": is the same file as the input " + manifest +
                           "; choose another output\n");
}

TEST_F(ExporterIoTest, AFailedExportLeavesNoPartialFile) {
  // The weights are short: the import fails after -o was named. The old output stays as it was.
  write(model() / "w.bin", std::string(20, '\0'));
  const fs::path onnx = write_onnx("w.bin");
  write(out(), "previous export");
  const CliRun r = run({onnx.string(), "-o", out()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("outside"), std::string::npos) << r.err;
  EXPECT_EQ(read(out()), "previous export");
  EXPECT_EQ(names(dir_), (std::vector<std::string>{"model", "out.pte"}));
  // An output folder that does not exist: nothing is created.
  const std::string missing = (dir_ / "no/such/dir/out.pte").string();
  const CliRun m = run({"--example", "mlp", "-o", missing});
  EXPECT_EQ(m.code, 1);
  EXPECT_EQ(m.err.rfind("exporter: error: -o " + missing + ": cannot create a temporary file in '", 0), 0u) << m.err;
  EXPECT_EQ(names(dir_), (std::vector<std::string>{"model", "out.pte"}));
  // A directory is not an output.
  ExpectOneErrorLine(run({"--example", "mlp", "-o", model().string()}),
                     "-o " + model().string() + ": not a regular file (directory); outputs are written as regular files");
  // A successful export replaces the file whole, with no temporary left behind.
  write(model() / "w.bin", weights());
  const CliRun ok = run({onnx.string(), "-o", out()});
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(read(out()).substr(0, 4), "EMBR");
  EXPECT_EQ(names(dir_), (std::vector<std::string>{"model", "out.pte"}));
}

TEST_F(ExporterIoTest, HelpNamesTheTrustFlag) {
  std::vector<const char*> argv = {"exporter", "--help"};
  std::ostringstream out, err;
  EXPECT_EQ(run_cli(2, argv.data(), out, err), 0);
  EXPECT_NE(out.str().find("--trust-model-folder"), std::string::npos);
  const CliRun r = run({"--example", "mlp", "-o", this->out(), "--trust-model-folder"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--trust-model-folder applies to a model file or folder only"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ember::exporter
