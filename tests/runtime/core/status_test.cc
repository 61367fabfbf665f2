#include "runtime/core/status.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "tests/common/test_util.h"

namespace ember {
namespace {

constexpr int kErrorCount = 17;  // Ok .. Internal

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.code(), Error::Ok);
  EXPECT_TRUE(Status::ok().is_ok());
}

TEST(StatusTest, ErrorMacroKeepsWhatFileAndLine) {
  const int line = __LINE__ + 1;
  Status s = EMBER_ERROR(Error::NotFound, "no such thing");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Error::NotFound);
#if EMBER_ERROR_CONTEXT
  EXPECT_STREQ(s.what(), "no such thing");
  EXPECT_NE(std::strstr(s.file(), "status_test.cc"), nullptr);
  EXPECT_EQ(s.line(), line);
#endif
}

TEST(StatusTest, IsTriviallyCopyable) {
  static_assert(std::is_trivially_copyable_v<Status>);
  static_assert(std::is_trivially_copyable_v<ErrorContext>);
}

TEST(ErrorTest, EveryCodeHasADistinctName) {
  std::set<std::string> names;
  for (int i = 0; i < kErrorCount; ++i) {
    const char* name = to_string(static_cast<Error>(i));
    ASSERT_NE(name, nullptr);
    EXPECT_STRNE(name, "UnknownError") << "code " << i;
    EXPECT_GT(std::strlen(name), 0u);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kErrorCount));
  EXPECT_STREQ(to_string(Error::Ok), "Ok");
  EXPECT_STREQ(to_string(Error::IntegrityError), "IntegrityError");
  EXPECT_STREQ(to_string(Error::Internal), "Internal");
}

TEST(ErrorTest, StableNumbers) {
  EXPECT_EQ(static_cast<int>(Error::InvalidArgument), 1);
  EXPECT_EQ(static_cast<int>(Error::InvalidProgram), 2);
  EXPECT_EQ(static_cast<int>(Error::IntegrityError), 3);
  EXPECT_EQ(static_cast<int>(Error::VersionMismatch), 4);
  EXPECT_EQ(static_cast<int>(Error::FeatureMissing), 5);
  EXPECT_EQ(static_cast<int>(Error::KernelMissing), 6);
  EXPECT_EQ(static_cast<int>(Error::BackendUnavailable), 7);
  EXPECT_EQ(static_cast<int>(Error::NotFound), 8);
  EXPECT_EQ(static_cast<int>(Error::OutOfMemory), 11);
  EXPECT_EQ(static_cast<int>(Error::Cancelled), 15);
  EXPECT_EQ(static_cast<int>(Error::Internal), 16);
}

TEST(ErrorTest, UnknownCodeIsNamedNotNull) {
  const char* name = to_string(static_cast<Error>(200));
  ASSERT_NE(name, nullptr);
  EXPECT_STREQ(name, "UnknownError");
}

TEST(ErrorTest, EveryPhaseHasAName) {
  for (int i = 0; i <= 5; ++i) {
    const char* name = to_string(static_cast<ErrorContext::Phase>(i));
    ASSERT_NE(name, nullptr);
    EXPECT_STRNE(name, "unknown") << "phase " << i;
  }
  EXPECT_STREQ(to_string(static_cast<ErrorContext::Phase>(99)), "unknown");
}

Result<int> Half(int x) {
  if (x % 2 != 0) return EMBER_ERROR(Error::InvalidArgument, "odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  EMBER_ASSIGN_OR_RETURN(int h, Half(x));
  EMBER_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  EMBER_RETURN_IF_ERROR(Half(x).status());
  return Status::ok();
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = Half(8);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r.has_value());
  EXPECT_EQ(r.value(), 4);
  EXPECT_EQ(*r, 4);
  EXPECT_EQ(r.error(), Error::Ok);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = Half(7);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::InvalidArgument);
  EXPECT_EQ(r.status().code(), Error::InvalidArgument);
}

TEST(ResultTest, OkStatusBecomesInternal) {
  Result<int> r = Result<int>(Status::ok());
  EXPECT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::Internal);
}

TEST(ResultTest, AssignOrReturnPropagatesError) {
  EXPECT_EQ(Quarter(12).value(), 3);
  EXPECT_EQ(Quarter(6).error(), Error::InvalidArgument);
  EXPECT_EQ(Quarter(7).error(), Error::InvalidArgument);
}

TEST(ResultTest, ReturnIfErrorPropagatesError) {
  EXPECT_TRUE(CheckEven(4).is_ok());
  EXPECT_EQ(CheckEven(5).code(), Error::InvalidArgument);
}

struct MoveOnly {
  explicit MoveOnly(int v) : value(new int(v)) {}
  MoveOnly(MoveOnly&& o) noexcept : value(o.value) { o.value = nullptr; }
  MoveOnly(const MoveOnly&) = delete;
  ~MoveOnly() { delete value; }
  int* value;
};

TEST(ResultTest, MoveOnlyValueIsMovedAndDestroyedOnce) {
  Result<MoveOnly> r = MoveOnly(5);
  ASSERT_TRUE(r.is_ok());
  Result<MoveOnly> moved(std::move(r));
  ASSERT_TRUE(moved.is_ok());
  EXPECT_EQ(*moved->value, 5);
  MoveOnly out = std::move(moved).value();
  EXPECT_EQ(*out.value, 5);
}

TEST(ErrorContextTest, FailFillsContextAndReturnsCode) {
  testing::QuietLogs quiet;
  ErrorContext ctx;
  EXPECT_FALSE(ctx.has_error());
  Status s = EMBER_FAIL(&ctx, Error::KernelMissing, "op %s at instruction %d", "linear", 17);
  EXPECT_EQ(s.code(), Error::KernelMissing);
  EXPECT_TRUE(ctx.has_error());
  EXPECT_EQ(ctx.code, Error::KernelMissing);
  EXPECT_STREQ(ctx.message, "op linear at instruction 17");
}

TEST(ErrorContextTest, FirstFailureWins) {
  testing::QuietLogs quiet;
  ErrorContext ctx;
  (void)EMBER_FAIL(&ctx, Error::InvalidProgram, "root cause %d", 1);
  Status second = EMBER_FAIL(&ctx, Error::OutOfMemory, "consequence %d", 2);
  EXPECT_EQ(second.code(), Error::OutOfMemory);  // the return value is the new code...
  EXPECT_EQ(ctx.code, Error::InvalidProgram);    // ...the context keeps the first
  EXPECT_STREQ(ctx.message, "root cause 1");
  ctx.clear();
  EXPECT_FALSE(ctx.has_error());
  EXPECT_EQ(ctx.message[0], '\0');
  (void)EMBER_FAIL(&ctx, Error::OutOfMemory, "after clear");
  EXPECT_EQ(ctx.code, Error::OutOfMemory);
  EXPECT_STREQ(ctx.message, "after clear");
}

TEST(ErrorContextTest, NullContextIsAllowed) {
  testing::QuietLogs quiet;
  Status s = EMBER_FAIL(nullptr, Error::NotFound, "nothing %s", "here");
  EXPECT_EQ(s.code(), Error::NotFound);
}

TEST(ErrorContextTest, LongMessageIsTruncatedAndTerminated) {
  testing::QuietLogs quiet;
  ErrorContext ctx;
  const std::string longer(1000, 'x');
  (void)EMBER_FAIL(&ctx, Error::InvalidArgument, "%s", longer.c_str());
  EXPECT_EQ(std::strlen(ctx.message), ErrorContext::kMessageSize - 1);
  EXPECT_EQ(ctx.message[ErrorContext::kMessageSize - 1], '\0');
}

TEST(ErrorContextTest, FailLogsTheMessage) {
  static std::string* logged = nullptr;
  std::string captured;
  logged = &captured;
  PlatformHooks hooks;
  hooks.log = [](LogLevel, const char*, int, const char* message) { *logged += message; };
  set_platform_hooks(hooks);
  (void)EMBER_FAIL(nullptr, Error::BackendFailed, "device %d fell over", 3);
  { testing::QuietLogs restore; }  // back to the default-like stderr logger
  logged = nullptr;
  EXPECT_NE(captured.find("BackendFailed"), std::string::npos) << captured;
  EXPECT_NE(captured.find("device 3 fell over"), std::string::npos) << captured;
}

// With an ErrorContext the caller reports the message (one line per error on the CLIs), so fail()
// logs it only at Debug level; without one it is logged as an error.
TEST(ErrorContextTest, FailWithContextLogsOnlyAtDebugLevel) {
  static std::vector<LogLevel>* levels = nullptr;
  std::vector<LogLevel> captured;
  levels = &captured;
  PlatformHooks hooks;
  hooks.log = [](LogLevel level, const char*, int, const char*) { levels->push_back(level); };
  set_platform_hooks(hooks);
  set_log_level(LogLevel::Debug);
  ErrorContext ctx;
  (void)EMBER_FAIL(&ctx, Error::InvalidProgram, "bad header %d", 1);
  (void)EMBER_FAIL(nullptr, Error::InvalidProgram, "no context");
  set_log_level(LogLevel::Warning);
  { testing::QuietLogs restore; }
  levels = nullptr;
  EXPECT_STREQ(ctx.message, "bad header 1");
  ASSERT_EQ(captured.size(), 2u);
  EXPECT_EQ(captured[0], LogLevel::Debug);
  EXPECT_EQ(captured[1], LogLevel::Error);
}

}  // namespace
}  // namespace ember
