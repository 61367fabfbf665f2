#include "exporter/cli/cli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "exporter/plan/overlap_check.h"
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

TEST(CliTest, ExamplesAreWrittenAndPassTheChecker) {
  for (const std::string example : {"mlp", "cnn"}) {
    for (const std::string backends : {"portable", "null,portable"}) {
      SCOPED_TRACE(example + " " + backends);
      const std::string path = testing::temp_path(example + ".pte");
      const CliRun r = run({"--example", example, "-o", path, "--backends", backends, "--manifest",
                            testing::test_data_path("test_manifest.json")});
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

TEST(CliTest, HelpAndVersion) {
  const CliRun help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--example"), std::string::npos);
  const CliRun version = run({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_NE(version.out.find("ember-exporter 0.1.0"), std::string::npos);
}

}  // namespace
}  // namespace ember::exporter
