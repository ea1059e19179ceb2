// The CSV form of a layer's metrics (sim/replay/layer_metrics.hpp): the column names, used alike for
// CSV columns, JSON keys and plot labels, and one row's values.
#pragma once

#include <string>
#include <vector>

#include "sim/replay/layer_metrics.hpp"

namespace epsim {

/// The column names, in CSV order, and one row's values formatted deterministically.
const std::vector<std::string>& layer_metric_names();
std::vector<std::string> layer_metric_values(const LayerMetrics& m);

}  // namespace epsim
