// The import's memory budget (ImportOptions::memory_budget_bytes,
// ImportBudget; docs/trace-import.md, "Memory budget").
//
// Pinned: more events than the budget holds fail the import in one line
// naming the budget and `max_memory`, in every pass (read whole on one
// thread or in pieces on two, streamed, from a pipe), with the store
// emptied; under the budget the result is exactly the unbudgeted one; the
// budget bounds the peak memory of an endless pipe of events; a document
// read whole is counted too; several imports share one ImportBudget (and
// analyze_traces gives its inputs one); sizes parse as people write them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuutil/analyze_traces.h"
#include "gpuutil/kineto_import.h"
#include "gzip_bytes.h"
#include "import_compare.h"
#include "peak_rss.h"
#include "pipe_feed.h"

namespace gpuutil {
namespace {

using test::first_difference;
using test::PipeFeed;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// One compact kernel event (about 110 bytes; 88 bytes in the store).
std::string kernel_event(uint64_t i) {
  return "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": " +
         std::to_string(1000 + i) + ", \"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7}}";
}

std::string kernel_events(uint64_t first, uint64_t count) {
  std::string out;
  for (uint64_t i = first; i < first + count; ++i) out += kernel_event(i) + ",\n";
  return out;
}

std::string kernel_doc(uint64_t count) {
  return "{\n  \"traceEvents\": [\n" + kernel_events(0, count - 1) + kernel_event(count - 1) + "\n  ]\n}\n";
}

ImportOptions budget_of(uint64_t bytes) {
  ImportOptions o;
  o.memory_budget_bytes = bytes;
  return o;
}

void expect_over_budget(const ImportResult& r, const std::string& budget, const std::string& label) {
  EXPECT_FALSE(r.ok) << label;
  EXPECT_NE(r.error.find("over the import's memory budget of " + budget), std::string::npos) << label << ": " << r.error;
  EXPECT_NE(r.error.find("pass max_memory (e.g. "), std::string::npos) << label << ": " << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << label;
  EXPECT_TRUE(r.store.activities.empty()) << label << ": the refused store was kept";
  EXPECT_EQ(r.store.diagnostics.count(Diag::input_unreadable), 1u) << label;
}

TEST(ImportBudget, TooManyEventsFailEveryPassInOneLine) {
  const std::string doc = kernel_doc(100000);  // 11 MB; 8.8 MB of activities
  // The document itself fits (where it is read whole); its events do not.
  const uint64_t budget = doc.size() + kMiB;
  const std::string shown = format_memory_size(budget);
  ImportOptions serial = budget_of(budget);
  serial.threads = 1;
  serial.piece_bytes = 0;
  serial.stream_min_bytes = SIZE_MAX;
  ImportOptions pieces = budget_of(budget);
  pieces.threads = 2;
  pieces.stream_min_bytes = SIZE_MAX;
  ImportOptions stream = budget_of(budget);
  stream.stream_min_bytes = 0;
  expect_over_budget(import_kineto_json(doc, "<doc>", serial), shown, "serial");
  expect_over_budget(import_kineto_json(doc, "<doc>", pieces), shown, "pieces");
  expect_over_budget(import_kineto_json(doc, "<doc>", stream), shown, "stream");
  PipeFeed feed(PipeFeed::once(doc));
  expect_over_budget(import_kineto_file(feed.path(), stream), shown, "pipe");
  // No budget: every event.
  const ImportResult all = import_kineto_json(doc, "<doc>", budget_of(0));
  ASSERT_TRUE(all.ok) << all.error;
  EXPECT_EQ(all.store.activities.size(), 100000u);
}

TEST(ImportBudget, UnderTheBudgetTheResultIsTheUnbudgetedOne) {
  const std::string doc = test::kineto_doc(2000, test::kDeviceProperties, "");
  for (const size_t stream_min : {size_t{0}, SIZE_MAX}) {
    ImportOptions tight = budget_of(4 * kMiB);
    ImportOptions none = budget_of(0);
    tight.stream_min_bytes = none.stream_min_bytes = stream_min;
    EXPECT_EQ(first_difference(import_kineto_json(doc, "<doc>", none), import_kineto_json(doc, "<doc>", tight)), "");
  }
}

TEST(ImportBudget, BoundsThePeakMemoryOfAnEndlessPipeOfEvents) {
  // A valid header, then kernel events until the reader stops (4 GB
  // offered): the budget, not the input, ends it.
  uint64_t next = 0;
  bool header = true;
  PipeFeed feed([&]() {
    if (header) {
      header = false;
      return std::string("{\n  \"traceEvents\": [\n");
    }
    if (next * 110 > (uint64_t{4} << 30)) return std::string();
    next += 10000;
    return kernel_events(next - 10000, 10000);
  });
  if (!test::reset_peak_rss()) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  const size_t start = test::rss_bytes();
  const ImportResult r = import_kineto_file(feed.path(), budget_of(64 * kMiB));
  const size_t peak = test::peak_rss_above(start);
  feed.close_read();
  expect_over_budget(r, "64 MiB", "pipe");
  std::printf("[ memory   ] 64 MiB budget: peak %.1f MB above the start, %.0f MB offered before the refusal\n",
              peak / 1e6, static_cast<double>(next) * 110 / 1e6);
  EXPECT_LT(peak, 64 * kMiB + 16 * kMiB);
  EXPECT_LT(next * 110, uint64_t{200} << 20);  // it stopped reading at the budget
}

TEST(ImportBudget, ADocumentReadWholeIsCounted) {
  // 5 MB of instants, which the importer keeps nothing of: only the text
  // itself can pass the budget.
  std::string doc = "{\n  \"traceEvents\": [\n";
  for (int i = 0; i < 20000; ++i) {
    doc += std::string(i ? ",\n" : "") + "  {\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": " +
           std::to_string(i) + ", \"args\": {\"note\": \"" + std::string(200, 'm') + "\"}}";
  }
  doc += "\n  ]\n}\n";
  const ImportResult unbudgeted = import_kineto_json(doc, "<doc>", budget_of(0));
  ASSERT_TRUE(unbudgeted.ok) << unbudgeted.error;
  ASSERT_TRUE(unbudgeted.store.activities.empty() && unbudgeted.store.ranges.empty());
  ImportOptions whole = budget_of(2 * kMiB);
  whole.stream_min_bytes = SIZE_MAX;
  expect_over_budget(import_kineto_json(doc, "<doc>", whole), "2 MiB", "plain");
  expect_over_budget(import_kineto_json(test::gzip_bytes(doc), "<doc>", whole), "2 MiB", "gzip");
}

TEST(ImportBudget, ImportsSharingABudgetAreBoundedTogether) {
  const std::string doc = kernel_doc(30000);  // 2.6 MB of activities
  ImportBudget shared(12 * kMiB);
  ImportOptions options;
  options.shared_budget = &shared;
  options.memory_budget_bytes = 1;  // ignored: the shared budget applies
  const ImportResult first = import_kineto_json(doc, "<a>", options);
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_GE(shared.used_bytes(), 30000 * sizeof(DeviceActivity));  // the store stays charged
  const ImportResult second = import_kineto_json(doc, "<b>", options);
  ASSERT_TRUE(second.ok) << second.error;
  const ImportResult third = import_kineto_json(doc, "<c>", options);
  expect_over_budget(third, "12 MiB", "the third import");
  // analyze_traces: one budget for all its inputs.
  const std::string big = kernel_doc(60000);
  std::vector<TraceInput> inputs = {{"r0", &big}, {"r1", &big}};
  ImportOptions import = budget_of(16 * kMiB);
  EXPECT_TRUE(analyze_traces({inputs[0]}, AnalysisOptions{}, -1, import).ok);
  const AnalyzeTracesResult both = analyze_traces(inputs, AnalysisOptions{}, -1, import);
  EXPECT_FALSE(both.ok);
  EXPECT_NE(both.error.find("over the import's memory budget of 16 MiB"), std::string::npos) << both.error;
}

TEST(MemorySize, ParsesWhatPeopleWrite) {
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"512M", 512 * kMiB},       {"2G", 2048 * kMiB},     {"1.5G", 1536 * kMiB}, {"4GiB", 4096 * kMiB},
      {"800mb", 800 * kMiB},      {"2048k", 2 * kMiB},     {"1t", 1024 * 1024 * kMiB},
      {"1048576", kMiB},          {"unlimited", 0},        {"NONE", 0},
  };
  for (const auto& [text, bytes] : good) {
    uint64_t got = 1;
    std::string why;
    EXPECT_TRUE(parse_memory_size(text, &got, &why)) << text << ": " << why;
    EXPECT_EQ(got, bytes) << text;
  }
  for (const std::string bad : {"", "2X", "-1", "0", "1000", "G", "1.2.3G", "12 apples", "nan"}) {
    uint64_t got = 0;
    std::string why;
    EXPECT_FALSE(parse_memory_size(bad, &got, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_EQ(format_memory_size(768 * kMiB), "768 MiB");
  EXPECT_EQ(format_memory_size(1536 * kMiB), "1.5 GiB");
  EXPECT_EQ(format_memory_size(2048 * kMiB), "2 GiB");
  EXPECT_EQ(format_memory_size(0), "unlimited");
}

}  // namespace
}  // namespace gpuutil
