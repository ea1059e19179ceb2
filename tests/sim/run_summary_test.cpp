// The summary `epsim run` prints: statistics over the steady state only, the warm-up records in a
// table of their own, n/a when every record is warm-up, and the resource bounding the critical path
// most often. Expected figures worked out by hand from the records below.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sim/report/run_summary.hpp"

namespace {

epsim::LayerMetrics record(double layer_us, bool warmup, const char* crit_bound) {
  epsim::LayerMetrics m;
  m.layer_time_us = layer_us;
  m.warmup = warmup;
  m.crit_bound = crit_bound;
  m.token_straggler_gpu = 1;
  m.last_gpu = 1;
  return m;
}

std::string print(const std::vector<epsim::LayerMetrics>& records) {
  epsim::RunSummary summary(2);
  for (const auto& m : records) summary.add(m);
  std::ostringstream out;
  summary.print(out);
  return out.str();
}

/// The printed "layer time (us)" lines, in order (steady table first).
std::vector<std::string> layer_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("  layer time (us)", 0) == 0) lines.push_back(l);
  return lines;
}

}  // namespace

TEST_CASE("run summary: mean, p50 and p95 over the steady state, warm-up records apart") {
  // Steady layer times 10..50 us: mean 30, p50 30, p95 at rank 0.95 x 4 = 3.8, 40 + 0.8 x 10 = 48.
  // Warm-up 100 and 300: mean 200, p50 200, p95 100 + 0.95 x 200 = 290.
  const std::string text = print({record(100, true, "NIC"), record(300, true, "NIC"), record(30, false, "SM"),
                                  record(10, false, "SM"), record(50, false, "NIC"), record(20, false, "SM"),
                                  record(40, false, "NIC")});
  INFO(text);
  CHECK(text.find("steady state: 5 records (the 2 warm-up records before them are summarised below)") !=
        std::string::npos);
  CHECK(text.find("warm-up: 2 records planned before the balancer's history was full") != std::string::npos);
  const auto lines = layer_lines(text);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("30.0        30.0        48.0        10.0        50.0") != std::string::npos);
  CHECK(lines[1].find("200.0       200.0       290.0       100.0       300.0") != std::string::npos);
  // Three of the five steady records are SM-bound; both warm-up records are NIC-bound.
  CHECK(text.find("critical path bounded by: SM in 3 of 5 records") != std::string::npos);
  CHECK(text.find("critical path bounded by: NIC in 2 of 2 records") != std::string::npos);
}

TEST_CASE("run summary: a trace too short to leave warm-up has no steady-state figures") {
  const std::string text = print({record(100, true, "SM"), record(300, true, "SM")});
  INFO(text);
  CHECK(text.find("steady state: n/a (all 2 records are the balancer's warm-up") != std::string::npos);
  const auto lines = layer_lines(text);
  REQUIRE(lines.size() == 1);  // only the warm-up table
  CHECK(lines[0].find("200.0       200.0       290.0") != std::string::npos);
}

TEST_CASE("run summary: without warm-up records there is one table and no warm-up line") {
  const std::string text = print({record(10, false, "SM"), record(20, false, "SM")});
  CHECK(text.find("warm-up") == std::string::npos);
  CHECK(text.find("steady state") == std::string::npos);
  const auto lines = layer_lines(text);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("15.0        15.0        19.5        10.0        20.0") != std::string::npos);
}

TEST_CASE("run summary: the last GPU's lead on the next, over the records") {
  // Leads 10, 30 and 50 us: mean 30, p50 30, p95 at rank 0.95 x 2 = 1.9, 30 + 0.9 x 20 = 48.
  std::vector<epsim::LayerMetrics> records;
  for (const double lead : {30.0, 10.0, 50.0}) {
    records.push_back(record(100, false, "SM"));
    records.back().last_gpu_lead_us = lead;
  }
  const std::string text = print(records);
  INFO(text);
  CHECK(text.find("  last GPU's lead on the next GPU (us)          30.0        30.0        48.0        10.0        50.0\n") !=
        std::string::npos);
  // It sits after the GEMM times and before the pass times.
  CHECK(text.find("GEMM time mean (us)") < text.find("last GPU's lead"));
  CHECK(text.find("last GPU's lead") < text.find("forward time (us)"));
}

TEST_CASE("run summary: the GPU named last says in how many of its records it was named on a tie") {
  // GPU 1 last in three records, two of them with no lead on the next GPU; GPU 0 once, alone.
  std::vector<epsim::LayerMetrics> records;
  for (const double lead : {0.0, 12.5, 0.0}) {
    records.push_back(record(100, false, "SM"));
    records.back().last_gpu_lead_us = lead;
  }
  records.push_back(record(100, false, "SM"));
  records.back().last_gpu = 0;
  records.back().last_gpu_lead_us = 0;
  const std::string tied = print(records);
  INFO(tied);
  CHECK(tied.find("  last to finish its forward GEMMs most often: gpu 1 in 3 of 4 records (in 2 of them tied with "
                  "another GPU: the lowest-numbered is named)\n") != std::string::npos);
  // With a lead in every record the line is as it was.
  for (epsim::LayerMetrics& m : records) m.last_gpu_lead_us = 3;
  const std::string led = print(records);
  CHECK(led.find("  last to finish its forward GEMMs most often: gpu 1 in 3 of 4 records\n") != std::string::npos);
  // One GPU has no other to tie with.
  epsim::RunSummary one(1);
  epsim::LayerMetrics alone = record(100, false, "SM");
  alone.last_gpu = 0;
  alone.token_straggler_gpu = 0;
  one.add(alone);
  std::ostringstream out;
  one.print(out);
  CHECK(out.str().find("  last to finish its forward GEMMs most often: gpu 0 in 1 of 1 records\n") != std::string::npos);
}
