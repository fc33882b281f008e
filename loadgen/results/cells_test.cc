#include "loadgen/results/cells.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

rsslab::v1::Scenario Matrix(std::vector<std::string> profiles, std::vector<int> threads,
                            int repeats) {
  rsslab::v1::Scenario s;
  s.set_name("m");
  for (const auto& p : profiles) s.mutable_sweep()->add_profiles(p);
  for (int t : threads) s.mutable_sweep()->add_threads(t);
  s.mutable_sweep()->set_repeats(repeats);
  s.add_step()->set_name("fill");
  return s;
}

TEST(CellsTest, OrderIsRepeatsThenThreadsThenProfiles) {
  auto cells = ExpandCells(Matrix({"glibc", "jemalloc"}, {1, 4}, 2).sweep());
  ASSERT_EQ(cells.size(), 8u);
  std::vector<std::string> ids;
  for (const auto& c : cells) ids.push_back(c.id);
  EXPECT_THAT(ids, ElementsAre("glibc/t1/r1", "jemalloc/t1/r1", "glibc/t4/r1", "jemalloc/t4/r1",
                               "glibc/t1/r2", "jemalloc/t1/r2", "glibc/t4/r2", "jemalloc/t4/r2"));
  for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ(cells[i].index, static_cast<int>(i));
  EXPECT_EQ(CountCells(Matrix({"a"}, {1}, 0).sweep()), 1);  // repeats 0 reads as 1
}

TEST(CellsTest, SelectionParsesRangesAndRejectsBadInput) {
  EXPECT_THAT(*ParseCellSelection("3,7-9", 10), ElementsAre(3, 7, 8, 9));
  EXPECT_THAT(*ParseCellSelection("9,0,3-4,4", 10), ElementsAre(0, 3, 4, 9));
  EXPECT_EQ(FormatCellSelection({0, 3, 4, 5, 9}), "0,3-5,9");
  auto out = ParseCellSelection("3,10", 10);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("cell 10 is out of range: the matrix has 10 cells"));
  EXPECT_THAT(ParseCellSelection("5-2", 10).status().message(), HasSubstr("runs backwards"));
  EXPECT_THAT(ParseCellSelection("x", 10).status().message(), HasSubstr("not a cell index"));
  EXPECT_THAT(ParseCellSelection("1,,2", 10).status().message(), HasSubstr("empty entry"));
  EXPECT_THAT(ParseCellSelection("-1", 10).status().message(), HasSubstr("not a cell index"));
}

TEST(CellsTest, MatrixIdChangesWithMatrixStepsAndFlagsNotDescription) {
  const auto base = Matrix({"glibc", "jemalloc"}, {1, 4}, 2);
  rsslab::v1::LoadSpec flags;
  flags.set_scale(0.1);
  const std::string id = MatrixId(base, flags);
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(MatrixId(base, flags), id);
  auto described = base;
  described.set_description("words");
  EXPECT_EQ(MatrixId(described, flags), id);
  auto other = base;
  other.mutable_sweep()->set_threads(1, 2);
  EXPECT_NE(MatrixId(other, flags), id);
  auto steps = base;
  steps.add_step()->set_name("more");
  EXPECT_NE(MatrixId(steps, flags), id);
  rsslab::v1::LoadSpec more = flags;
  more.set_scale(0.2);
  EXPECT_NE(MatrixId(base, more), id);

  rsslab::v1::Header a, b;
  *a.mutable_scenario() = base;
  *b.mutable_scenario() = other;
  EXPECT_THAT(MatrixDifference(a, b), HasSubstr("the thread counts differ: [1,4] vs [1,2]"));
  *b.mutable_scenario() = steps;
  EXPECT_THAT(MatrixDifference(a, b), HasSubstr("steps"));
  *b.mutable_scenario() = base;
  *b.mutable_flags() = more;
  EXPECT_THAT(MatrixDifference(a, b), HasSubstr("load flags differ"));
  *b.mutable_flags() = a.flags();
  EXPECT_EQ(MatrixDifference(a, b), "");
}

TEST(CellsTest, PrintedListsCarryEveryCell) {
  auto cells = ExpandCells(Matrix({"glibc"}, {1, 2}, 1).sweep());
  EXPECT_THAT(CellsText(cells), HasSubstr("    1  glibc                     2       1  glibc/t2/r1"));
  EXPECT_EQ(CellsJson(cells, "abc"),
            "{\"matrix_id\":\"abc\",\"cells_total\":2,\"cells\":[\n"
            "{\"index\":0,\"profile\":\"glibc\",\"threads\":1,\"repeat\":1,\"cell\":\"glibc/t1/r1\"},\n"
            "{\"index\":1,\"profile\":\"glibc\",\"threads\":2,\"repeat\":1,\"cell\":\"glibc/t2/r1\"}\n"
            "]}\n");
}

}  // namespace
}  // namespace rsslab
