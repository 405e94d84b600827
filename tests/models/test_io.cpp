// File I/O, JSON key access and unit formatting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "models/file_io.hpp"
#include "models/json_reader.hpp"
#include "models/units.hpp"

namespace moeplan {
namespace test_io {
namespace {

namespace fs = std::filesystem;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moeplan_io_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TempDir, InputFilesPastTheLimitAreRefusedBeforeReading) {
  const fs::path f = dir_ / "big.json";
  std::ofstream(f) << std::string(2000, ' ');
  EXPECT_TRUE(read_text_file(f, 2000).ok());
  auto r = read_text_file(f, 1999);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.error().message,
      f.string() + ": 2000 bytes, expected at most 1999 (moeplan's limit on input files, 0 MiB)");
  // The default limit, on a sparse file that takes no disk space.
  fs::resize_file(f, kMaxInputFileBytes + 1);
  r = read_text_file(f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, f.string() +
                                   ": 268435457 bytes, expected at most 268435456 "
                                   "(moeplan's limit on input files, 256 MiB)");
  // A device without end stops at the limit instead of filling memory.
  r = read_text_file("/dev/zero", std::uintmax_t{1} << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "/dev/zero: more than 1048576 bytes, expected at most 1048576 "
            "(moeplan's limit on input files, 1 MiB)");
}

TEST_F(TempDir, AtomicWriteReplacesWholeFileAndLeavesNoTemp) {
  const fs::path out = dir_ / "plan.json";
  ASSERT_TRUE(write_file_atomic(out, "first").ok());
  ASSERT_TRUE(write_file_atomic(out, "second, longer").ok());
  auto text = read_text_file(out);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second, longer");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::others_read, fs::perms::others_read);
}

TEST_F(TempDir, AtomicWriteIntoMissingDirectoryFails) {
  const auto s = write_file_atomic(dir_ / "no" / "such" / "x.json", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot create a temporary file"), std::string::npos);
}

TEST(JsonReader, RangesAndDefaults) {
  const auto j = nlohmann::json::parse(R"({"a": 3, "b": 2.0, "c": null, "d": [1, 2], "e": 1.5})");
  const JsonReader r(j, "f.json", "sect.");
  EXPECT_EQ(*r.integer("a", 0, 10), 3);
  EXPECT_EQ(*r.integer("b", 0, 10), 2);        // 2.0 is an integer value
  EXPECT_EQ(*r.integer_or("c", 7, 0, 10), 7);  // null counts as absent
  EXPECT_FALSE(r.has("c"));
  EXPECT_EQ(r.integer("a", 5, 10).error().message,
            "f.json: key 'sect.a': expected an integer in [5, 10], got 3");
  EXPECT_DOUBLE_EQ(*r.number("e", 0.0, 2.0), 1.5);
  EXPECT_FALSE(r.number("e", 2.0, 3.0).ok());
  EXPECT_EQ((*r.integer_list_or_empty("d", 0, 5)), (std::vector<std::int64_t>{1, 2}));
  EXPECT_FALSE(r.string("a").ok());
}

TEST(Units, Formatting) {
  EXPECT_EQ(format_bytes(55050240.0), "52.50 MiB");
  EXPECT_EQ(format_bytes(512.0), "512 B");
  EXPECT_EQ(format_bytes(141e9), "131.32 GiB");
  EXPECT_EQ(format_count(57408658944.0), "57.41 B");
  EXPECT_EQ(format_count(999.0), "999");
  EXPECT_EQ(format_si(1.5e12, "FLOP"), "1.50 TFLOP");
  EXPECT_EQ(format_fixed(2.5, 1), "2.5");
}

}  // namespace
}  // namespace test_io
}  // namespace moeplan
