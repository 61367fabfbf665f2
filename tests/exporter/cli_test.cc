#include "exporter/cli/cli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "exporter/plan/overlap_check.h"
#include "runtime/program/program_file.h"
#include "schema/program_generated.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

struct CliRun {
  int code = 0;
  std::string out, err;
};

CliRun run(std::vector<std::string> args) {
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

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Command-line mistakes are one line each; an unknown flag is named even when -o is missing too.
TEST(CliTest, CommandLineMistakesAreOneLineEach) {
  CliRun r = run({"--example", "mlp", "--bogus"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "exporter: error: The following argument was not expected: --bogus (see --help)\n");
  r = run({"--example", "mlp"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "exporter: error: --output is required (see --help)\n");
  r = run({"--example", "mlp", "-o"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("exporter: error: ", 0), 0u) << r.err;
}

// Issue 17: the default report is a summary (instruction counts); --verbose lists every
// instruction, --quiet prints one line; both together are a usage error.
TEST(CliTest, QuietSummaryAndVerboseReports) {
  const std::string path = testing::temp_path("cnn_report.pte");
  const std::vector<std::string> base = {"--example", "cnn", "-o", path, "--manifest",
                                         testing::test_data_path("test_manifest.json")};
  const CliRun summary = run(base);
  ASSERT_EQ(summary.code, 0) << summary.err;
  EXPECT_NE(summary.out.find("instructions: "), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find(" kernel calls, 0 delegate calls); --verbose lists them\n"), std::string::npos) << summary.out;
  EXPECT_EQ(summary.out.find("-> portable\n"), std::string::npos) << summary.out;
  std::vector<std::string> args = base;
  args.push_back("--verbose");
  const CliRun verbose = run(args);
  ASSERT_EQ(verbose.code, 0) << verbose.err;
  EXPECT_NE(verbose.out.find("delegate calls):\n"), std::string::npos) << verbose.out;
  EXPECT_NE(verbose.out.find("conv2d"), std::string::npos) << verbose.out;
  EXPECT_NE(verbose.out.find("-> portable\n"), std::string::npos) << verbose.out;
  args.back() = "--quiet";
  const CliRun quiet = run(args);
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.out, "exporter: example 'cnn' (seed 1) -> " + path + "\n");
  args.push_back("--verbose");
  const CliRun both = run(args);
  EXPECT_EQ(both.code, 1);
  EXPECT_NE(both.err.find("--quiet and --verbose exclude each other"), std::string::npos) << both.err;
  std::remove(path.c_str());
}

TEST(CliTest, ExamplesAreWrittenAndPassTheChecker) {
  for (const std::string example : {"mlp", "cnn"}) {
    for (const std::string backends : {"portable", "null,portable"}) {
      SCOPED_TRACE(example + " " + backends);
      const std::string path = testing::temp_path(example + ".pte");
      const CliRun r = run({"--example", example, "-o", path, "--backends", backends, "--manifest",
                            testing::test_data_path("test_manifest.json"), "--verbose"});
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_NE(r.out.find("planned peak"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("ops:"), std::string::npos);
      EXPECT_NE(r.out.find("weights:"), std::string::npos);
      const std::vector<uint8_t> file = read_file(path);
      ASSERT_GT(file.size(), 64u);
      const auto violations = check_overlaps(file);
      EXPECT_TRUE(violations.empty()) << violations.front();
      EXPECT_EQ(testing::validate_with_runtime(file), "");
      if (example == "cnn" && backends == "null,portable") {
        EXPECT_NE(r.out.find("delegate 0"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("-> null"), std::string::npos) << r.out;
      }
      std::remove(path.c_str());
    }
  }
}

TEST(CliTest, StripDebugAndSeedChangeTheFile) {
  const std::string a = testing::temp_path("a.pte"), b = testing::temp_path("b.pte"), c = testing::temp_path("c.pte");
  const std::string manifest = testing::test_data_path("test_manifest.json");
  ASSERT_EQ(run({"--example", "mlp", "-o", a, "--manifest", manifest}).code, 0);
  ASSERT_EQ(run({"--example", "mlp", "-o", b, "--manifest", manifest, "--strip-debug"}).code, 0);
  ASSERT_EQ(run({"--example", "mlp", "-o", c, "--manifest", manifest, "--seed", "2"}).code, 0);
  EXPECT_LT(read_file(b).size(), read_file(a).size());
  EXPECT_NE(read_file(c), read_file(a));
  EXPECT_EQ(run({"--example", "mlp", "-o", c, "--manifest", manifest}).code, 0);
  EXPECT_EQ(read_file(c), read_file(a));  // deterministic
  for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

TEST(CliTest, ErrorsAreOneLineAndExitOne) {
  const std::string manifest = testing::test_data_path("test_manifest.json");
  const std::string path = testing::temp_path("err.pte");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--example", "resnet", "-o", path, "--manifest", manifest},
           {"--example", "mlp", "-o", path, "--manifest", "/nonexistent.json"},
           {"--example", "mlp", "-o", path, "--manifest", manifest, "--backends", "cuda"},
           {"--example", "mlp"},
           {"--bogus"},
       }) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err.rfind("exporter: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// The Program table of a .pte file (header decoded, FlatBuffer verified).
const fb::Program* program_of(const std::vector<uint8_t>& file) {
  FileHeader header;
  ErrorContext ctx;
  if (!decode_header(file.data(), file.size(), file.size(), true, &header, &ctx).is_ok()) {
    ADD_FAILURE() << ctx.message;
    return nullptr;
  }
  const uint8_t* bytes = file.data() + header.flatbuffer_offset;
  flatbuffers::Verifier verifier(bytes, header.flatbuffer_size);
  if (!fb::VerifyProgramBuffer(verifier)) {
    ADD_FAILURE() << "the FlatBuffer does not verify";
    return nullptr;
  }
  return fb::GetProgram(bytes);
}

std::string spec_value(const fb::CompileSpec& spec) {
  return spec.value() == nullptr ? "<absent>" : std::string(spec.value()->begin(), spec.value()->end());
}

// --compile-spec reaches every delegate of its backend, in command-line order, value bytes as typed
// (commas, ':' and '=' kept; empty allowed); delegates of other backends get none.
TEST(CliTest, CompileSpecsAreWrittenToEveryDelegateOfTheirBackend) {
  const std::string manifest = testing::test_data_path("test_manifest.json");
  const std::string path = testing::temp_path("specs.pte");
  const CliRun r = run({"--example", "cnn", "-o", path, "--backends", "null,portable", "--manifest", manifest,
                        "--compile-spec", "null:buckets.tokens=1,2,4,8", "--compile-spec", "null:mode=a=b:c",
                        "--compile-spec", "null:flag="});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("compile specs: null:buckets.tokens=1,2,4,8 null:mode=a=b:c null:flag=\n"), std::string::npos)
      << r.out;
  const std::vector<uint8_t> file = read_file(path);
  EXPECT_EQ(testing::validate_with_runtime(file), "");
  const fb::Program* program = program_of(file);
  ASSERT_NE(program, nullptr);
  const auto* delegates = program->methods()->Get(0)->delegates();
  ASSERT_NE(delegates, nullptr);
  ASSERT_GE(delegates->size(), 1u);
  for (const fb::Delegate* d : *delegates) {
    ASSERT_EQ(d->backend_id()->str(), "null");
    ASSERT_NE(d->compile_specs(), nullptr);
    ASSERT_EQ(d->compile_specs()->size(), 3u);
    EXPECT_EQ(d->compile_specs()->Get(0)->key()->str(), "buckets.tokens");
    EXPECT_EQ(spec_value(*d->compile_specs()->Get(0)), "1,2,4,8");
    EXPECT_EQ(d->compile_specs()->Get(1)->key()->str(), "mode");
    EXPECT_EQ(spec_value(*d->compile_specs()->Get(1)), "a=b:c");
    EXPECT_EQ(d->compile_specs()->Get(2)->key()->str(), "flag");
    EXPECT_EQ(spec_value(*d->compile_specs()->Get(2)), "");
  }
  // Without the flag: no compile_specs vector at all (the file is what it was before the option).
  ASSERT_EQ(run({"--example", "cnn", "-o", path, "--backends", "null,portable", "--manifest", manifest}).code, 0);
  const std::vector<uint8_t> plain = read_file(path);
  const fb::Program* plain_program = program_of(plain);
  ASSERT_NE(plain_program, nullptr);
  for (const fb::Delegate* d : *plain_program->methods()->Get(0)->delegates()) EXPECT_EQ(d->compile_specs(), nullptr);
  std::remove(path.c_str());
}

TEST(CliTest, CompileSpecMistakesAreOneLineNamingTheSpec) {
  const std::string manifest = testing::test_data_path("test_manifest.json");
  const std::string path = testing::temp_path("bad_specs.pte");
  const std::vector<std::string> base = {"--example", "cnn", "-o", path, "--manifest", manifest};
  const struct {
    std::vector<std::string> args;
    std::string err;
  } cases[] = {
      {{"--backends", "null,portable", "--compile-spec", "null-buckets=1"},
       "--compile-spec 'null-buckets=1': expected BACKEND:KEY=VALUE (no ':') (see --help)"},
      {{"--backends", "null,portable", "--compile-spec", "null:buckets"},
       "--compile-spec 'null:buckets': expected BACKEND:KEY=VALUE (no '=' after the ':') (see --help)"},
      {{"--backends", "null,portable", "--compile-spec", "a=b:c"},
       "--compile-spec 'a=b:c': expected BACKEND:KEY=VALUE (no '=' after the ':') (see --help)"},
      {{"--backends", "null,portable", "--compile-spec", ":k=1"},
       "--compile-spec ':k=1': expected BACKEND:KEY=VALUE (empty BACKEND) (see --help)"},
      {{"--backends", "null,portable", "--compile-spec", "null:=1"},
       "--compile-spec 'null:=1': expected BACKEND:KEY=VALUE (empty KEY) (see --help)"},
      {{"--backends", "null,portable", "--compile-spec", "cuda:buckets.tokens=1,2"},
       "--compile-spec cuda:buckets.tokens=1,2: backend 'cuda' is not in --backends (null,portable)"},
      {{"--backends", "null,portable", "--compile-spec", "null:k=1", "--compile-spec", "null:k=2"},
       "--compile-spec null:k=2: key 'k' given twice for backend 'null'"},
      {{"--backends", "other,null,portable", "--compile-spec", "other:k=1"},
       "--compile-spec other:k=1: no delegate went to backend 'other' (no node of the graph runs on it), so nothing "
       "would carry the spec"},
      {{"--backends", "null,portable", "--compile-spec", "portable:k=1"},
       "--compile-spec portable:k=1: no delegate went to backend 'portable' (the portable kernels are not a "
       "delegate), so nothing would carry the spec"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 1) << c.err;
    EXPECT_EQ(r.err, "exporter: error: " + c.err + "\n");
    EXPECT_FALSE(std::filesystem::exists(path)) << c.err;
  }
  // Different keys for one backend, with the same value, are fine.
  const CliRun ok = run({"--example", "cnn", "-o", path, "--manifest", manifest, "--backends", "null,portable",
                         "--compile-spec", "null:k=1", "--compile-spec", "null:j=1"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  std::remove(path.c_str());
}

TEST(CliTest, HelpAndVersion) {
  const CliRun help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--example"), std::string::npos);
  EXPECT_NE(help.out.find("--compile-spec"), std::string::npos);
  EXPECT_NE(help.out.find("BACKEND:KEY=VALUE"), std::string::npos);
  const CliRun version = run({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_NE(version.out.find("ember-exporter 0.1.0"), std::string::npos);
}

}  // namespace
}  // namespace ember::exporter
