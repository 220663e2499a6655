#include "pipetune/base/size.h"

#include <gtest/gtest.h>

namespace pipetune {
namespace {

TEST(ParseSize, AcceptsBinaryDecimalAndPlainBytes) {
  EXPECT_EQ(*ParseSize("4GiB"), 4ull << 30);
  EXPECT_EQ(*ParseSize("4Gi"), 4ull << 30);
  EXPECT_EQ(*ParseSize("512 MiB"), 512ull << 20);
  EXPECT_EQ(*ParseSize("1.5GB"), 1500000000ull);
  EXPECT_EQ(*ParseSize("100k"), 100000ull);
  EXPECT_EQ(*ParseSize("4096"), 4096ull);
  EXPECT_EQ(*ParseSize("64B"), 64ull);
  EXPECT_EQ(*ParseSize("2tib"), 2ull << 40);
}

TEST(ParseSize, RejectsMalformedSizesWithTheText) {
  for (const char* bad : {"", "GiB", "4 GiBs", "1.2.3MB", "-4GiB", "4 Gb extra", "4XB", "1e30TB"}) {
    StatusOr<uint64_t> parsed = ParseSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(parsed.status().message().find("malformed size"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(FormatBytes, ReadsLikeAPerson) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(4.0 * (1ull << 30)), "4.0 GiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

}  // namespace
}  // namespace pipetune
