#include "loadgen/proto_source.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadgen/proto_call.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSvc[] =
    "syntax = \"proto3\";\npackage rg;\nmessage P { int32 x = 1; }\n"
    "service G { rpc Get(P) returns (P); rpc List(P) returns (stream P); }\n";

class ProtoSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/proto_source_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
    old_cwd_ = cwd;
  }
  void TearDown() override {
    ASSERT_EQ(chdir(old_cwd_.c_str()), 0);
    system(("rm -rf " + dir_).c_str());
  }
  void Write(const std::string& rel, const std::string& text) {
    const size_t slash = rel.rfind('/');
    if (slash != std::string::npos) mkdir((dir_ + "/" + rel.substr(0, slash)).c_str(), 0755);
    std::ofstream(dir_ + "/" + rel) << text;
  }
  absl::Status Load(const std::vector<std::string>& files, const std::vector<std::string>& paths) {
    return ProtoCatalog::Load(files, paths).status();
  }

  std::string dir_, old_cwd_;
};

// The route_guide case: from the folder holding the file, with that folder
// as --proto_path given absolute; from elsewhere, the name as a virtual path.
TEST_F(ProtoSourceTest, RelativeProtoFollowsProtocsRules) {
  Write("protos/route_guide.proto", kSvc);
  ASSERT_EQ(chdir((dir_ + "/protos").c_str()), 0);
  EXPECT_TRUE(Load({"route_guide.proto"}, {dir_ + "/protos"}).ok());
  EXPECT_TRUE(Load({"route_guide.proto"}, {}).ok());
  EXPECT_TRUE(Load({"./route_guide.proto"}, {"."}).ok());
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  EXPECT_TRUE(Load({"route_guide.proto"}, {"protos"}).ok());  // a virtual name
  EXPECT_TRUE(Load({"protos/route_guide.proto"}, {"protos"}).ok());
  EXPECT_TRUE(Load({"protos/route_guide.proto"}, {}).ok());  // its folder is the root
  auto s = ProtoSource::Create({"protos/route_guide.proto"}, {"."});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->virtual_files()[0], "protos/route_guide.proto");
  EXPECT_EQ((*s)->roots()[0], dir_);
  EXPECT_THAT(Load({"nope.proto"}, {"protos"}).message(),
              HasSubstr("--proto=nope.proto: no such file in the working directory or under "
                        "--proto_path " + dir_ + "/protos"));
}

TEST_F(ProtoSourceTest, NotUnderAnyProtoPathAndShadowedAreNamed) {
  Write("a/x.proto", kSvc);
  Write("b/x.proto", kSvc);
  Write("c/other.proto", kSvc);
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  EXPECT_THAT(Load({"c/other.proto"}, {"a"}).message(), HasSubstr("not under any --proto_path"));
  EXPECT_THAT(Load({"b/x.proto"}, {"a", "b"}).message(),
              HasSubstr("shadowed by " + dir_ + "/a/x.proto"));
  EXPECT_TRUE(Load({"a/x.proto"}, {"a", "b"}).ok());
  EXPECT_THAT(Load({"a/x.proto"}, {"missing"}).message(),
              HasSubstr("--proto_path=missing: not a directory"));
}

// Imports are searched in the roots in order: the first root's dep wins.
TEST_F(ProtoSourceTest, ImportsAreSearchedInOrder) {
  Write("first/dep.proto", "syntax = \"proto3\";\nmessage D { int32 first = 1; }\n");
  Write("second/dep.proto", "syntax = \"proto3\";\nmessage D { int32 second = 1; }\n");
  Write("main/m.proto",
        "syntax = \"proto3\";\nimport \"dep.proto\";\nmessage M { D d = 1; }\n"
        "service S { rpc Go(M) returns (M); }\n");
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  for (const auto& [order, field] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"main", "first", "second"}, "first"}, {{"main", "second", "first"}, "second"}}) {
    auto c = ProtoCatalog::Load({"main/m.proto"}, order);
    ASSERT_TRUE(c.ok()) << c.status();
    auto md = (*c)->FindMethod("S/Go");
    ASSERT_TRUE(md.ok()) << md.status();
    const auto* d = (*md)->input_type()->field(0)->message_type();
    EXPECT_NE(d->FindFieldByName(field), nullptr) << order[1];
  }
  EXPECT_THAT(Load({"main/m.proto"}, {"main"}).message(), HasSubstr("dep.proto"));
}

TEST_F(ProtoSourceTest, NestingDepthSkipsCommentsAndStrings) {
  int line = 0;
  EXPECT_EQ(ProtoNestingDepth("message A { message B { map<string, int32> m = 1; } }", 64, &line), 3);
  EXPECT_EQ(ProtoNestingDepth("// {{{{\n/* {{{{ */ option x = \"{{{{\"; m { }", 64, &line), 1);
  EXPECT_EQ(ProtoNestingDepth("a { b { c { d {", 3, &line), 4);
  EXPECT_EQ(ProtoNestingDepth("a {\n b {\n  c {\n", 2, &line), 3);
  EXPECT_EQ(line, 3);
}

std::string Deep(int depth) {
  std::string s = "syntax = \"proto3\";\n";
  for (int i = 0; i < depth; ++i) absl::StrAppend(&s, "message M", i, " {\n");
  for (int i = 0; i < depth; ++i) s += "}\n";
  return s;
}

// Each bound refused in one line naming the file and the bound, before
// protobuf parses the file that broke it.
TEST_F(ProtoSourceTest, BoundsAreCheckedBeforeParsing) {
  Write("deep.proto", Deep(5000));
  const absl::Status deep = Load({dir_ + "/deep.proto"}, {});
  EXPECT_THAT(deep.message(), HasSubstr(dir_ + "/deep.proto:66: nested deeper than 64 levels"));
  EXPECT_THAT(deep.message(), Not(HasSubstr("\n")));
  Write("ok.proto", Deep(30));  // protobuf itself stops at 32 nested messages
  EXPECT_TRUE(Load({dir_ + "/ok.proto"}, {}).ok()) << Load({dir_ + "/ok.proto"}, {});

  // One file importing 299 others: the 257th opened is refused.
  std::string root = "syntax = \"proto3\";\n";
  for (int i = 1; i < 300; ++i) {
    absl::StrAppend(&root, "import \"f", i, ".proto\";\n");
    Write(absl::StrCat("many/f", i, ".proto"),
          absl::StrCat("syntax = \"proto3\";\nmessage F", i, " { int32 x = 1; }\n"));
  }
  Write("many/f0.proto", root);
  EXPECT_THAT(Load({dir_ + "/many/f0.proto"}, {}).message(),
              HasSubstr("f256.proto: one file more than the 256 a load may open"));

  Write("huge.proto", "syntax = \"proto3\";\n" + std::string(5 << 20, ' '));
  EXPECT_THAT(Load({dir_ + "/huge.proto"}, {}).message(),
              HasSubstr("huge.proto is 5242899 bytes; at most 4194304"));

  // Two files of 600 bytes against a total of 1,000: the second is refused
  // before it is served to the parser.
  Write("t0.proto", "syntax = \"proto3\";\n" + std::string(581, ' '));
  Write("t1.proto", "syntax = \"proto3\";\n" + std::string(581, ' '));
  ProtoBounds small;
  small.max_total_bytes = 1000;
  auto src = ProtoSource::Create({dir_ + "/t0.proto", dir_ + "/t1.proto"}, {}, small);
  ASSERT_TRUE(src.ok()) << src.status();
  delete (*src)->Open("t0.proto");
  EXPECT_EQ((*src)->Open("t1.proto"), nullptr);
  EXPECT_THAT((*src)->bound_error(),
              HasSubstr("t1.proto: the files opened so far would exceed 1000 bytes"));
}

TEST_F(ProtoSourceTest, UnknownMethodsListWhatIsThere) {
  Write("g.proto", kSvc);
  auto c = ProtoCatalog::Load({dir_ + "/g.proto"}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  // A streaming method is found like a unary one (the engine streams it).
  EXPECT_TRUE((*c)->FindMethod("rg.G/List").ok());
  EXPECT_THAT((*c)->FindMethod("rg.H/Get").status().message(),
              HasSubstr("(services: rg.G (Get, List))"));
  EXPECT_THAT((*c)->FindMethod("rg.G/\x1b[2J").status().message(),
              HasSubstr("has no method \\x1b[2J (methods: Get, List)"));
}

}  // namespace
}  // namespace rsslab
