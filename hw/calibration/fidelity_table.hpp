// Every measured point predicted three ways: on its preset as shipped, on the preset calibrated with
// the whole measurement set (fit_measurements + apply_calibration, per preset), and leave-one-out: on
// the preset calibrated with the set without that point, so that its error is a prediction's, not a
// fit's residual.
#pragma once

#include <string>
#include <vector>

#include "hw/calibration/fidelity_point.hpp"
#include "hw/calibration/fidelity_predict.hpp"
#include "hw/calibration/measurements.hpp"

namespace epsim {

struct FidelityRow {
  FidelityPoint point;
  FidelityPrediction preset;
  FidelityPrediction fitted;
  FidelityPrediction loo;
};

/// (predicted - measured) / measured.
double relative_error(const FidelityPrediction& predicted, double measured_us);

/// The rows of `sources`, in fidelity_points order. A file's preset is the hardware file of `models_dir`
/// named (name: or file stem, or that followed by a variant: "h100-sxm" finds h100-sxm-8) by its
/// header.hardware, else by `default_hardware`; a missing or bad preset is an InputError. A fit that
/// cannot determine its parameters leaves that column without a number and says why.
std::vector<FidelityRow> fidelity_rows(const std::vector<Measurements>& sources, const std::string& models_dir,
                                       const std::string& default_hardware);

}  // namespace epsim
