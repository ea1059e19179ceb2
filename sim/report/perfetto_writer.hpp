// Writes timelines as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing
// open. One process per GPU ("gpu 3 (node 0)"), one thread per resource track (compute, comm kernel,
// copy engine, NVLink out, NIC out, host CPU). Kernels and copies are complete events; flows may
// overlap on a link, so they are async events, which Perfetto draws on rows of their own. Events are
// streamed to the output as timelines are added; times are microseconds with picosecond decimals.
#pragma once

#include <ostream>
#include <string>

#include "sim/replay/timeline.hpp"

namespace epsim {

class PerfettoWriter {
 public:
  /// Writes to `out` (an output folder's checked file), which must outlive the writer.
  PerfettoWriter(std::ostream& out, int num_gpus, int gpus_per_node);
  /// Appends `timeline` shifted by `offset_ps`, its events tagged with `label` (e.g. "mb 0 layer 3").
  void add(const Timeline& timeline, Time_ps offset_ps, const std::string& label);
  /// Closes the JSON array; the stream's owner closes the file.
  void close();

 private:
  void emit(const std::string& event_json);
  /// Starts an event in buffer_: the separator from the previous one.
  void begin_event();

  std::ostream& out_;
  std::string buffer_;  ///< add's events, written to out_ a block at a time
  bool first_ = true;
  long long next_async_id_ = 1;
};

}  // namespace epsim
