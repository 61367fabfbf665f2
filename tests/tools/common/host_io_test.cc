#include "tools/common/host_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace ember::tools {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed at the end.
class HostIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("ember_host_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The message of the HostIoError `f` throws ("" when it does not throw).
  template <typename F>
  static std::string error_of(F&& f) {
    try {
      f();
    } catch (const HostIoError& e) {
      return e.what();
    }
    return "";
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

// ---- Reading ------------------------------------------------------------------------------------

TEST_F(HostIoTest, ReadsARegularFileExactly) {
  const std::string p = write("a.bin", std::string("ab\0cd", 5));
  EXPECT_EQ(read_regular_file(p, 5), std::string("ab\0cd", 5));
  RegularFile f = RegularFile::open(p, 100, "--input");
  EXPECT_EQ(f.size(), 5u);
  EXPECT_EQ(f.label(), "--input " + p);
  char two[2];
  f.read_at(3, two, 2);
  EXPECT_EQ(std::string(two, 2), "cd");
}

TEST_F(HostIoTest, RefusesAFifoWithoutBlocking) {
  const std::string p = path("fifo");
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  // No writer: a blocking open() would wait forever (the ctest TIMEOUT catches that regression).
  EXPECT_EQ(error_of([&] { read_regular_file(p, 100, "--input"); }), "--input " + p + ": not a regular file (FIFO)");
}

TEST_F(HostIoTest, RefusesDirectoriesAndDevicesByKind) {
  EXPECT_EQ(error_of([&] { read_regular_file(dir_.string(), 100); }), dir_.string() + ": not a regular file (directory)");
  EXPECT_EQ(error_of([&] { read_regular_file("/dev/zero", 100, "--input"); }),
            "--input /dev/zero: not a regular file (character device)");
}

TEST_F(HostIoTest, RefusesAFileAboveTheLimitNamingBothSizes) {
  const std::string p = write("big.json", std::string(101, 'x'));
  EXPECT_EQ(error_of([&] { read_regular_file(p, 100); }), p + ": 101 bytes, above the limit of 100 bytes");
  EXPECT_EQ(read_regular_file(p, 101).size(), 101u);
}

TEST_F(HostIoTest, AMissingFileNamesThePathAndTheReason) {
  const std::string p = path("nope.json");
  EXPECT_EQ(error_of([&] { read_regular_file(p, 100, "config"); }), "config " + p + ": cannot open: No such file or directory");
}

TEST_F(HostIoTest, ReadAtChecksTheRangeWithoutOverflow) {
  const std::string p = write("a.bin", "0123456789");
  RegularFile f = RegularFile::open(p, 100);
  char buf[4];
  EXPECT_EQ(error_of([&] { f.read_at(std::numeric_limits<uint64_t>::max() - 1, buf, 4); }),
            p + ": bytes [18446744073709551614, +4) are outside the file (10 bytes)");
  EXPECT_EQ(error_of([&] { f.read_at(8, buf, 3); }), p + ": bytes [8, +3) are outside the file (10 bytes)");
  EXPECT_EQ(error_of([&] { f.read_at(6, buf, 4); }), "");
}

TEST_F(HostIoTest, AFileThatChangesWhileReadIsAnError) {
  const std::string p = write("a.bin", "0123456789");
  {
    RegularFile f = RegularFile::open(p, 100);
    ASSERT_EQ(::truncate(p.c_str(), 4), 0);
    EXPECT_EQ(error_of([&] { f.read_all(); }), p + ": the file shrank while being read (ended at byte 4 of 10)");
  }
  {
    RegularFile f = RegularFile::open(p, 100);
    std::ofstream(p, std::ios::app) << "more";
    EXPECT_EQ(error_of([&] { f.read_all(); }), p + ": the file grew while being read (beyond 4 bytes)");
  }
}

TEST_F(HostIoTest, AReadLogNotesEachFileOnceAndNests) {
  const std::string a = write("a", "1"), b = write("b", "2");
  EXPECT_EQ(ReadLog::active(), nullptr);
  ReadLog outer;
  read_regular_file(a, 10);
  {
    ReadLog inner;
    read_regular_file(b, 10);
    read_regular_file(b, 10);
    ASSERT_EQ(inner.files().size(), 1u);
    EXPECT_EQ(inner.files()[0].path, b);
  }
  EXPECT_EQ(ReadLog::active(), &outer);
  ASSERT_EQ(outer.files().size(), 1u);
  EXPECT_EQ(outer.files()[0].path, a);
}

// ---- JSON ---------------------------------------------------------------------------------------

TEST_F(HostIoTest, DeepJsonIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of([&] { parse_json(deep, "deep.json"); }),
            "deep.json: JSON nested deeper than 512 levels at line 1, column 513 (byte 512)");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_NE(error_of([&] { parse_json(objects, "o.json"); }).find("o.json: JSON nested deeper than 512 levels"),
            std::string::npos);
  // 512 levels are fine; the limit is a parameter.
  EXPECT_TRUE(parse_json(std::string(512, '[') + std::string(512, ']'), "ok.json").is_array());
  EXPECT_EQ(error_of([&] { parse_json("{\"a\": [[1]]}", "x.json", JsonLimits{100, 2}); }),
            "x.json: JSON nested deeper than 2 levels at line 1, column 8 (byte 7)");
}

TEST_F(HostIoTest, BracketsInsideStringsDoNotCount) {
  const std::string text = "{\"a\": \"" + std::string(1000, '[') + "\\\"[[\", \"b\": [1]}";
  const nlohmann::json j = parse_json(text, "s.json", JsonLimits{1 << 20, 2});
  EXPECT_EQ(j["a"].get<std::string>().size(), 1003u);
  EXPECT_EQ(j["b"][0], 1);
}

TEST_F(HostIoTest, MalformedJsonNamesTheSourceLineColumnAndReason) {
  EXPECT_EQ(error_of([&] { parse_json("{\n  \"a\": 1,\n  \"b\": tru\n}", "cfg/config.json"); }),
            "cfg/config.json: not valid JSON at line 3, column 11 (byte 22): syntax error while parsing value - "
            "invalid literal; last read: '\"b\": tru<U+000A>'");
  EXPECT_EQ(error_of([&] { parse_json("", "empty.json"); }),
            "empty.json: not valid JSON at line 1, column 1 (byte 0): syntax error while parsing value - "
            "unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(error_of([&] { parse_json("[1, 2", "t.json", JsonLimits{4, 10}); }),
            "t.json: 5 bytes of JSON, above the limit of 4 bytes");
}

TEST_F(HostIoTest, ReadJsonFileAppliesBothLimitsAndNamesTheFile) {
  const std::string p = write("tokenizer.json", std::string(600, '[') + std::string(600, ']'));
  EXPECT_EQ(error_of([&] { read_json_file(p, {}, "--tokenizer"); }),
            "--tokenizer " + p + ": JSON nested deeper than 512 levels at line 1, column 513 (byte 512)");
  EXPECT_EQ(error_of([&] { read_json_file(p, JsonLimits{1000, 512}); }), p + ": 1200 bytes, above the limit of 1000 bytes");
  const std::string fifo = path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_json_file(fifo); }), fifo + ": not a regular file (FIFO)");
  EXPECT_EQ(read_json_file(write("ok.json", "{\"k\": [true]}"))["k"][0], true);
}

TEST_F(HostIoTest, JsonTypeNamesAndExcerpts) {
  const nlohmann::json j = parse_json(R"({"i": 1, "u": -2, "f": 1.5, "s": "x", "n": null, "b": false, "a": [], "o": {}})", "t");
  EXPECT_STREQ(json_type_name(j["i"]), "integer");
  EXPECT_STREQ(json_type_name(j["u"]), "integer");
  EXPECT_STREQ(json_type_name(j["f"]), "number");
  EXPECT_STREQ(json_type_name(j["s"]), "string");
  EXPECT_STREQ(json_type_name(j["n"]), "null");
  EXPECT_STREQ(json_type_name(j["b"]), "boolean");
  EXPECT_STREQ(json_type_name(j["a"]), "array");
  EXPECT_STREQ(json_type_name(j["o"]), "object");
  EXPECT_EQ(json_excerpt(j["s"]), "\"x\"");
  std::string expected = "\"";
  expected.append(76, 'y');
  expected += "...";
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(200, 'y'))), expected);  // 80 characters
}

// ---- Paths --------------------------------------------------------------------------------------

TEST_F(HostIoTest, ResolveInsideKeepsPathsInTheFolder) {
  fs::create_directories(dir_ / "model" / "sub");
  write("model/sub/w.bin", "w");
  write("outside.bin", "secret");
  const std::string folder = path("model");
  const std::string real_folder = fs::canonical(folder).string();
  EXPECT_EQ(resolve_inside(folder, "sub/w.bin", false, "w", "--trust"), real_folder + "/sub/w.bin");
  EXPECT_EQ(resolve_inside(folder, "sub/../sub/w.bin", false, "w", "--trust"), real_folder + "/sub/w.bin");
  // A symlink that stays inside is fine; one that leaves is not, unless allowed.
  fs::create_symlink("sub/w.bin", dir_ / "model" / "inner.bin");
  EXPECT_EQ(resolve_inside(folder, "inner.bin", false, "w", "--trust"), real_folder + "/sub/w.bin");
  fs::create_symlink(dir_ / "outside.bin", dir_ / "model" / "link.bin");
  const std::string real_outside = fs::canonical(path("outside.bin")).string();
  EXPECT_EQ(error_of([&] { resolve_inside(folder, "link.bin", false, "tensor 'w': external data", "--trust-model-folder"); }),
            "tensor 'w': external data 'link.bin' leaves the model's folder: it resolves to '" + real_outside +
                "', outside '" + real_folder + "' (pass --trust-model-folder if the folder is trusted)");
  EXPECT_EQ(resolve_inside(folder, "link.bin", true, "w", "--trust"), real_outside);
  // A symlinked folder: its real path is the reference.
  fs::create_symlink(dir_ / "model", dir_ / "alias");
  EXPECT_EQ(resolve_inside(path("alias"), "sub/w.bin", false, "w", "--trust"), real_folder + "/sub/w.bin");
}

// A Hugging Face hub cache snapshot links its files into the repository's blobs/ folder: that is
// allowed without the flag; a link from the snapshot anywhere else (another repository's blobs, the
// cache root) is not, and nothing outside a folder that merely looks similar is.
TEST_F(HostIoTest, ResolveInsideAcceptsAHubCacheSnapshotLinkingIntoItsBlobs) {
  const fs::path repo = dir_ / "hub" / "models--org--tiny";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / "abc123");
  fs::create_directories(dir_ / "hub" / "models--org--other" / "blobs");
  write("hub/models--org--tiny/blobs/1f2e", "{}");
  write("hub/models--org--other/blobs/9d9d", "{}");
  write("hub/secret", "s");
  fs::create_symlink("../../blobs/1f2e", repo / "snapshots" / "abc123" / "config.json");
  fs::create_symlink("../../../models--org--other/blobs/9d9d", repo / "snapshots" / "abc123" / "other.json");
  fs::create_symlink("../../../secret", repo / "snapshots" / "abc123" / "secret.json");
  const std::string snapshot = (repo / "snapshots" / "abc123").string();
  EXPECT_EQ(resolve_inside(snapshot, "config.json", false, "entry", "--trust"),
            fs::canonical(repo / "blobs" / "1f2e").string());
  EXPECT_NE(error_of([&] { resolve_inside(snapshot, "other.json", false, "entry", "--trust"); })
                .find("'other.json' leaves the model's folder"), std::string::npos);
  EXPECT_NE(error_of([&] { resolve_inside(snapshot, "secret.json", false, "entry", "--trust"); })
                .find("'secret.json' leaves the model's folder"), std::string::npos);
  // The same link from a folder that is not a snapshot of a models-- repository is refused.
  fs::create_directories(dir_ / "hub" / "plain" / "snapshots" / "x");
  fs::create_symlink(fs::canonical(repo / "blobs" / "1f2e"), dir_ / "hub" / "plain" / "snapshots" / "x" / "c.json");
  EXPECT_NE(error_of([&] { resolve_inside(path("hub/plain/snapshots/x"), "c.json", false, "entry", "--trust"); })
                .find("leaves the model's folder"), std::string::npos);
}

TEST_F(HostIoTest, ResolveInsideRefusesDotDotAbsoluteAndMissing) {
  fs::create_directories(dir_ / "model");
  write("outside.bin", "secret");
  const std::string folder = path("model");
  EXPECT_EQ(error_of([&] { resolve_inside(folder, "../outside.bin", false, "shard", "--trust"); }),
            "shard '../outside.bin' leaves the model's folder (pass --trust if the folder is trusted)");
  EXPECT_EQ(error_of([&] { resolve_inside(folder, "a/../../outside.bin", false, "shard", "--trust"); }),
            "shard 'a/../../outside.bin' leaves the model's folder (pass --trust if the folder is trusted)");
  EXPECT_EQ(error_of([&] { resolve_inside(folder, "/etc/passwd", false, "shard", "--trust"); }),
            "shard '/etc/passwd' is an absolute path; paths in a model file must be relative to its folder "
            "(pass --trust if the folder is trusted)");
  EXPECT_EQ(error_of([&] { resolve_inside(folder, "", false, "shard", "--trust"); }), "shard: empty path");
  EXPECT_EQ(error_of([&] { resolve_inside(folder, "nope.bin", false, "shard", "--trust"); }),
            "shard 'nope.bin': '" + folder + "/nope.bin' does not exist (No such file or directory)");
  EXPECT_EQ(resolve_inside(folder, "../outside.bin", true, "shard", "--trust"), fs::canonical(path("outside.bin")).string());
}

// ---- Output -------------------------------------------------------------------------------------

TEST_F(HostIoTest, AtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  const std::string p = write("out.pte", "old contents");
  ::chmod(p.c_str(), 0640);
  write_file_atomically(p, "new", 3, "-o");
  EXPECT_EQ(read(p), "new");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);  // the replaced file's mode
  const std::string fresh = path("fresh.pte");
  write_file_atomically(fresh, "x", 1);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0666u & ~mask);  // as a plain open() would make it, not mkstemp's 0600
  EXPECT_EQ(names(), (std::vector<std::string>{"fresh.pte", "out.pte"}));
}

TEST_F(HostIoTest, AnAbandonedAtomicFileLeavesTheDestinationAlone) {
  const std::string p = write("out.pte", "old contents");
  std::string temp;
  {
    AtomicFile f(p, "-o");
    temp = f.temp_path();
    f.write("half");
    EXPECT_EQ(fs::path(temp).parent_path(), dir_);
    EXPECT_TRUE(fs::exists(temp));
  }  // e.g. an exception between write and commit
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_EQ(read(p), "old contents");
  EXPECT_EQ(names(), std::vector<std::string>{"out.pte"});
}

TEST_F(HostIoTest, AnOutputThatIsAnInputIsRefusedWhateverItsSpelling) {
  fs::create_directories(dir_ / "x");
  const std::string model = write("model.onnx", "model bytes");
  ASSERT_EQ(::link(model.c_str(), path("hard.onnx").c_str()), 0);
  const std::string spellings[] = {model, path("x/../model.onnx"), path("hard.onnx")};
  for (const std::string& out : spellings) {
    SCOPED_TRACE(out);
    EXPECT_EQ(error_of([&] { write_file_atomically(out, "pte", 3, "-o", {model}); }),
              "-o " + out + ": is the same file as the input " + model + "; choose another output");
    EXPECT_EQ(error_of([&] { refuse_same_file(out, model, "-o"); }),
              "-o " + out + ": is the same file as the input " + model + "; choose another output");
  }
  // Files read while a ReadLog is active count as inputs too.
  {
    ReadLog log;
    read_regular_file(model, 100);
    EXPECT_EQ(error_of([&] { write_file_atomically(path("hard.onnx"), "pte", 3, "--output-dir"); }),
              "--output-dir " + path("hard.onnx") + ": is the same file as the input " + model + "; choose another output");
  }
  EXPECT_EQ(read(model), "model bytes");
  EXPECT_EQ(names(), (std::vector<std::string>{"hard.onnx", "model.onnx", "x"}));
  write_file_atomically(path("other.pte"), "pte", 3, "-o", {model});  // a different file is fine
  EXPECT_EQ(read(path("other.pte")), "pte");
}

TEST_F(HostIoTest, AnOutputMustBeARegularFileAndWritesThroughASymlink) {
  EXPECT_EQ(error_of([&] { write_file_atomically(dir_.string(), "x", 1, "-o"); }),
            "-o " + dir_.string() + ": not a regular file (directory); outputs are written as regular files");
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { write_file_atomically(fifo, "x", 1); }),
            fifo + ": not a regular file (FIFO); outputs are written as regular files");
  EXPECT_NE(error_of([&] { write_file_atomically(path("missing/out.pte"), "x", 1, "-o"); })
                .find("-o " + path("missing/out.pte") + ": cannot create a temporary file in '" + path("missing") + "'"),
            std::string::npos);
  const std::string target = write("target.pte", "old");
  fs::create_symlink("target.pte", dir_ / "link.pte");
  write_file_atomically(path("link.pte"), "new", 3);
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.pte"));
  EXPECT_EQ(read(target), "new");
}

}  // namespace
}  // namespace ember::tools
