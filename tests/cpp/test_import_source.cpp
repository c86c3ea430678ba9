// The importer's one streaming reader on inputs that cannot be seeked: a
// pipe (as `/dev/fd/N`, as a descriptor), a FIFO, a terminal.
//
// Pinned: a trace through a pipe imports exactly as the same trace from a
// file (plain and gzip; read whole below the streaming threshold, and
// streamed past it with the first window buffered, cut into pieces and
// shrunk back); it is never seeked; non-trace bytes are refused from the
// first 4 KiB and gigabytes of whitespace keep memory flat; a FIFO with no
// writer fails after the bounded wait (announced once), and one whose
// writer comes in time imports; a terminal is refused at once; faults
// that the pipe cannot be read again for are worded where they are
// (invalid UTF-8 in a later piece is still repaired).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "import/kineto/import_passes.h"
#include "gpuutil/kineto_import.h"
#include "gzip_bytes.h"
#include "import_compare.h"
#include "peak_rss.h"
#include "pipe_feed.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::first_difference;
using test::PipeFeed;

// Several windows of planted events, metadata before and after them.
std::string planted() {
  return test::kineto_doc(400, std::string(test::kDeviceProperties) + ",\n  \"distributedInfo\": {\"rank\": 3}",
                          "  \"traceName\": \"t.json\"");
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gpuutil_source_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Options that stream anything over `stream_min_bytes` through a window of
// `window_bytes`, on one thread or two (gzip read ahead).
ImportOptions streaming(size_t stream_min_bytes, size_t window_bytes, unsigned threads = 1) {
  ImportOptions o;
  o.threads = threads;
  o.stream_min_bytes = stream_min_bytes;
  o.stream_window_bytes = window_bytes;
  return o;
}

// `bytes` imported from a file and through a pipe (named by its
// /dev/fd/N path, as `<(...)` gives it); the difference, "" when none.
std::string pipe_vs_file(const std::string& bytes, const ImportOptions& options, bool* streamed = nullptr) {
  const std::string path = write_file("doc", bytes);
  ImportResult from_file = import_kineto_file(path, options);
  std::filesystem::remove(path);
  PipeFeed feed(PipeFeed::once(bytes));
  const replay::ImportPassCounts before = replay::import_pass_counts();
  ImportResult from_pipe = import_kineto_file(feed.path(), options);
  if (streamed != nullptr) *streamed = replay::import_pass_counts().stream_done > before.stream_done;
  from_pipe.store.source = from_file.store.source;
  return first_difference(from_file, from_pipe);
}

TEST(StreamSource, APipeImportsLikeTheFilePlainAndGzip) {
  const std::string doc = planted();
  ASSERT_GT(doc.size(), 64u << 10);
  const std::string gz = test::gzip_bytes(doc);
  for (const std::string* bytes : {&doc, &gz}) {
    const char* kind = bytes == &doc ? "plain" : "gzip";
    // Read whole (the document is under the threshold: buffered first).
    EXPECT_EQ(pipe_vs_file(*bytes, streaming(size_t{64} << 20, 4096)), "") << kind << ", whole";
    // Streamed past a 16 KiB first fill, in 4 KiB pieces; gzip also
    // inflated on a second thread.
    for (const unsigned threads : {1u, 2u}) {
      bool streamed = false;
      EXPECT_EQ(pipe_vs_file(*bytes, streaming(16 << 10, 4096, threads), &streamed), "") << kind;
      EXPECT_TRUE(streamed) << kind << ": the pipe was not streamed";
    }
  }
}

TEST(StreamSource, EverySharedTraceThroughAPipeMatchesTheFile) {
  GPUUTIL_REQUIRE_TRACES();
  for (const std::string& path : test::all_traces()) {
    std::ifstream in(path, std::ios::binary);
    const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(pipe_vs_file(gz, ImportOptions{}), "") << path;
    EXPECT_EQ(pipe_vs_file(gz, streaming(256 << 10, 64 << 10)), "") << path << ", streamed";
  }
}

TEST(StreamSource, ADescriptorIsReadFromWhereItStands) {
  const std::string doc = planted();
  PipeFeed feed(PipeFeed::once(doc));
  ImportResult from_pipe = import_kineto_fd(feed.read_fd(), "<stdin>");
  ASSERT_TRUE(from_pipe.ok) << from_pipe.error;
  EXPECT_EQ(from_pipe.store.source, "<stdin>");
  EXPECT_EQ(first_difference(import_kineto_json(doc, "<stdin>"), from_pipe), "");
  // A regular file given as a descriptor part-way in: read from there.
  const std::string path = write_file("offset.json", "garbage!" + doc);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::lseek(fd, 8, SEEK_SET), 8);
  const ImportResult from_offset = import_kineto_fd(fd, "<stdin>");
  ::close(fd);
  std::filesystem::remove(path);
  EXPECT_EQ(first_difference(import_kineto_json(doc, "<stdin>"), from_offset), "");
}

TEST(StreamSource, NonTraceBytesAreRefusedFromTheFirstBytesOfAPipe) {
  // 1 GB offered; the reader stops after its first window.
  size_t offered = 0;
  PipeFeed feed([&offered]() {
    if (offered >= (size_t{1} << 30)) return std::string();
    offered += 1 << 20;
    return std::string(1 << 20, 'x');
  });
  const auto start = std::chrono::steady_clock::now();
  const ImportResult r = import_kineto_file(feed.path());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  feed.close_read();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("not a JSON trace: it starts with 'x' at byte 0"), std::string::npos) << r.error;
  EXPECT_LT(seconds, 5.0);
}

TEST(StreamSource, WhitespaceAfterAValidPrefixKeepsMemoryFlat) {
  // 512 MiB of spaces (then newlines) after some events, through a pipe:
  // dropped as they arrive, so memory stays near a window; the truncated
  // document is then refused in one line.
  const std::string prefix = "{\n  \"traceEvents\": [\n" + test::kineto_events(300) + ",\n";
  for (const char pad : {' ', '\n'}) {
    size_t sent = 0;
    PipeFeed feed([&, first = true]() mutable {
      if (first) {
        first = false;
        return prefix;
      }
      if (sent >= (size_t{512} << 20)) return std::string();
      sent += 1 << 20;
      return std::string(1 << 20, pad);
    });
    if (!test::reset_peak_rss()) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
    const size_t start = test::rss_bytes();
    const ImportResult r = import_kineto_file(feed.path());
    const size_t peak = test::peak_rss_above(start);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error.find('\n'), std::string::npos);
    EXPECT_NE(r.error.find("invalid JSON"), std::string::npos) << r.error;
    EXPECT_LT(peak, size_t{32} << 20) << "pad " << int(pad) << ": " << peak / 1e6 << " MB above the start";
  }
}

TEST(StreamSource, LongWhitespaceRunsBetweenAndInsideEventsReadTheSame) {
  // Runs outside strings are squeezed, the same run inside a string kept.
  std::string doc = "{\n  \"traceEvents\": [\n" + test::kineto_events(50) + ",\n" + std::string(100000, ' ') +
                    "\n  " + test::kineto_event(51, "spaced" + std::string(20000, ' ') + "name") + ",\n" +
                    std::string(50000, '\n') + "  " + test::kineto_events(60) + "\n" + std::string(70000, '\t') +
                    "  ]\n}\n" + std::string(30000, ' ');
  for (const size_t window : {size_t{4096}, size_t{65536}}) {
    bool streamed = false;
    EXPECT_EQ(pipe_vs_file(doc, streaming(0, window), &streamed), "") << "window " << window;
    EXPECT_TRUE(streamed);
  }
  const ImportResult r = import_kineto_json(doc, "<doc>");
  ASSERT_TRUE(r.ok) << r.error;
}

TEST(StreamSource, FaultsInALaterPieceOfAPipeAreWordedOrRepaired) {
  // Events without faults of their own: the repair is the first example.
  std::string doc = "{\n  \"traceEvents\": [\n";
  for (int i = 0; i < 400; ++i) doc += (i ? ",\n" : "") + test::kineto_event(i, "op_" + std::to_string(i % 13));
  doc += "\n  ]\n}\n";
  const size_t at = doc.size() * 3 / 4;
  const size_t name = doc.find("\"op_", at) + 2;
  ASSERT_NE(name, std::string::npos);
  // Invalid UTF-8 in a name: repaired as the whole-document pass does.
  std::string bad_utf8 = doc;
  bad_utf8[name] = '\xff';
  EXPECT_EQ(pipe_vs_file(bad_utf8, streaming(16 << 10, 4096)), "");
  // A structural fault: one line saying where, never a second read.
  std::string broken = doc;
  broken.insert(doc.find("\"dur\"", at), "]]");
  PipeFeed feed(PipeFeed::once(broken));
  const ImportResult r = import_kineto_file(feed.path(), streaming(16 << 10, 4096));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("invalid JSON in the trace at or after byte"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("a pipe is read once"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("Illegal seek"), std::string::npos) << r.error;
}

TEST(StreamSource, EmptyPipeSaysSoInOneLine) {
  PipeFeed feed([] { return std::string(); });
  const ImportResult r = import_kineto_fd(feed.read_fd(), "<stdin>");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.store.source, "<stdin>");
  EXPECT_NE(r.error.find("Empty"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
}

// ---------------------------------------------------------------- FIFOs

std::string make_fifo(const std::string& name) {
  const std::string path = temp_path(name);
  std::filesystem::remove(path);
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  return path;
}

TEST(StreamSource, AFifoWithoutAWriterFailsAfterTheBoundedWait) {
  const std::string fifo = make_fifo("nowriter");
  ::setenv("GPUUTIL_INPUT_WAIT_S", "0.5", 1);  // the default option defers to it
  std::vector<std::string> lines;
  ImportOptions options;
  options.on_wait = [&lines](const std::string& line) { lines.push_back(line); };
  auto importing = std::async(std::launch::async, [&] { return import_kineto_file(fifo, options); });
  const bool done = importing.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!done) {
    // Blocked in open(): a writer that comes and goes sets it free.
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  const ImportResult r = importing.get();
  ::unsetenv("GPUUTIL_INPUT_WAIT_S");
  std::filesystem::remove(fifo);
  ASSERT_TRUE(done) << "the import blocked on a FIFO without a writer";
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("no writer opened the FIFO " + fifo + " within 0.5 s"), std::string::npos) << r.error;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("waiting up to 0.5 s for a writer on the FIFO"), std::string::npos) << lines[0];
}

TEST(StreamSource, AFifoWhoseWriterComesInTimeImports) {
  const std::string fifo = make_fifo("writer");
  const std::string doc = planted();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(fifo, std::ios::binary) << doc;
  });
  ImportOptions options;
  options.writer_wait_ms = 20000;
  const ImportResult r = import_kineto_file(fifo, options);
  writer.join();
  std::filesystem::remove(fifo);
  ImportResult expected = import_kineto_json(doc, fifo);
  EXPECT_EQ(first_difference(expected, r), "");
}

TEST(StreamSource, ATerminalIsRefusedAtOnce) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) GTEST_SKIP() << "no pseudo-terminal";
  const std::string tty = ::ptsname(master);
  const ImportResult by_path = import_kineto_file(tty);
  EXPECT_FALSE(by_path.ok);
  EXPECT_NE(by_path.error.find(tty + " is a terminal, not a trace"), std::string::npos) << by_path.error;
  const int fd = ::open(tty.c_str(), O_RDONLY | O_NOCTTY);
  ASSERT_GE(fd, 0);
  const ImportResult by_fd = import_kineto_fd(fd, "<stdin>");
  ::close(fd);
  ::close(master);
  EXPECT_NE(by_fd.error.find("<stdin> is a terminal, not a trace"), std::string::npos) << by_fd.error;
}

}  // namespace
}  // namespace gpuutil
