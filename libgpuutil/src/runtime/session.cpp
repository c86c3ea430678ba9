// Live session core: pending events, step windows, per-step analysis,
// bounded memory (see gpuutil/session.h).
#include "gpuutil/session.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_set>

#include <unistd.h>

#include "analysis/host_findings.h"
#include "export/jsonl_sink.h"
#include "gpuutil/report_json.h"

namespace gpuutil {

namespace {
// Key of a thread known only by its OS tid so far (never a pthread_self() value).
constexpr int64_t kOsTidOnly = int64_t(1) << 40;
}  // namespace

Session::Session(SessionOptions options) : options_(std::move(options)) {
  owner_pid_ = getpid();
  store_.rank = options_.rank;
  store_.source = "live";
  store_.steps_source = "session";
  if (!options_.jsonl_path.empty()) {
    jsonl_ = std::make_unique<JsonlSink>(options_.jsonl_path);
    if (!jsonl_->ok()) {
      error_ = jsonl_->error();
      jsonl_.reset();
    }
  }
}

Session::~Session() {
  // A forked child destroying the parent's session (at its exit) must not
  // write the parent's pending steps again, nor take a lock a parent
  // thread may have held at the fork.
  if (owner_pid_ != getpid()) {
    if (jsonl_) jsonl_->abandon();
    return;
  }
  bool done;
  int64_t end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done = finished_;
    end = open_ ? std::max(current_.start_ns, complete_until_ns_) : 0;
  }
  if (!done) finish(end);
}

NameId Session::intern(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  return store_.names.intern(name);
}

uint32_t Session::thread_index(int64_t pid, int64_t key, std::string_view name, int64_t os_tid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& threads = store_.threads;
  auto name_it = [&](HostThread& t) {
    if (t.name.empty() && !name.empty()) t.name = std::string(name);
    if (t.os_tid == 0 && os_tid != 0) t.os_tid = os_tid;
  };
  for (uint32_t i = 0; i < threads.size(); ++i) {
    if (threads[i].pid == pid && threads[i].tid == key) {
      name_it(threads[i]);
      return i;
    }
  }
  if (os_tid != 0) {
    for (uint32_t i = 0; i < threads.size(); ++i) {
      if (threads[i].pid == pid && threads[i].os_tid == os_tid && threads[i].tid == (kOsTidOnly | os_tid)) {
        threads[i].tid = key;  // first met through CUPTI by OS tid: now its key is known
        name_it(threads[i]);
        return i;
      }
    }
  }
  threads.push_back({pid, key, std::string(name), os_tid});
  return static_cast<uint32_t>(threads.size() - 1);
}

uint32_t Session::thread_index_for_os_tid(int64_t pid, int64_t os_tid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& threads = store_.threads;
  for (uint32_t i = 0; i < threads.size(); ++i) {
    if (threads[i].pid == pid && threads[i].os_tid == os_tid) return i;
  }
  threads.push_back({pid, kOsTidOnly | os_tid, std::string(), os_tid});
  return static_cast<uint32_t>(threads.size() - 1);
}

void Session::set_devices(std::vector<DeviceInfo> devices) {
  std::lock_guard<std::mutex> lock(mu_);
  store_.devices = std::move(devices);
}

bool Session::admit_locked() {
  const size_t n = store_.activities.size() + store_.api_calls.size() + store_.ranges.size() + store_.counters.size();
  if (n < options_.max_pending_events) return true;
  since_last_report_.add(Diag::session_events_dropped);
  return false;
}

// A record from before the end of the last reported step came too late for
// that step: counted. Returns false when no unreported step can use it.
bool Session::late_locked(int64_t start_ns, int64_t end_ns) {
  if (start_ns >= reported_until_ns_) return true;
  since_last_report_.add(Diag::cupti_records_late);
  return end_ns > keep_from_ns_;
}

void Session::add_activity(const DeviceActivity& a) {
  std::lock_guard<std::mutex> lock(mu_);
  if (late_locked(a.start_ns, a.end_ns) && admit_locked()) store_.activities.push_back(a);
}

void Session::add_api_call(const HostApiCall& c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (late_locked(c.start_ns, c.end_ns) && admit_locked()) store_.api_calls.push_back(c);
}

void Session::add_range(const HostRange& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (admit_locked()) store_.ranges.push_back(r);
}

bool Session::add_staged_ranges(std::vector<StagedRange>& staged, bool wait) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return false;
  }
  for (const StagedRange& s : staged) {
    if (!admit_locked()) continue;  // counted there
    HostRange r;
    r.start_ns = s.start_ns;
    r.end_ns = s.end_ns;
    r.thread = s.thread;
    r.category = s.category;
    r.name = store_.names.intern(std::string_view(s.name, strnlen(s.name, sizeof s.name)));
    store_.ranges.push_back(r);
  }
  staged.clear();
  return true;
}

void Session::add_counter(const CounterSample& c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (admit_locked()) store_.counters.push_back(c);
}

void Session::count(Diag d, uint64_t n, std::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  since_last_report_.add(d, n, example);
}

void Session::set_steps_source(std::string_view source) {
  std::lock_guard<std::mutex> lock(mu_);
  store_.steps_source = std::string(source);
}

void Session::add_standing_diagnostic(Diag d, std::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [diag, text] : standing_) {
    if (diag == d && text == example) return;  // the same condition again (a collector restarted)
  }
  standing_.emplace_back(d, std::string(example));
}

void Session::begin_interval(Diag d, int64_t start_ns, std::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  intervals_.push_back({d, start_ns, std::numeric_limits<int64_t>::max(), std::string(example)});
}

void Session::end_interval(Diag d, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = intervals_.rbegin(); it != intervals_.rend(); ++it) {
    if (it->diag == d && it->end_ns == std::numeric_limits<int64_t>::max()) {
      it->end_ns = std::max(end_ns, it->start_ns);
      return;
    }
  }
}

void Session::set_flops_per_step(std::optional<double> flops, std::string_view source) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.analysis.flops_per_step = flops;
  options_.analysis.flops_source = std::string(source);
}

void Session::begin_step(int64_t step, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_step_locked(step, t_ns);
}

void Session::close_step(int64_t step, int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_step_locked(step, start_ns);
  end_step_locked(end_ns);
}

void Session::begin_step_locked(int64_t step, int64_t t_ns) {
  if (open_) {
    current_.end_ns = std::max(t_ns, current_.start_ns);
    closed_.push_back(current_);
  }
  if (last_step_end_ns_ != std::numeric_limits<int64_t>::min() && t_ns > last_step_end_ns_) {
    outside_steps_ns_ += t_ns - last_step_end_ns_;
  }
  current_ = {step, t_ns, t_ns};
  open_ = true;
}

void Session::end_step(int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  end_step_locked(t_ns);
}

void Session::end_step_locked(int64_t t_ns) {
  if (!open_) {
    since_last_report_.add(Diag::step_end_without_begin);
    return;
  }
  current_.end_ns = std::max(t_ns, current_.start_ns);
  closed_.push_back(current_);
  last_step_end_ns_ = current_.end_ns;
  open_ = false;
}

bool Session::step_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

void Session::mark_complete_until(int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  complete_until_ns_ = std::max(complete_until_ns_, t_ns);
}

// Drops every event no unreported step can need: events that end at or
// before keep_from_ns, except the launch calls of device work that is kept
// and the ranges around them (the kernels of a pipelined GPU run a step or
// more after their launch, and idle attribution looks up that launch).
void Session::prune_locked(int64_t keep_from_ns) {
  keep_from_ns_ = std::max(keep_from_ns_, keep_from_ns);
  std::unordered_set<uint64_t> launched;
  for (const DeviceActivity& a : store_.activities) {
    if (a.end_ns > keep_from_ns && a.correlation_id != 0) launched.insert(a.correlation_id);
  }
  int64_t host_from = keep_from_ns;
  for (const HostApiCall& c : store_.api_calls) {
    if (c.start_ns < host_from && launched.count(c.correlation_id) != 0) host_from = c.start_ns;
  }
  auto ends_by = [](int64_t t) { return [t](const auto& e) { return e.end_ns <= t; }; };
  store_.activities.erase(std::remove_if(store_.activities.begin(), store_.activities.end(), ends_by(keep_from_ns)),
                          store_.activities.end());
  store_.api_calls.erase(std::remove_if(store_.api_calls.begin(), store_.api_calls.end(), ends_by(host_from)),
                         store_.api_calls.end());
  store_.ranges.erase(std::remove_if(store_.ranges.begin(), store_.ranges.end(), ends_by(host_from)),
                      store_.ranges.end());
  store_.counters.erase(std::remove_if(store_.counters.begin(), store_.counters.end(),
                                       [keep_from_ns](const CounterSample& c) { return c.ts_ns <= keep_from_ns; }),
                        store_.counters.end());
  intervals_.erase(std::remove_if(intervals_.begin(), intervals_.end(),
                                  [this](const Interval& iv) { return iv.end_ns <= reported_until_ns_; }),
                   intervals_.end());
}

std::vector<StepOutput> Session::collect() {
  std::vector<StepOutput> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t done = 0;
    for (; done < closed_.size() && closed_[done].end_ns <= complete_until_ns_; ++done) {
      const StepWindow& w = closed_[done];
      store_.steps = {w};
      StepOutput o;
      o.report = analyze(store_, options_.analysis);
      store_.steps.clear();
      // Data problems counted since the previous report belong to this one.
      o.report.diagnostics.merge(since_last_report_);
      since_last_report_ = Diagnostics();
      for (const auto& [d, example] : standing_) o.report.diagnostics.add(d, 1, example);
      for (const Interval& iv : intervals_) {
        if (iv.start_ns < w.end_ns && iv.end_ns > w.start_ns) o.report.diagnostics.add(iv.diag, 1, iv.example);
      }
      reported_until_ns_ = std::max(reported_until_ns_, w.end_ns);
      totals_.add(o.report);
      o.report.summary.trace_span_ns = w.wall_ns();
      o.report.summary.outside_steps_ns = 0;
      o.json = report_to_json(o.report);
      if (keep_rank_steps_ > 0 && !o.report.steps.empty()) {
        if (auto rs = rank_step_of(o.report.steps.front(), store_.rank)) {
          if (rank_steps_.size() >= keep_rank_steps_) {
            rank_steps_.pop_front();
            ++rank_steps_dropped_;
          }
          rank_steps_.push_back(std::move(*rs));
        }
      }
      if (jsonl_ && !jsonl_->write_line(o.json)) since_last_report_.add(Diag::sink_write_failed);
      ++steps_reported_;
      out.push_back(std::move(o));
    }
    if (done > 0) {
      closed_.erase(closed_.begin(), closed_.begin() + static_cast<long>(done));
      int64_t keep_from = out.back().report.steps.empty() ? INT64_MIN : out.back().report.steps[0].end_ns;
      if (!closed_.empty()) keep_from = std::min(keep_from, closed_.front().start_ns);
      if (open_) keep_from = std::min(keep_from, current_.start_ns);
      prune_locked(keep_from);
    }
  }
  if (callback_) {
    for (const auto& o : out) callback_(o);
  }
  return out;
}

bool Session::write_jsonl_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!jsonl_) return false;
  if (jsonl_->write_line(line)) return true;
  since_last_report_.add(Diag::sink_write_failed);
  return false;
}

void Session::keep_rank_steps(size_t max_steps) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_rank_steps_ = max_steps;
  while (rank_steps_.size() > max_steps) {
    rank_steps_.pop_front();
    ++rank_steps_dropped_;
  }
}

std::vector<RankStep> Session::take_rank_steps(uint64_t* dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RankStep> out(std::make_move_iterator(rank_steps_.begin()), std::make_move_iterator(rank_steps_.end()));
  rank_steps_.clear();
  if (dropped) *dropped = rank_steps_dropped_;
  rank_steps_dropped_ = 0;
  return out;
}

std::vector<StepOutput> Session::finish(int64_t t_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_) {
      current_.end_ns = std::max(t_ns, current_.start_ns);
      closed_.push_back(current_);
      last_step_end_ns_ = current_.end_ns;
      open_ = false;
    }
    complete_until_ns_ = std::numeric_limits<int64_t>::max();
    finished_ = true;
  }
  return collect();
}

uint64_t Session::steps_reported() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_reported_;
}

int64_t Session::reported_until_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reported_until_ns_;
}

int64_t Session::outside_steps_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outside_steps_ns_;
}

size_t Session::pending_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_.activities.size() + store_.api_calls.size() + store_.ranges.size() + store_.counters.size();
}

RunTotals Session::run_totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  RunTotals t = totals_;
  // Run-level facts make run-level findings, not sums of per-step ones
  // (docs/findings.md): the time between steps, and on a host-only run the
  // main thread's shares over the whole run (a per-step title would quote
  // one step's share).
  std::vector<Finding> run;
  if (auto f = outside_steps_finding(t.steps, t.steps_wall_ns + outside_steps_ns_, outside_steps_ns_)) {
    run.push_back(std::move(*f));
  }
  if (t.devices.empty()) {
    std::map<int32_t, HostTotals> main;  // per rank, the busiest classified thread
    const auto classified = [](const HostThreadTotals& h) {
      return h.wall_ns - h.breakdown_ns[static_cast<int>(HostCategory::kOther)] -
             h.breakdown_ns[static_cast<int>(HostCategory::kCollective)];
    };
    std::map<int32_t, int64_t> best;
    for (const auto& [key, h] : t.threads) {
      const int32_t rank = key.first;
      if (best.count(rank) && classified(h) <= best[rank]) continue;
      best[rank] = classified(h);
      HostTotals& m = main[rank];
      m.rank = rank;
      m.wall_ns = h.wall_ns;
      m.steps = h.steps;
      m.ns = h.breakdown_ns;
    }
    std::vector<HostTotals> ranks;
    for (auto& [rank, m] : main) ranks.push_back(std::move(m));
    for (const char* id : {"host_dataloader", "host_sync", "host_optimizer"}) t.findings.erase(id);
    host_findings_of(ranks, run);
  }
  for (const Finding& f : run) {
    FindingTotals& ft = t.findings[f.id];
    ft.title = f.title;
    ft.fix = f.fix;
    ft.recoverable_ns = f.recoverable_ns;
    ft.steps = t.steps;
  }
  return t;
}

void Session::set_step_callback(std::function<void(const StepOutput&)> cb) {
  std::lock_guard<std::mutex> lock(mu_);
  callback_ = std::move(cb);
}

}  // namespace gpuutil
