// SPDX-License-Identifier: Apache-2.0
#include "kvport/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace kvport {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::NotFound("key 'a' in namespace 'ns'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: key 'a' in namespace 'ns'");
  Status copy = s;
  EXPECT_EQ(copy.ToString(), s.ToString());
  EXPECT_EQ(s.WithContext("mget").message(), "mget: key 'a' in namespace 'ns'");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, FromErrnoAppendsStrerror) {
  Status s = Status::FromErrno("open /nope", ENOENT);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "open /nope: No such file or directory");
}

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  KVPORT_ASSIGN_OR_RETURN(int h, Half(x));
  KVPORT_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(ResultTest, ValueOrStatus) {
  Result<int> r = Half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 4);
  Result<int> e = Half(3);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  EXPECT_EQ(Quarter(6, &q).code(), StatusCode::kInvalidArgument);
}

TEST(ResultTest, OkStatusIsNotAValue) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kvport
