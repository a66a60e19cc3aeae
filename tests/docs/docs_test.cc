// SPDX-License-Identifier: Apache-2.0
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "markdown_links.h"
#include "protocol/frame.h"

#ifndef KVPORT_SOURCE_DIR
#error "KVPORT_SOURCE_DIR must name the repository root"
#endif

namespace kvport::docs {
namespace {

namespace fs = std::filesystem;

std::string Describe(const std::vector<BrokenLink>& links) {
  std::string out;
  for (const BrokenLink& b : links) {
    out += b.file.string() + ":" + std::to_string(b.line) + ": " + b.target + "\n";
  }
  return out;
}

// The project's own documentation: README.md (when present) and every docs/*.md.
TEST(DocsTest, EveryRelativeLinkInReadmeAndDocsResolves) {
  const fs::path root = KVPORT_SOURCE_DIR;
  std::vector<fs::path> pages;
  if (fs::exists(root / "README.md")) pages.push_back(root / "README.md");
  ASSERT_TRUE(fs::is_directory(root / "docs")) << root / "docs";
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") {
      pages.push_back(entry.path());
    }
  }
  ASSERT_FALSE(pages.empty());
  std::vector<BrokenLink> broken;
  for (const fs::path& page : pages) {
    for (BrokenLink& b : FindBrokenLinks(page, root))
      broken.push_back(std::move(b));
  }
  EXPECT_TRUE(broken.empty()) << "broken links:\n" << Describe(broken);
}

// docs/protocol.md is normative: its title, and its Versioning section, name the versions this
// build speaks (protocol::kMinProtocolVersion to kMaxProtocolVersion), so a version bump that
// leaves the page behind fails here.
TEST(DocsTest, ProtocolPageNamesTheVersionsThisBuildSpeaks) {
  std::ifstream in(fs::path(KVPORT_SOURCE_DIR) / "docs" / "protocol.md");
  ASSERT_TRUE(in.good());
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string range = "versions " + std::to_string(protocol::kMinProtocolVersion) + " to " +
                            std::to_string(protocol::kMaxProtocolVersion);
  EXPECT_TRUE(page.starts_with("# kvport wire protocol, " + range + "\n"))
      << "docs/protocol.md's title should be \"# kvport wire protocol, " << range << "\"";
  EXPECT_NE(page.find("this document describes " + range + "."), std::string::npos)
      << "docs/protocol.md's Versioning section should say \"this document describes " << range
      << ".\"";
}

// The checker itself, on a temporary tree, so that it is known to catch a broken link.
class LinkCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            (std::string("kvport_docs_test_") + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "docs");
    std::ofstream(root_ / "docs" / "exists.md") << "# here\n";
    std::ofstream(root_ / "docs" / "with space.md") << "# here\n";
    std::ofstream(root_ / "top.txt") << "top\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<BrokenLink> Check(const std::string& markdown) {
    const fs::path page = root_ / "docs" / "page.md";
    std::ofstream(page) << markdown;
    return FindBrokenLinks(page, root_);
  }

  fs::path root_;
};

TEST_F(LinkCheckerTest, ResolvableLinksPass) {
  EXPECT_TRUE(Check("See [a](exists.md), [b](exists.md#here), [c](./exists.md?x=1),\n"
                    "[d](../top.txt), [e](/top.txt), [f](<with space.md>), [g](with%20space.md),\n"
                    "![img](exists.md \"title\"), [web](https://example.com/missing.md),\n"
                    "[mail](mailto:a@b.c), [anchor](#section), [dir](../docs)\n"
                    "[ref]: exists.md\n")
                  .empty());
}

TEST_F(LinkCheckerTest, MissingFileIsReportedWithItsLine) {
  const std::vector<BrokenLink> broken =
      Check("# Title\n\nGood [a](exists.md).\nBad [b](missing.md#part) here.\n");
  ASSERT_EQ(broken.size(), 1u) << Describe(broken);
  EXPECT_EQ(broken[0].line, 4);
  EXPECT_EQ(broken[0].target, "missing.md#part");
  EXPECT_EQ(broken[0].file.filename(), "page.md");
}

TEST_F(LinkCheckerTest, ReferenceDefinitionsImagesAndRootLinksAreChecked) {
  const std::vector<BrokenLink> broken =
      Check("![diagram](img/none.png)\n[ref]: ../nowhere.md\n[root](/absent.txt)\n");
  ASSERT_EQ(broken.size(), 3u) << Describe(broken);
  EXPECT_EQ(broken[0].target, "img/none.png");
  EXPECT_EQ(broken[1].target, "../nowhere.md");
  EXPECT_EQ(broken[2].target, "/absent.txt");
}

TEST_F(LinkCheckerTest, CodeIsNotALink) {
  EXPECT_TRUE(Check("```\n[a](missing.md)\n```\nText `[b](missing.md)` and ``x [c](m.md) x``.\n"
                    "~~~yaml\n[d](missing.md)\n~~~\n")
                  .empty());
  // After the fence closes, links count again.
  EXPECT_EQ(Check("```\ncode\n```\n[a](missing.md)\n").size(), 1u);
}

TEST_F(LinkCheckerTest, UnreadableFileIsReported) {
  const std::vector<BrokenLink> broken = FindBrokenLinks(root_ / "docs" / "absent.md", root_);
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_EQ(broken[0].line, 0);
}

}  // namespace
}  // namespace kvport::docs
