// SPDX-License-Identifier: Apache-2.0
#include "server/list_cursors.h"

#include <gtest/gtest.h>

namespace kvport::server {
namespace {

TEST(ListCursorTableTest, IssuedCursorsAreNonZeroUniqueAndBoundToTheirNamespace) {
  ListCursorTable table;
  uint64_t a = table.Issue(/*owner=*/1, "ns", "key-5");
  uint64_t b = table.Issue(1, "ns", "key-9");
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.Find(a, "ns"), "key-5");
  EXPECT_EQ(table.Find(a, "ns"), "key-5");  // reusable: a client may retry a page
  EXPECT_EQ(table.Find(b, "ns"), "key-9");
  EXPECT_FALSE(table.Find(a, "other").has_value());
  EXPECT_FALSE(table.Find(12345, "ns").has_value());
}

TEST(ListCursorTableTest, AnOwnerBeyondItsShareForgetsItsOwnOldestNeverAnothers) {
  ListCursorTable table;
  const uint64_t victim = table.Issue(/*owner=*/7, "", "v");
  std::vector<uint64_t> flood;
  for (size_t i = 0; i < 10 * ListCursorTable::kCursorsPerSession; ++i)
    flood.push_back(table.Issue(/*owner=*/8, "", std::to_string(i)));
  EXPECT_EQ(table.Find(victim, ""), "v");
  EXPECT_EQ(table.size(), 1 + ListCursorTable::kCursorsPerSession);
  EXPECT_FALSE(table.Find(flood.front(), "").has_value());
  EXPECT_EQ(table.Find(flood.back(), ""), std::to_string(flood.size() - 1));
}

TEST(ListCursorTableTest, AnOwnersCursorsEndWithIt) {
  ListCursorTable table;
  const uint64_t mine = table.Issue(1, "ns", "a");
  const uint64_t theirs = table.Issue(2, "ns", "b");
  table.ForgetOwner(1);
  EXPECT_FALSE(table.Find(mine, "ns").has_value());
  EXPECT_EQ(table.Find(theirs, "ns"), "b");
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace kvport::server
