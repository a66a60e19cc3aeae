// SPDX-License-Identifier: Apache-2.0
// The one endpoint grammar the client, the config check and the CLI share.
#include "common/endpoint_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvport {
namespace {

using Strings = std::vector<std::string>;

TEST(EndpointTextTest, EtcdListsSplitOnCommasAndRefuseEmptyEntries) {
  EXPECT_EQ(*SplitEtcdEndpoints(""), Strings{});
  EXPECT_EQ(*SplitEtcdEndpoints("a:1"), Strings{"a:1"});
  EXPECT_EQ(*SplitEtcdEndpoints("a:1,b:2"), (Strings{"a:1", "b:2"}));
  for (const char* bad : {",", "a:1,", ",a:1", "a:1,,b:2"}) {
    Result<Strings> r = SplitEtcdEndpoints(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("empty entry"), std::string::npos) << bad;
  }
}

TEST(EndpointTextTest, TheThreeFormsAndTheirOptions) {
  Result<EndpointText> list = ParseEndpointText("eic://a:1;b:2;/ns?replicas=2&write_quorum=2");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->kind, EndpointText::Kind::kNodes);
  EXPECT_EQ(list->addresses, (Strings{"a:1", "b:2"}));  // EIC's trailing ';' is no entry
  EXPECT_EQ(list->ns, "ns");
  EXPECT_EQ(list->replicas, 2);
  EXPECT_EQ(list->write_quorum, 2);

  Result<EndpointText> etcd = ParseEndpointText("etcd:e:2379,f:2379/c1/ns/");
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  EXPECT_EQ(etcd->kind, EndpointText::Kind::kEtcd);
  EXPECT_EQ(etcd->addresses, (Strings{"e:2379", "f:2379"}));
  EXPECT_EQ(etcd->cluster, "c1");
  EXPECT_EQ(etcd->ns, "ns");

  Result<EndpointText> unix_socket = ParseEndpointText("unix:/run/kvport.sock");
  ASSERT_TRUE(unix_socket.ok());
  EXPECT_EQ(unix_socket->kind, EndpointText::Kind::kUnix);
  EXPECT_EQ(unix_socket->unix_path, "/run/kvport.sock");

  for (const char* bad : {"etcd:e:2379,/c", "etcd:e:2379/", "a:1;;", "a:1/x/y", "a:1?x=1",
                          "a:1?replicas=2&write_quorum=3", "redis://a:1"}) {
    EXPECT_FALSE(ParseEndpointText(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kvport
