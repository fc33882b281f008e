#include "loadgen/proto_call.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;

// A service unrelated to rsslab: nested message, repeated fields, an enum.
constexpr char kProto[] = R"(
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
enum Kind { KIND_UNSPECIFIED = 0; BOOK = 1; TOY = 2; }
message Item { string sku = 1; int32 qty = 2; Kind kind = 3; }
message Order {
  uint64 id = 1;
  string customer = 2;
  Item item = 3;
  repeated Item extra = 4;
  repeated string tags = 5;
  double price = 6;
  bool gift = 7;
  map<string, string> notes = 8;
  google.protobuf.Timestamp at = 9;
  int64 big = 10;
  bytes blob = 11;
}
message Receipt { uint64 id = 1; }
service Cart {
  rpc Add(Order) returns (Receipt);
  rpc Watch(Order) returns (stream Receipt);
  rpc Bulk(stream Order) returns (Receipt);
  rpc Chat(stream Order) returns (stream Receipt);
}
)";

class ProtoCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/proto_call_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/shop.proto") << kProto;
    auto c = ProtoCatalog::Load({dir_ + "/shop.proto"}, {});
    ASSERT_TRUE(c.ok()) << c.status();
    catalog_ = *std::move(c);
  }
  void TearDown() override { system(("rm -rf " + dir_).c_str()); }

  absl::StatusOr<std::unique_ptr<RequestTemplate>> Compile(absl::string_view json) {
    auto md = catalog_->FindMethod("shop.v1.Cart/Add");
    EXPECT_TRUE(md.ok());
    return RequestTemplate::Compile(catalog_.get(), (*md)->input_type(), json, "--data");
  }

  std::string Json(const google::protobuf::Message& m) {
    std::string out;
    google::protobuf::util::JsonPrintOptions o;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out, o).ok());
    return out;
  }

  std::string dir_;
  std::unique_ptr<ProtoCatalog> catalog_;
};

TEST_F(ProtoCallTest, FindsMethodsOfEveryKind) {
  EXPECT_TRUE(catalog_->FindMethod("shop.v1.Cart/Add").ok());
  EXPECT_TRUE(catalog_->FindMethod("/shop.v1.Cart/Add").ok());
  EXPECT_THAT(catalog_->FindMethod("shop.v1.Cart/Nope").status().message(),
              HasSubstr("has no method Nope (methods: Add, Watch, Bulk, Chat)"));
  EXPECT_THAT(catalog_->FindMethod("shop.v1.Till/Add").status().message(),
              HasSubstr("services: shop.v1.Cart"));
  // Streaming methods are found like unary ones (the engine streams them).
  EXPECT_TRUE(catalog_->FindMethod("shop.v1.Cart/Watch").ok());
  EXPECT_TRUE(catalog_->FindMethod("shop.v1.Cart/Chat").ok());
  EXPECT_THAT(catalog_->FindMethod("Add").status().message(), HasSubstr("package.Service/Method"));
}

TEST_F(ProtoCallTest, BadProtoNamesFileAndLine) {
  std::ofstream(dir_ + "/bad.proto") << "syntax = \"proto3\";\nmessage X { int32 = 1; }\n";
  auto c = ProtoCatalog::Load({dir_ + "/bad.proto"}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("bad.proto:2:"));
  EXPECT_FALSE(ProtoCatalog::Load({dir_ + "/missing.proto"}, {}).ok());
}

TEST_F(ProtoCallTest, FillsEveryTemplatedField) {
  auto t = Compile(R"({"id": {{seq}}, "customer": "user-{{seq}}-{{rand_str 8}}",
      "item": {"sku": "S{{rand_int 1 5}}", "qty": {{rand_int 1 9}}, "kind": "TOY"},
      "extra": [{"sku": "a", "qty": 1}, {"sku": "b", "kind": {{rand_int 1 2}}}],
      "tags": ["x", "t{{seq}}"], "price": {{rand_int 10 20}}, "gift": true,
      "big": "{{seq}}", "notes": {"k": "v"}, "at": "2024-01-01T00:00:00Z"})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->slots(), 8u);
  std::unique_ptr<google::protobuf::Message> m((*t)->prototype().New());
  m->CopyFrom((*t)->prototype());
  std::set<std::string> customers;
  for (uint64_t seq = 1; seq <= 50; ++seq) {  // 0 is proto3's unprinted default
    (*t)->Fill(seq, 0, 1, m.get());
    const std::string j = Json(*m);
    EXPECT_THAT(j, HasSubstr(absl::StrCat("\"id\":\"", seq, "\""))) << j;
    EXPECT_THAT(j, HasSubstr(absl::StrCat("\"customer\":\"user-", seq, "-"))) << j;
    EXPECT_THAT(j, HasSubstr(absl::StrCat("\"tags\":[\"x\",\"t", seq, "\"]"))) << j;
    EXPECT_THAT(j, HasSubstr(absl::StrCat("\"big\":\"", seq, "\""))) << j;
    EXPECT_THAT(j, HasSubstr("\"kind\":\"TOY\"")) << j;
    EXPECT_THAT(j, HasSubstr("\"gift\":true")) << j;
    EXPECT_THAT(j, HasSubstr("\"at\":\"2024-01-01T00:00:00Z\"")) << j;
    const auto* d = m->GetDescriptor();
    const auto* r = m->GetReflection();
    const auto& item = r->GetMessage(*m, d->FindFieldByName("item"));
    const int qty = item.GetReflection()->GetInt32(item, item.GetDescriptor()->FindFieldByName("qty"));
    EXPECT_GE(qty, 1);
    EXPECT_LE(qty, 9);
    const double price = r->GetDouble(*m, d->FindFieldByName("price"));
    EXPECT_GE(price, 10);
    EXPECT_LE(price, 20);
    const std::string customer = r->GetString(*m, d->FindFieldByName("customer"));
    EXPECT_EQ(customer.size(), absl::StrCat("user-", seq, "-").size() + 8);
    customers.insert(customer.substr(customer.size() - 8));
  }
  EXPECT_GT(customers.size(), 45u);  // random strings differ
  // A fixed function of (seed, seq).
  std::unique_ptr<google::protobuf::Message> a((*t)->prototype().New()), b((*t)->prototype().New());
  a->CopyFrom((*t)->prototype());
  b->CopyFrom((*t)->prototype());
  (*t)->Fill(7, 0, 3, a.get());
  (*t)->Fill(7, 0, 3, b.get());
  EXPECT_EQ(Json(*a), Json(*b));
  (*t)->Fill(7, 0, 4, b.get());
  EXPECT_NE(Json(*a), Json(*b));
}

TEST_F(ProtoCallTest, MismatchNamesTheField) {
  EXPECT_THAT(Compile(R"({"custmer": "x{{seq}}"})").status().message(), HasSubstr("custmer"));
  EXPECT_THAT(Compile(R"({"item": {"qtty": 1}})").status().message(), HasSubstr("qtty"));
  EXPECT_THAT(Compile(R"({"id": "x{{seq}}"})").status().message(), HasSubstr("field id"));
  EXPECT_THAT(Compile(R"({"customer": {{seq}}})").status().message(),
              HasSubstr("field customer: a string field"));
  EXPECT_THAT(Compile(R"({"gift": {{seq}}})").status().message(), HasSubstr("field gift"));
  EXPECT_THAT(Compile(R"({"item": {"qty": {{rand_int 1 9999999999}}}})").status().message(),
              HasSubstr("field item.qty"));
  EXPECT_THAT(Compile(R"({"id": {{rand_int -1 3}}})").status().message(), HasSubstr("field id"));
  EXPECT_THAT(Compile(R"({"notes": {"k": "{{seq}}"}})").status().message(),
              HasSubstr("map fields"));
  EXPECT_THAT(Compile(R"({"item": {"kind": "TOYS"}})").status().message(), HasSubstr("TOYS"));
  EXPECT_THAT(Compile(R"({"id": {{sequence}}})").status().message(), HasSubstr("unknown placeholder"));
  EXPECT_THAT(Compile(R"({"id": {{rand_str 4}}})").status().message(), HasSubstr("inside a JSON string"));
  EXPECT_THAT(Compile(R"({"id": {{seq})").status().message(), HasSubstr("without"));
  EXPECT_THAT(Compile(R"({"id": })").status().message(), HasSubstr("Order"));
  EXPECT_TRUE(Compile("{}").ok());
  // "{{" always opens a placeholder, inside strings too.
  EXPECT_FALSE(Compile(R"({"customer": "has {{braces}} text"})").ok());
}

TEST_F(ProtoCallTest, CallSetCompilesOnceAndCyclesDataFile) {
  CallSet set(catalog_.get());
  rsslab::v1::LoadSpec spec;
  spec.set_call("shop.v1.Cart/Add");
  std::ofstream(dir_ + "/data.jsonl") << "{\"customer\": \"a{{seq}}\"}\n\n{\"customer\": \"b{{seq}}\"}\n";
  spec.set_data_file(dir_ + "/data.jsonl");
  ASSERT_TRUE(set.Add(spec).ok());
  auto src = set.Find(spec);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->method_path(), "/shop.v1.Cart/Add");
  auto m = src->NewMessage();
  src->Build(4, 1, m.get());
  EXPECT_THAT(Json(*m), HasSubstr("a4"));
  src->Build(5, 1, m.get());
  EXPECT_THAT(Json(*m), HasSubstr("b5"));

  rsslab::v1::LoadSpec none;
  EXPECT_TRUE(set.Add(none).ok());
  EXPECT_EQ(set.Find(none), nullptr);
  none.set_data("{}");
  EXPECT_THAT(set.Add(none).message(), HasSubstr("without --call"));
  CallSet no_proto(nullptr);
  EXPECT_THAT(no_proto.Add(spec).message(), HasSubstr("needs --proto"));
  spec.set_data_file(dir_ + "/missing.jsonl");
  EXPECT_FALSE(set.Add(spec).ok());
}

// A streaming call's messages: {{msg}} is the message's index in its
// stream, {{seq}} the stream's, --data_file lines go in turn by message; the
// stream knobs fit the method's kind.
TEST_F(ProtoCallTest, StreamingCallBuildsEachMessageFromItsTemplate) {
  CallSet set(catalog_.get());
  rsslab::v1::LoadSpec spec;
  spec.set_call("shop.v1.Cart/Chat");
  std::ofstream(dir_ + "/chat.jsonl")
      << "{\"id\": {{seq}}, \"customer\": \"a{{msg}}\"}\n"
      << "{\"id\": {{seq}}, \"customer\": \"b{{msg}}\", \"item\": {\"qty\": {{msg}}}}\n";
  spec.set_data_file(dir_ + "/chat.jsonl");
  spec.set_stream_messages(3);
  ASSERT_TRUE(set.Add(spec).ok());
  auto src = set.Find(spec);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->kind(), RequestSource::Kind::kBidi);
  EXPECT_EQ(src->messages(), 3u);
  auto m = src->NewMessage();
  src->BuildMessage(7, 0, 1, m.get());
  EXPECT_EQ(Json(*m), R"({"id":"7","customer":"a0"})");
  src->BuildMessage(7, 1, 1, m.get());
  EXPECT_EQ(Json(*m), R"({"id":"7","customer":"b1","item":{"qty":1}})");
  src->BuildMessage(7, 2, 1, m.get());
  EXPECT_EQ(Json(*m), R"({"id":"7","customer":"a2"})");

  rsslab::v1::LoadSpec bulk;
  bulk.set_call("shop.v1.Cart/Bulk");
  ASSERT_TRUE(set.Add(bulk).ok());
  EXPECT_EQ(set.Find(bulk)->kind(), RequestSource::Kind::kClientStreaming);
  EXPECT_EQ(set.Find(bulk)->messages(), kDefaultStreamMessages);
  rsslab::v1::LoadSpec watch;
  watch.set_call("shop.v1.Cart/Watch");
  ASSERT_TRUE(set.Add(watch).ok());
  EXPECT_EQ(set.Find(watch)->kind(), RequestSource::Kind::kServerStreaming);
  EXPECT_EQ(set.Find(watch)->messages(), 1u);
  watch.set_stream_messages(2);
  EXPECT_THAT(set.Add(watch).message(), HasSubstr("takes one request message"));
  rsslab::v1::LoadSpec unary;
  unary.set_call("shop.v1.Cart/Add");
  unary.set_stream_interval_ms(5);
  EXPECT_THAT(set.Add(unary).message(), HasSubstr("a unary method"));
  rsslab::v1::LoadSpec builtin;
  builtin.set_stream_messages(2);
  EXPECT_THAT(set.Add(builtin).message(), HasSubstr("without --call"));
}

}  // namespace
}  // namespace rsslab
