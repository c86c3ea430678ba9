// The JSON Lines sink under a full disk (issue 32, item 4): a line is
// written whole or not at all, lost lines are counted with the errno, and
// writing resumes with whole lines once the file takes bytes again. write(2)
// is replaced through JsonlSink::set_write_for_tests to fail on cue.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "export/jsonl_sink.h"

namespace gpuutil {
namespace {

// Bytes the fake disk still takes; writes beyond fail with ENOSPC after
// writing what fits (a partial write, as a real full disk gives).
long g_room = -1;  // < 0: unlimited

long limited_write(int fd, const void* data, unsigned long bytes) {
  if (g_room < 0) return ::write(fd, data, bytes);
  if (g_room == 0) {
    errno = ENOSPC;
    return -1;
  }
  const unsigned long n = bytes < static_cast<unsigned long>(g_room) ? bytes : static_cast<unsigned long>(g_room);
  const long wrote = ::write(fd, data, n);
  if (wrote > 0) g_room -= wrote;
  return wrote;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class JsonlSinkFull : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/jsonl_sink_" + std::to_string(getpid()) + ".jsonl";
    g_room = -1;
    JsonlSink::set_write_for_tests(&limited_write);
  }
  void TearDown() override {
    JsonlSink::set_write_for_tests(nullptr);
    std::remove(path_.c_str());
  }
  std::string path_;
};

TEST_F(JsonlSinkFull, AFullDiskNeverLeavesAPartialLineThatLaterLinesFollow) {
  JsonlSink sink(path_);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE(sink.write_line(R"({"step":0})"));
  g_room = 5;  // the next line gets 5 of its 11 bytes, then ENOSPC
  EXPECT_FALSE(sink.write_line(R"({"step":1})"));
  EXPECT_FALSE(sink.write_line(R"({"step":2})"));  // nothing at all fits
  EXPECT_EQ(read_all(path_), "{\"step\":0}\n");
  g_room = -1;  // space freed
  ASSERT_TRUE(sink.write_line(R"({"step":3})"));
  EXPECT_EQ(read_all(path_), "{\"step\":0}\n{\"step\":3}\n");
  EXPECT_EQ(sink.lines_written(), 2u);
  EXPECT_EQ(sink.lines_lost(), 2u);
  EXPECT_EQ(sink.last_errno(), ENOSPC);
  EXPECT_EQ(sink.last_error(), "ENOSPC (No space left on device)");
}

TEST_F(JsonlSinkFull, ALineCutByTheDiskIsCutBackEvenWhenItIsTheLast) {
  {
    JsonlSink sink(path_);
    ASSERT_TRUE(sink.write_line(R"({"step":0})"));
    g_room = 10;  // all of the line but its newline
    EXPECT_FALSE(sink.write_line(R"({"step":1})"));
  }
  EXPECT_EQ(read_all(path_), "{\"step\":0}\n");
}

TEST_F(JsonlSinkFull, AClosedSinkWritesNothingAndTheFileIsComplete) {
  JsonlSink sink(path_);
  ASSERT_TRUE(sink.write_line("{}"));
  sink.close();
  EXPECT_FALSE(sink.ok());
  EXPECT_FALSE(sink.write_line("{}"));
  EXPECT_EQ(read_all(path_), "{}\n");
}

TEST(JsonlSinkDevFull, EveryLineToDevFullIsLostWithENOSPC) {
  JsonlSink sink("/dev/full");
  if (!sink.ok()) GTEST_SKIP() << "/dev/full cannot be opened here";
  EXPECT_FALSE(sink.write_line("{}"));
  EXPECT_FALSE(sink.write_line("{}"));
  EXPECT_EQ(sink.lines_lost(), 2u);
  EXPECT_EQ(sink.last_errno(), ENOSPC);
}

}  // namespace
}  // namespace gpuutil
