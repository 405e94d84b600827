// Table rendering: alignment by display width (UTF-8 aware).
#include <gtest/gtest.h>

#include "app/cli/table.hpp"

namespace moeplan::cli {
namespace test_table {
namespace {

TEST(Table, AlignsColumnsByDisplayWidth) {
  Table t;
  t.add_column("layout");
  t.add_column("ms", Table::Align::kRight);
  t.add_row({"8×2", "1.5"});
  t.add_row({"16×1", "12.25"});
  EXPECT_EQ(t.render(),
            "layout     ms\n"
            "------  -----\n"
            "8×2       1.5\n"
            "16×1    12.25\n");
}

TEST(Table, KeyValues) {
  EXPECT_EQ(render_key_values({{"a", "1"}, {"long key", "2"}}), "a         1\nlong key  2\n");
}

}  // namespace
}  // namespace test_table
}  // namespace moeplan::cli
