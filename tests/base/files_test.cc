// Atomic writes (pipetune/base/files.h): a reader sees the old file or the
// new one, never half of one, and a failure leaves nothing behind.
#include "pipetune/base/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipetune {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipetune-files-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  size_t Entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }

  fs::path dir_;
};

TEST_F(FilesTest, ReplacesTheContentsAndKeepsTheFilesMode) {
  fs::path target = dir_ / "plan.json";
  ASSERT_TRUE(WriteFileAtomically(target, "old").ok());
  ::chmod(target.c_str(), 0600);
  ASSERT_TRUE(WriteFileAtomically(target, std::string(1 << 20, 'x')).ok());
  EXPECT_EQ(Read(target), std::string(1 << 20, 'x'));
  struct stat info {};
  ASSERT_EQ(::stat(target.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(Entries(), 1u);  // no temporary left beside it
}

TEST_F(FilesTest, AFailingWriterLeavesTheOldFileAndNoTemporary) {
  fs::path target = dir_ / "timeline.json";
  ASSERT_TRUE(WriteFileAtomically(target, "kept").ok());
  Status status = WriteFileAtomically(target, [](std::ostream& out) {
    out << "half of a timeline";
    return InvalidInput("trace.bin: byte 4096: a truncated chunk");
  });
  EXPECT_EQ(status.code(), StatusCode::kInvalidInput);
  EXPECT_NE(status.message().find("byte 4096"), std::string::npos);
  EXPECT_EQ(Read(target), "kept");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(FilesTest, FilesWrittenTogetherAppearOnlyWhenCommitted) {
  fs::path a = dir_ / "a.cc", b = dir_ / "b.cc";
  {
    StatusOr<PendingFile> first = PendingFile::Write(a, "int a;");
    StatusOr<PendingFile> second = PendingFile::Write(b, "int b;");
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_FALSE(fs::exists(a));
    EXPECT_TRUE(first->Commit().ok());
    EXPECT_EQ(first->Commit().code(), StatusCode::kInvalidInput);  // once only
    // `second` is dropped uncommitted: it never appears, nothing is left.
  }
  EXPECT_EQ(Read(a), "int a;");
  EXPECT_FALSE(fs::exists(b));
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(FilesTest, AMissingDirectoryIsAnIoErrorNamingThePath) {
  fs::path target = dir_ / "no" / "such" / "out.json";
  Status status = WriteFileAtomically(target, "x");
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find((dir_ / "no" / "such").string()), std::string::npos);
}

}  // namespace
}  // namespace pipetune
