#include "hw/calibration/nonlinear_fit.hpp"

#include <cmath>
#include <limits>

namespace epsim {
namespace {

Eigen::MatrixXd jacobian(const ResidualFunction& f, const Eigen::VectorXd& p, Eigen::Index n) {
  Eigen::MatrixXd J(n, p.size());
  for (Eigen::Index j = 0; j < p.size(); ++j) {
    const double h = 1e-6 * std::max(1.0, std::abs(p(j)));
    Eigen::VectorXd up = p, down = p;
    up(j) += h;
    down(j) -= h;
    J.col(j) = (f(up) - f(down)) / (2 * h);
  }
  return J;
}

}  // namespace

NonlinearFit fit_levenberg_marquardt(const ResidualFunction& f, const Eigen::VectorXd& start, int max_iterations) {
  NonlinearFit fit;
  Eigen::VectorXd p = start;
  Eigen::VectorXd r = f(p);
  double cost = r.squaredNorm();
  const Eigen::Index n = r.size();
  double lambda = 1e-3;
  int it = 0;
  for (; it < max_iterations && cost > 0; ++it) {
    const Eigen::MatrixXd J = jacobian(f, p, n);
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * r;
    bool improved = false;
    while (lambda < 1e12) {
      Eigen::MatrixXd A = JtJ;
      // Marquardt's scaling by the diagonal, floored so that a zero column stays solvable (and unmoved).
      for (Eigen::Index j = 0; j < A.cols(); ++j) A(j, j) += lambda * std::max(JtJ(j, j), 1e-12);
      const Eigen::VectorXd step = A.ldlt().solve(-g);
      const Eigen::VectorXd trial = p + step;
      const Eigen::VectorXd rt = f(trial);
      const double ct = rt.squaredNorm();
      if (std::isfinite(ct) && ct < cost) {
        const double gain = (cost - ct) / cost;
        p = trial;
        r = rt;
        cost = ct;
        lambda = std::max(lambda / 10, 1e-12);
        improved = gain > 1e-14;
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
  }
  fit.params = p;
  fit.residuals = r;
  fit.iterations = it;
  fit.points = static_cast<int>(n);
  fit.rel_rms = n > 0 ? std::sqrt(cost / static_cast<double>(n)) : 0;

  const Eigen::MatrixXd J = jacobian(f, p, n);
  const Eigen::Index k = p.size();
  double largest = 0;
  for (Eigen::Index j = 0; j < k; ++j) largest = std::max(largest, J.col(j).norm() * std::max(1.0, std::abs(p(j))));
  fit.determined.assign(static_cast<std::size_t>(k), false);
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < k; ++j)
    if (J.col(j).norm() * std::max(1.0, std::abs(p(j))) > 1e-9 * largest && largest > 0) {
      fit.determined[static_cast<std::size_t>(j)] = true;
      cols.push_back(j);
    }
  fit.stderr_ = Eigen::VectorXd::Constant(k, std::numeric_limits<double>::quiet_NaN());
  const Eigen::Index m = static_cast<Eigen::Index>(cols.size());
  if (m > 0 && n > m) {
    Eigen::MatrixXd Jd(n, m);
    for (Eigen::Index c = 0; c < m; ++c) Jd.col(c) = J.col(cols[static_cast<std::size_t>(c)]);
    const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(Jd);
    if (qr.rank() == m) {
      const double s2 = cost / static_cast<double>(n - m);
      const Eigen::MatrixXd cov = s2 * (Jd.transpose() * Jd).inverse();
      for (Eigen::Index c = 0; c < m; ++c) fit.stderr_(cols[static_cast<std::size_t>(c)]) = std::sqrt(std::max(0.0, cov(c, c)));
    } else {
      for (Eigen::Index c = 0; c < m; ++c) fit.determined[static_cast<std::size_t>(cols[static_cast<std::size_t>(c)])] = false;
      // Rank deficient together: report which by dropping, one by one, columns that add no rank.
      Eigen::MatrixXd kept(n, 0);
      for (Eigen::Index c = 0; c < m; ++c) {
        Eigen::MatrixXd trial(n, kept.cols() + 1);
        trial << kept, Jd.col(c);
        if (Eigen::ColPivHouseholderQR<Eigen::MatrixXd>(trial).rank() == trial.cols()) {
          kept = trial;
          fit.determined[static_cast<std::size_t>(cols[static_cast<std::size_t>(c)])] = true;
        }
      }
    }
  }
  return fit;
}

}  // namespace epsim
