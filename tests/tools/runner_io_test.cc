// The runner against hostile and careless input (issue #14), run as a process: a deep tokenizer.json,
// FIFOs and devices where files belong, oversized inputs, and outputs that would replace an input.
// Each case is one error line and exit code 1, never a crash or a hang (ctest TIMEOUT).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct ToolRun {
  int code = -1;
  std::string err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  q += '\'';
  return q;
}

// Runs `tool args...` with stdout discarded; returns the exit code and stderr.
ToolRun run(const std::string& tool, const std::vector<std::string>& args) {
  std::string cmd = quote(tool);
  for (const std::string& a : args) {
    cmd += ' ';
    cmd += quote(a);
  }
  cmd += " 2>&1 >/dev/null";
  ToolRun r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.err.append(buf, n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

ToolRun runner(const std::vector<std::string>& args) { return run(EMBER_RUNNER, args); }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class RunnerIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("ember_runner_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // mlp.pte: the bundled example (one input "x", one output "probs").
  std::string program() const {
    const std::string p = path("mlp.pte");
    if (!fs::exists(p)) {
      const ToolRun r = run(EMBER_EXPORTER, {"--example", "mlp", "-o", p});
      EXPECT_EQ(r.code, 0) << r.err;
    }
    return p;
  }
  fs::path dir_;
};

TEST_F(RunnerIoTest, DeepTokenizerJsonIsAClearError) {
  const std::string deep = path("deep.json");
  std::ofstream(deep) << std::string(100000, '[') << std::string(100000, ']');
  const ToolRun r = runner({"--tokenizer", deep, "--encode", "hi"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "runner: error: --tokenizer " + deep +
                       ": JSON nested deeper than 512 levels at line 1, column 513 (byte 512)\n");
  std::ofstream(deep) << "{\"model\": ";
  const ToolRun bad = runner({"--tokenizer", deep, "--encode", "hi"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("runner: error: --tokenizer " + deep + ": not valid JSON at line 1, column 11 (byte 10): ", 0), 0u)
      << bad.err;
}

TEST_F(RunnerIoTest, FifosAndDevicesAreRefusedWithoutBlocking) {
  const std::string mlp = program();
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer: a blocking open would hang
  ToolRun r = runner({"--program", mlp, "--input", fifo});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "runner: error: --input " + fifo + ": not a regular file (FIFO)\n");
  r = runner({"--program", mlp, "--input", "/dev/zero"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "runner: error: --input /dev/zero: not a regular file (character device)\n");
  r = runner({"--program", mlp, "--input", "x=" + fifo});
  EXPECT_EQ(r.err, "runner: error: --input " + fifo + ": not a regular file (FIFO)\n");
  r = runner({"--tokenizer", fifo, "--encode", "hi"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "runner: error: --tokenizer " + fifo + ": not a regular file (FIFO)\n");
  for (const char* mmap : {"", "--mmap"}) {
    std::vector<std::string> args = {"--program", fifo};
    if (*mmap) args.push_back(mmap);
    r = runner(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("'" + fifo + "' is not a regular file (FIFO)"), std::string::npos) << r.err;
  }
}

TEST_F(RunnerIoTest, AnInputLargerThanTheMethodTakesIsNotRead) {
  const std::string mlp = program();
  const std::string big = path("big.npy");
  std::ofstream(big).close();
  fs::resize_file(big, uint64_t(8) << 20);  // sparse: 8 MiB of zeros
  const ToolRun r = runner({"--program", mlp, "--input", big});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("runner: error: --input " + big + ": 8388608 bytes, above the limit of ", 0), 0u) << r.err;
}

TEST_F(RunnerIoTest, OutputsNeverReplaceAnInput) {
  const std::string mlp = program();
  const std::string before = read(mlp);
  fs::create_directories(dir_ / "out");
  // --output-dir writes out/probs.npy: here a hard link to the program.
  ASSERT_EQ(::link(mlp.c_str(), path("out/probs.npy").c_str()), 0);
  ToolRun r = runner({"--program", mlp, "--output-dir", path("out")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "runner: error: --output-dir " + path("out") + "/probs.npy: is the same file as the input " + mlp +
                       "; choose another output\n");
  // --profile naming the program, through another spelling.
  fs::create_directories(dir_ / "x");
  const std::string spelled = path("x/../mlp.pte");
  r = runner({"--program", mlp, "--profile", spelled});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "runner: error: --profile " + spelled + ": is the same file as the input " + mlp + "; choose another output\n");
  EXPECT_EQ(read(mlp), before);
  // A directory is not an output; a good run writes whole files and no temporaries.
  r = runner({"--program", mlp, "--profile", path("out")});
  EXPECT_EQ(r.err, "runner: error: --profile " + path("out") + ": not a regular file (directory); outputs are written as regular files\n");
  fs::remove(path("out/probs.npy"));
  r = runner({"--program", mlp, "--output-dir", path("out"), "--profile", path("trace.json")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read(path("out/probs.npy")).substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(read(path("trace.json")).substr(0, 16), "{\"traceEvents\": ");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_ / "out")) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"probs.npy"});
}

// Issue 17: --output-dir creates the folder (and its parents) when it is missing.
TEST_F(RunnerIoTest, OutputDirIsCreated) {
  const std::string mlp = program();
  const ToolRun r = runner({"--program", mlp, "--output-dir", path("new/nested")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read(path("new/nested/probs.npy")).substr(0, 6), "\x93NUMPY");
  // A path that cannot be a folder (a file is in the way) is one error line.
  std::ofstream(path("file")) << "x";
  const ToolRun bad = runner({"--program", mlp, "--output-dir", path("file/sub")});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("runner: error: --output-dir " + path("file/sub") + ": cannot create the folder", 0), 0u) << bad.err;
}

}  // namespace
