// Nonlinear least squares (Levenberg-Marquardt on Eigen) for the models that are not linear in their
// parameters: a roofline's max() (GEMM), a min() of two bandwidths (EP kernels). The caller supplies the
// relative residuals (measured - model) / measured of every point as a function of the parameters; the
// Jacobian is taken by central differences. Standard errors come from s^2 (J'J)^-1 at the solution, as in
// linear_fit.hpp; a parameter no point is sensitive to (a zero Jacobian column: e.g. an SM limit when
// every point is link bound) is reported as not determined instead.
#pragma once

#include <functional>
#include <vector>

#include <Eigen/Dense>

namespace epsim {

struct NonlinearFit {
  Eigen::VectorXd params;
  Eigen::VectorXd stderr_;    ///< NaN when not determined or when points <= determined parameters
  Eigen::VectorXd residuals;  ///< relative residuals at the solution
  std::vector<bool> determined;
  double rel_rms = 0;
  int points = 0;
  int iterations = 0;
};

using ResidualFunction = std::function<Eigen::VectorXd(const Eigen::VectorXd& params)>;

/// Minimises |residuals(params)|^2 from `start`. Deterministic: no random restarts.
NonlinearFit fit_levenberg_marquardt(const ResidualFunction& residuals, const Eigen::VectorXd& start,
                                     int max_iterations = 200);

}  // namespace epsim
