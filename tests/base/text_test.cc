// EscapeXml: what the HTML report, its charts and the JUnit file write for a
// stage name, a message or a title a user chose.
#include "pipetune/base/text.h"

#include <gtest/gtest.h>

namespace pipetune {
namespace {

TEST(EscapeXml, EveryMarkupCharacterBecomesAnEntity) {
  EXPECT_EQ(EscapeXml(R"(<map fn="a&b"> 'x')"), "&lt;map fn=&quot;a&amp;b&quot;&gt; &#39;x&#39;");
}

TEST(EscapeXml, OtherTextIsKeptByteForByte) {
  EXPECT_EQ(EscapeXml("transform[0]:RandomResizedCrop, 3.2 ms \xc2\xb5s"),
            "transform[0]:RandomResizedCrop, 3.2 ms \xc2\xb5s");
  EXPECT_EQ(EscapeXml(""), "");
}

TEST(EscapeXml, AnEntityAlreadyWrittenIsEscapedAgain) {
  // The text is data, not markup: "&lt;" in a stage name shows as typed.
  EXPECT_EQ(EscapeXml("&lt;"), "&amp;lt;");
}

// The published FNV-1a 64 test vectors, and the gate's historical basis
// giving the hash its saved baselines hold (so they stay valid).
TEST(Fnv1a64, MatchesTheReferenceAndKeepsTheBaselinesBasis) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(Fnv1a64("", kBaselineHashBasis), kBaselineHashBasis);
  EXPECT_NE(Fnv1a64("a", kBaselineHashBasis), Fnv1a64("a"));
}

}  // namespace
}  // namespace pipetune
