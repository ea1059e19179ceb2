// The replay loop: trace records in order -> balancer -> Plan -> engine -> metrics, with the oracle's
// run of the same record beside it for the exposed overhead. Streaming: one record at a time.
#pragma once

#include <cstddef>
#include <functional>

#include "sim/hardware/experiment_spec.hpp"
#include "sim/plan/plan.hpp"
#include "sim/replay/layer_result.hpp"
#include "sim/report/layer_metrics.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

struct LayerOutcome {
  const TraceHeader& header;
  const TraceRecord& record;  ///< counts as replayed (remapped to the EP degree)
  const Plan& plan;
  const LayerResult& result;
  const LayerMetrics& metrics;
};

/// Replays `spec`'s trace (at most spec.max_records records when > 0) and calls `on_layer` for each.
/// Throws InputError when the trace does not fit the experiment (expert count, top-k, ranks that
/// cannot be remapped to the EP degree) or is corrupt. Returns the number of records replayed.
std::size_t replay(const ExperimentSpec& spec, const std::function<void(const LayerOutcome&)>& on_layer);

}  // namespace epsim
