// Least squares for models that are linear in their parameters, y = X b, solved with Eigen. Timings
// span orders of magnitude (a 1 KiB copy and a 1 GiB copy), so residuals are relative: each row is
// weighted by 1 / y, which is ordinary weighted least squares under a constant relative noise.
#pragma once

#include <vector>

#include <Eigen/Dense>

namespace epsim {

struct LinearFit {
  Eigen::VectorXd coef;    ///< the parameters b
  Eigen::VectorXd stderr_;  ///< standard error of each parameter; NaN when points <= parameters
  double rel_rms = 0;      ///< sqrt(mean(((y - X b) / y)^2))
  int points = 0;
};

/// Fits y = X b minimising sum(((y - X b) / y)^2). Requires y > 0 and at least as many rows as
/// columns; throws std::invalid_argument when X is rank deficient (e.g. every x is equal).
LinearFit fit_relative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y);

/// y = intercept + slope * x: coef(0) is the intercept, coef(1) the slope.
LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y);
/// y = slope * x (a line through the origin): coef(0) is the slope.
LinearFit fit_proportional(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace epsim
