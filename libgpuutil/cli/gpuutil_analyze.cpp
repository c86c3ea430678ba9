// gpuutil-analyze: the native command for `gpuutil analyze --json`.
//
// Reads PyTorch profiler / Kineto traces (one per rank; `-` is standard
// input) and prints the gpuutil.report/1 JSON report, the same bytes
// `gpuutil analyze --json` prints for the same traces and options
// (gpuutil/analyze_traces.h is the one path both take). It exists for
// scripts and CI gates that analyse many traces: it starts in about a
// millisecond, where the Python command pays the interpreter's start-up
// (tens of ms) before it reads a byte. Text tables, finance figures and
// gpuutil's own reports as input stay with `gpuutil analyze`.
//
// Inputs are files, FIFOs, `/dev/fd/N` paths and `-` (standard input),
// all streamed by the importer (never read whole into memory first), under
// one memory budget (--max-memory).
//
// Exit codes: 0 the report was written; 1 the output cannot be written;
// 2 bad arguments or an input that cannot be read (one line on stderr).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

#include "gpuutil/analyze_traces.h"
#include "gpuutil/trace_dirs.h"

#ifndef GPUUTIL_VERSION
#define GPUUTIL_VERSION "0.1.0"  // keep in step with project() in CMakeLists.txt
#endif

namespace {

constexpr const char* kProg = "gpuutil-analyze";
constexpr const char* kUsage =
    "usage: gpuutil-analyze [-h] [--version] [--indent N] [--flops-per-step F] [--dtype {fp64,fp32,tf32,bf16,fp16,"
    "fp8,int8}] [--peak-tflops T] [--max-memory SIZE] [-o FILE] TRACE [TRACE ...]\n";
constexpr const char* kHelp =
    "\n"
    "Analyse PyTorch profiler / Kineto traces (.json or .json.gz), one file per rank, into the\n"
    "gpuutil.report/1 JSON report: the output of `gpuutil analyze --json`, from a native program\n"
    "that starts in about a millisecond. Text tables, finance figures and gpuutil's own reports as\n"
    "input: `gpuutil analyze`.\n"
    "\n"
    "positional arguments:\n"
    "  TRACE               trace file, FIFO or /dev/fd/N (- reads standard input); several for a\n"
    "                      multi-rank job\n"
    "\n"
    "options:\n"
    "  -h, --help          show this help message and exit\n"
    "  --version           show the version and exit\n"
    "  --json              accepted and ignored: the output is always the JSON report\n"
    "  --indent N          pretty-print the JSON with N spaces, 0-16 (default: one line)\n"
    "  --flops-per-step F  FLOPs one step performs per rank, for MFU\n"
    "  --dtype D           datatype whose peak FLOP/s MFU is measured against (default: bf16)\n"
    "  --peak-tflops T     peak dense TFLOP/s per device, overriding the built-in table\n"
    "  --max-memory SIZE   memory the import may hold, e.g. 512M, 2G, unlimited (default: 768M)\n"
    "  -o, --output FILE   write the output to FILE instead of stdout\n";
constexpr const char* kDtypes[] = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"};
// Inputs above this size get a line on a terminal's stderr before the import.
constexpr long long kProgressMinBytes = 5LL * 1024 * 1024;

struct Args {
  std::vector<std::string> traces;
  int indent = -1;
  std::optional<double> flops_per_step;
  std::string dtype = "bf16";
  std::optional<double> peak_tflops;
  uint64_t max_memory_bytes = gpuutil::kDefaultImportMemoryBudgetBytes;
  std::string output;
};

// One line that cannot drive the terminal: newlines and tabs become spaces,
// other C0 controls, DEL and C1 controls (UTF-8 C2 80..C2 9F) become '?',
// as the Python command prints them (a file name can hold ESC).
std::string terminal_safe(const std::string& message) {
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size(); ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(' ');
    } else if (c < 0x20 || c == 0x7F) {
      out.push_back('?');
    } else if (c == 0xC2 && i + 1 < message.size() && static_cast<unsigned char>(message[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(message[i + 1]) <= 0x9F) {
      out.push_back('?');
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

int error(const std::string& message, int code) {
  std::fprintf(stderr, "%s: error: %s\n", kProg, terminal_safe(message).c_str());
  return code;
}

int usage_error(const std::string& message) {
  std::fputs(kUsage, stderr);
  return error(message, 2);
}

bool positive_number(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return false;
  // ERANGE: an overflow (inf, refused below) or an underflow to a subnormal
  // that is still a positive number, which Python's float() accepts too.
  if (errno != 0 && errno != ERANGE) return false;
  if (!std::isfinite(v) || v <= 0) return false;
  *out = v;
  return true;
}

bool indent_value(const std::string& text, int* out) {
  if (text.empty() || text.size() > 3) return false;
  int v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 16) return false;
  *out = v;
  return true;
}

// Parses argv into `args`; returns -1 to go on, else the exit code.
int parse(int argc, char** argv, Args* args) {
  bool only_traces = false;
  for (int i = 1; i < argc; ++i) {
    std::string token = argv[i];
    if (only_traces || token == "-" || token.empty() || token[0] != '-') {
      args->traces.push_back(token);
      continue;
    }
    if (token == "--") {
      only_traces = true;
      continue;
    }
    if (token == "-h" || token == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (token == "--json") continue;  // `gpuutil analyze --json` habits: the output is always JSON
    if (token == "--version") {
      std::printf("gpuutil %s\n", GPUUTIL_VERSION);
      return 0;
    }
    std::string name = token;
    std::optional<std::string> value;
    const size_t eq = token.find('=');
    if (token.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = token.substr(0, eq);
      value = token.substr(eq + 1);
    }
    const bool known = name == "--indent" || name == "--flops-per-step" || name == "--dtype" ||
                       name == "--peak-tflops" || name == "--max-memory" || name == "-o" || name == "--output";
    if (!known) return usage_error("unrecognized argument: " + token);
    if (!value) {
      if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] != '\0')) {
        return usage_error("argument " + name + ": expected one argument");
      }
      value = argv[++i];
    }
    if (name == "--indent") {
      if (!indent_value(*value, &args->indent)) {
        return usage_error("argument --indent: must be an integer between 0 and 16: '" + *value + "'");
      }
    } else if (name == "--flops-per-step" || name == "--peak-tflops") {
      double v = 0;
      if (!positive_number(*value, &v)) return usage_error("argument " + name + ": must be a positive number: '" + *value + "'");
      (name == "--flops-per-step" ? args->flops_per_step : args->peak_tflops) = v;
    } else if (name == "--dtype") {
      bool ok = false;
      for (const char* d : kDtypes) ok = ok || *value == d;
      if (!ok) {
        return usage_error("argument --dtype: invalid choice: '" + *value +
                           "' (choose from fp64, fp32, tf32, bf16, fp16, fp8, int8)");
      }
      args->dtype = *value;
    } else if (name == "--max-memory") {
      std::string why;
      if (!gpuutil::parse_memory_size(*value, &args->max_memory_bytes, &why)) {
        return usage_error("argument --max-memory: " + why);
      }
    } else {
      args->output = *value;
    }
  }
  if (args->traces.empty()) return usage_error("the following arguments are required: TRACE");
  return -1;
}

// gpuutil's own report (JSON or JSON Lines) rather than a trace: the
// Python command shows those; this one says so instead of importing them.
bool is_gpuutil_report(const std::string& head) {
  const size_t start = head.find_first_not_of(" \t\r\n");
  if (start == std::string::npos || head[start] != '{') return false;
  const std::string_view text(head);
  return text.substr(start, 200).find("\"schema\"") != std::string_view::npos &&
         text.substr(start, 300).find("\"gpuutil.") != std::string_view::npos;
}

std::string head_of_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(512, '\0');
  f.read(&head[0], static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  return head;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The importer's hint names the Python keyword; here it is the flag.
std::string with_cli_flags(std::string message) {
  const std::string keyword = "pass max_memory";
  const size_t at = message.find(keyword);
  if (at != std::string::npos) message.replace(at, keyword.size(), "pass --max-memory");
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (const int code = parse(argc, argv, &args); code >= 0) return code;

  // A directory (tensorboard_trace_handler's) stands for the traces in it.
  const gpuutil::TraceDirsResult expanded = gpuutil::expand_trace_dirs(args.traces);
  if (!expanded.ok) return error(expanded.error, 2);
  std::vector<gpuutil::TraceInput> inputs;
  const bool tty = isatty(STDERR_FILENO) != 0;
  for (const std::string& path : expanded.paths) {
    if (path == "-") {
      if (std::any_of(inputs.begin(), inputs.end(), [](const auto& in) { return in.fd == STDIN_FILENO; })) {
        return usage_error("standard input (-) can be given once");
      }
      inputs.push_back(gpuutil::TraceInput{"<stdin>", nullptr, STDIN_FILENO});
      continue;
    }
    // Only a regular file can be peeked at: a FIFO or pipe is read once.
    const bool regular = is_regular_file(path);
    if (expanded.paths.size() == 1 && regular && is_gpuutil_report(head_of_file(path))) {
      return error(path + " is a gpuutil report, not a trace: `gpuutil analyze " + path + "` shows it", 2);
    }
    struct stat st {};
    if (tty && regular && ::stat(path.c_str(), &st) == 0 && st.st_size > kProgressMinBytes) {
      std::fprintf(stderr, "importing %s (%.0f MB)...\n", path.c_str(), static_cast<double>(st.st_size) / 1e6);
    }
    inputs.push_back(gpuutil::TraceInput{path, nullptr});
  }

  gpuutil::ImportOptions import;
  import.memory_budget_bytes = args.max_memory_bytes;
  if (tty) {
    import.on_wait = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  }
  gpuutil::AnalysisOptions options;
  options.flops_per_step = args.flops_per_step;
  options.dtype = args.dtype;
  options.peak_tflops = args.peak_tflops;
  gpuutil::AnalyzeTracesResult result;
  try {
    result = gpuutil::analyze_traces(inputs, options, args.indent, import);
  } catch (const std::bad_alloc&) {
    return error("out of memory", 2);
  }
  if (!result.ok) return error(with_cli_flags(result.error), 2);
  result.json += '\n';

  if (args.output.empty()) {
    if (std::fwrite(result.json.data(), 1, result.json.size(), stdout) != result.json.size() || std::fflush(stdout) != 0) {
      if (errno == EPIPE) return 0;  // `gpuutil-analyze t.json.gz | head`: stop quietly
      return error(std::string("cannot write standard output: ") + std::strerror(errno), 1);
    }
    return 0;
  }
  std::FILE* f = std::fopen(args.output.c_str(), "wb");
  if (f == nullptr) return error("cannot write " + args.output + ": " + std::strerror(errno), 1);
  const bool written = std::fwrite(result.json.data(), 1, result.json.size(), f) == result.json.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !written) {
    return error("cannot write " + args.output + ": " + std::strerror(written ? errno : saved), 1);
  }
  return 0;
}
