// Extension<T> behaves as an optional value: a copy is independent, a move
// empties its source, and the value is destroyed once.
#include "pipetune/base/extension.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pipetune {
namespace {

struct Section {
  std::vector<std::string> notes;
};

// Declared only: a holder of Extension<Opaque> is copied and destroyed
// before Opaque is defined (as every user of a Diagnosis does with a
// DataLoader's section without dataloader_sections.h). This file would not compile
// if that needed Opaque's definition.
struct Opaque;
struct Holder {
  Extension<Opaque> part;
};
Holder CopyOf(const Holder& h) { return h; }
void Drop(Holder h) { (void)h; }

struct Opaque {
  int* destroyed;
  ~Opaque() { ++*destroyed; }
};

TEST(ExtensionTest, EmptyByDefault) {
  Extension<Section> e;
  EXPECT_FALSE(e.has_value());
  EXPECT_FALSE(static_cast<bool>(e));
}

TEST(ExtensionTest, CopiesAreIndependentValues) {
  Extension<Section> a;
  a = Section{{"one"}};
  Extension<Section> b = a;
  b->notes.push_back("two");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->notes.size(), 1u);
  EXPECT_EQ((*b).notes.size(), 2u);
  a = b;
  EXPECT_EQ(a->notes.size(), 2u);
}

TEST(ExtensionTest, MoveEmptiesTheSourceAndResetDestroys) {
  int destroyed = 0;
  {
    Holder h;
    h.part = Opaque{&destroyed};  // the temporary's destruction counts once
    destroyed = 0;
    Holder copy = CopyOf(h);
    Holder moved = std::move(h);
    EXPECT_FALSE(h.part.has_value());  // NOLINT(bugprone-use-after-move): moved-from is empty, by contract
    EXPECT_TRUE(moved.part.has_value());
    Drop(std::move(copy));
    EXPECT_EQ(destroyed, 1);
  }
  EXPECT_EQ(destroyed, 2);  // the moved one's, once; the moved-from held none
}

}  // namespace
}  // namespace pipetune
