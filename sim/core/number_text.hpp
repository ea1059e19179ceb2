// How epsim writes a number into a CSV or JSON-like text: 9 significant digits ("%.9g"), enough to
// read a double back to within its last digits and short enough to read, the same everywhere so
// that one figure reads the same in metrics.csv, gpus.csv and exact_check.csv.
#pragma once

#include <string>

namespace epsim {

/// `v` as "%.9g" writes it (so -0 as "-0", infinities as "inf").
std::string g9(double v);

}  // namespace epsim
