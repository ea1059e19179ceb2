#include "hw/calibration/linear_fit.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace epsim {

LinearFit fit_relative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  const Eigen::Index n = X.rows();
  const Eigen::Index p = X.cols();
  if (n != y.size() || p == 0 || n < p) throw std::invalid_argument("fit_relative: need at least as many points as parameters");
  if ((y.array() <= 0).any()) throw std::invalid_argument("fit_relative: every y must be > 0");
  const Eigen::VectorXd w = y.cwiseInverse();
  const Eigen::MatrixXd Xw = w.asDiagonal() * X;
  const Eigen::VectorXd yw = y.cwiseProduct(w);  // all ones
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(Xw);
  if (qr.rank() < p) throw std::invalid_argument("fit_relative: the points do not determine every parameter");
  LinearFit fit;
  fit.points = static_cast<int>(n);
  fit.coef = qr.solve(yw);
  const Eigen::VectorXd r = yw - Xw * fit.coef;  // relative residuals
  fit.rel_rms = std::sqrt(r.squaredNorm() / static_cast<double>(n));
  fit.stderr_ = Eigen::VectorXd::Constant(p, std::numeric_limits<double>::quiet_NaN());
  if (n > p) {
    const double s2 = r.squaredNorm() / static_cast<double>(n - p);
    const Eigen::MatrixXd cov = s2 * (Xw.transpose() * Xw).inverse();
    fit.stderr_ = cov.diagonal().cwiseMax(0.0).cwiseSqrt();
  }
  return fit;
}

LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  Eigen::MatrixXd X(x.size(), 2);
  for (std::size_t i = 0; i < x.size(); ++i) {
    X(i, 0) = 1.0;
    X(i, 1) = x[i];
  }
  return fit_relative(X, Eigen::Map<const Eigen::VectorXd>(y.data(), y.size()));
}

LinearFit fit_proportional(const std::vector<double>& x, const std::vector<double>& y) {
  Eigen::MatrixXd X(x.size(), 1);
  for (std::size_t i = 0; i < x.size(); ++i) X(i, 0) = x[i];
  return fit_relative(X, Eigen::Map<const Eigen::VectorXd>(y.data(), y.size()));
}

}  // namespace epsim
