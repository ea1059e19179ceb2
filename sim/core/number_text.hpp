// How epsim writes a number into a CSV or JSON-like text: 9 significant digits ("%.9g"), enough to
// read a double back to within its last digits and short enough to read, the same everywhere so
// that one figure reads the same in metrics.csv, gpus.csv and exact_check.csv. And how the exact
// checks write an error, in the run summary and comparison.md alike.
#pragma once

#include <string>

namespace epsim {

/// `v` as "%.9g" writes it (so -0 as "-0", infinities as "inf").
std::string g9(double v);

/// A share (0.01 for 1%) as a signed percentage with 3 decimals, "+1.000%" (how the exact checks
/// write errors); one that rounds to zero reads "+0.000%", whichever its sign.
std::string signed_percent(double share);

}  // namespace epsim
