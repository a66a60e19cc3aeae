// SPDX-License-Identifier: Apache-2.0
#include "server/list_cursors.h"

#include <gtest/gtest.h>

namespace kvport::server {
namespace {

TEST(ListCursorTableTest, IssuedCursorsAreNonZeroUniqueAndBoundToTheirNamespace) {
  ListCursorTable table;
  uint64_t a = table.Issue("ns", "key-5");
  uint64_t b = table.Issue("ns", "key-9");
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.Find(a, "ns"), "key-5");
  EXPECT_EQ(table.Find(a, "ns"), "key-5");  // reusable: a client may retry a page
  EXPECT_EQ(table.Find(b, "ns"), "key-9");
  EXPECT_FALSE(table.Find(a, "other").has_value());
  EXPECT_FALSE(table.Find(12345, "ns").has_value());
}

TEST(ListCursorTableTest, ForgetsTheOldestBeyondItsBound) {
  ListCursorTable table(/*max_entries=*/2);
  uint64_t first = table.Issue("", "1");
  uint64_t second = table.Issue("", "2");
  uint64_t third = table.Issue("", "3");
  EXPECT_FALSE(table.Find(first, "").has_value());
  EXPECT_EQ(table.Find(second, ""), "2");
  EXPECT_EQ(table.Find(third, ""), "3");
}

}  // namespace
}  // namespace kvport::server
