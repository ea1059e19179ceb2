// The timeline's JSON, byte for byte, for a GPU's kernel and a flow, written out by hand from the
// format (sim/report/perfetto_writer.hpp): times in microseconds with six decimals, bytes rounded to
// whole numbers as printf's "%.0f" rounds (halves to even), flows as begin/end pairs with one id.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "sim/report/perfetto_writer.hpp"

using namespace epsim;

TEST_CASE("the timeline JSON of a kernel and a flow, to the byte") {
  Timeline t;
  t.events.push_back({1, Track::compute, Pass::forward, "gemm fwd", 1'500'000, 4'000'001, 0});
  t.events.push_back({0, Track::nic_out, Pass::backward, "grad dispatch 0->1", 2'000'000, 12'345'678'901, 2.5});
  t.events.push_back({1, Track::nvlink_out, Pass::forward, "combine 1->0", 0, 7, 1234567.5});
  std::ostringstream out;
  PerfettoWriter writer(out, 2, 2);
  writer.add(t, 1'000'000'000'000, "step 0 mb 0 layer 0");
  writer.close();
  const std::string json = out.str();
  // After the per-GPU metadata: the kernel at 1.5 us + 1 s, 2.500001 us long; the flows' begin and
  // end events, ids 1 and 2, their bytes 2.5 -> 2 and 1234567.5 -> 1234568 (ties to even).
  const std::string events =
      "{\"ph\":\"X\",\"name\":\"gemm fwd\",\"pid\":1,\"tid\":0,\"ts\":1000001.500000,\"dur\":2.500001,"
      "\"args\":{\"layer\":\"step 0 mb 0 layer 0\",\"pass\":\"forward\",\"bytes\":0}},\n"
      "{\"ph\":\"b\",\"cat\":\"nic_out\",\"name\":\"grad dispatch 0->1\",\"id\":1,\"pid\":0,\"tid\":4,"
      "\"ts\":1000002.000000,\"args\":{\"layer\":\"step 0 mb 0 layer 0\",\"pass\":\"backward\",\"bytes\":2}},\n"
      "{\"ph\":\"e\",\"cat\":\"nic_out\",\"name\":\"grad dispatch 0->1\",\"id\":1,\"pid\":0,\"tid\":4,"
      "\"ts\":1012345.678901},\n"
      "{\"ph\":\"b\",\"cat\":\"nvlink_out\",\"name\":\"combine 1->0\",\"id\":2,\"pid\":1,\"tid\":3,"
      "\"ts\":1000000.000000,\"args\":{\"layer\":\"step 0 mb 0 layer 0\",\"pass\":\"forward\",\"bytes\":1234568}},\n"
      "{\"ph\":\"e\",\"cat\":\"nvlink_out\",\"name\":\"combine 1->0\",\"id\":2,\"pid\":1,\"tid\":3,"
      "\"ts\":1000000.000007}\n]}\n";
  REQUIRE(json.size() > events.size());
  CHECK(json.substr(json.size() - events.size()) == events);
  CHECK(json.rfind("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", 0) == 0);
  CHECK(json.find("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"gpu 1 (node 0)\"}}") !=
        std::string::npos);
}
